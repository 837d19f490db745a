"""The preflight ends as grading ends, in this process, for a representative kind of the
hostile corpus of each suite and format: the exit status is the same and, when the upload is
rejected or breaks the grader, so is the last stderr line. Every kind is checked so, capped as
a platform caps a process, by ``test_hostile_corpus.py``.
"""

import pytest
from helpers.hostile import KINDS
from helpers.preflight import check_args, grade_args, in_process, publish

REPRESENTATIVE = (
    "zip path traversal",
    "corrupted zarr chunks",
    "spacing mismatch",
    "10^6 empty channels",
    "segmentation: 120 000 instances in one class",
    "job output missing",
)


def _prepare(kind, root):
    phase = kind.phase(root)
    submission = kind.submission(root)
    return phase, submission, publish(phase, root / "public")


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_check_ends_as_grading_in_process(name, tmp_path, capsys):
    kind = next(k for k in KINDS if k.name == name)
    phase, submission, public = _prepare(kind, tmp_path)
    graded = in_process(grade_args(submission, phase, tmp_path / "output"), capsys)
    checked = in_process(check_args(submission, public), capsys)
    assert checked.same_as(graded), f"graded: {graded}\nchecked: {checked}"
