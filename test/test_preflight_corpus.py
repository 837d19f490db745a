"""The preflight ends as grading ends, for every kind of the hostile corpus.

Each kind's upload is graded against its full phase and checked (``python -m evaluation check``)
against the phase's public copy: the exit status must be the same and, when the upload is
rejected or breaks the grader, so must the last stderr line, the one line Grand-Challenge
shows the participant. Both runs are capped as the corpus caps them (``RLIMIT_DATA``, a time
limit). The fast variant runs a representative kind of each suite and format in this process.
"""

import tempfile
from pathlib import Path

import pytest
from helpers.hostile import KINDS, MEMORY_LIMIT_MB
from helpers.preflight import capped, check_args, grade_args, in_process, publish
from test_hostile_corpus import _remove

TIME_LIMIT_S = 120
REPRESENTATIVE = (
    "zip path traversal",
    "corrupted zarr chunks",
    "spacing mismatch",
    "10^6 empty channels",
    "segmentation: 120 000 instances in one class",
    "job output missing",
)


@pytest.fixture
def workspace():
    """A short folder (a socket's path must stay below 108 bytes under pytest-xdist's folders),
    removed deepest first (the corpus holds trees 1500 folders deep)."""
    root = Path(tempfile.mkdtemp(prefix="preflight-"))
    yield root
    _remove(root)
    root.rmdir()


def _prepare(kind, root):
    phase = kind.phase(root)
    submission = kind.submission(root)
    return phase, submission, publish(phase, root / "public")


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_check_against_the_public_phase_ends_as_grading(kind, workspace):
    phase, submission, public = _prepare(kind, workspace)
    workdir = workspace / "cwd"
    workdir.mkdir()
    graded = capped(grade_args(submission, phase, workspace / "output"), workdir, MEMORY_LIMIT_MB, TIME_LIMIT_S)
    checked = capped(check_args(submission, public), workdir, MEMORY_LIMIT_MB, TIME_LIMIT_S)
    assert checked.same_as(graded), f"graded: {graded}\nchecked: {checked}"


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_check_ends_as_grading_in_process(name, tmp_path, capsys):
    kind = next(k for k in KINDS if k.name == name)
    phase, submission, public = _prepare(kind, tmp_path)
    graded = in_process(grade_args(submission, phase, tmp_path / "output"), capsys)
    checked = in_process(check_args(submission, public), capsys)
    assert checked.same_as(graded), f"graded: {graded}\nchecked: {checked}"
