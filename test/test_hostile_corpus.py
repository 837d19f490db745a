"""The hostile-submission corpus (``helpers/hostile.py``, ``helpers/hostile_work.py``), each
kind run through the command line as a platform runs it, capped as Grand-Challenge caps a
process (``helpers/capped.py``: every tenth kind in a fresh interpreter, the others forked
from a warm one):

- ``RLIMIT_DATA`` of ``CAP_MB`` for the grader and its workers, and the phase tells the grader
  it has ``MEMORY_LIMIT_MB``; the largest process's peak resident memory must stay below
  ``CAP_MB``, and the run must end within ``TIME_LIMIT_S``;
- the exit status is 2 with the whole submission rejected or the broken case listed under
  ``failures`` while the rest is scored, or 0 for legitimate data (``outcome``);
- the last stderr line names the problem and the file in the participant's terms: not a
  traceback, no raw control characters, no scratch path;
- no ground-truth file name or path (the ``MARKER``) appears in stdout, stderr or any file
  written;
- nothing is written outside the output folder: the submission and phase folders are
  unchanged, the working directory stays empty and the scratch space is cleaned up;
- the preflight (``python -m evaluation check``) against the phase's public copy ends as
  grading ended: the same exit status and, for a failure, the same last line, the one line
  Grand-Challenge shows the participant.

Each kind's time and peak are collected in ``MEASURED`` and summarised at the end of the run
(``conftest.pytest_terminal_summary``); with ``CORPUS_REPORT=FILE`` every kind's outcome and
last line are also written there (``helpers/write_rejection_catalogue.py`` turns them into
the participants' catalogue in ``docs/participants.md``).
"""

import json
import os
import tempfile
from pathlib import Path

import pytest
from helpers import capped, hostile, hostile_work
from helpers.grading import ROOT, validate_metrics
from helpers.hostile import CASE_FAILURE, MARKER, MEMORY_LIMIT_MB, PHASE_FAULT, SCORED
from helpers.preflight import Ending, check_args, publish
from helpers.tiers import sampled

CAP_MB = MEMORY_LIMIT_MB
TIME_LIMIT_S = 60
MEASURED: list[dict] = []
KINDS = hostile.KINDS + hostile_work.KINDS
COLD = {k.name for k in KINDS[::10]}  # a fresh interpreter for these, the warm grader's children for the others


def test_the_corpus_is_large_enough():
    assert len({k.name for k in KINDS}) == len(KINDS) >= 100


def test_the_participants_catalogue_lists_every_kind():
    """The participants' catalogue is generated from this corpus
    (helpers/write_rejection_catalogue.py); a kind added or renamed without regenerating it
    fails here."""
    text = (ROOT / "docs" / "participants.md").read_text()
    section = text.split("<!-- rejection-catalogue:start -->")[1].split("<!-- rejection-catalogue:end -->")[0]
    listed = [row.split(" | ")[0].removeprefix("| ") for row in section.strip().splitlines()[2:]]
    assert listed == [k.name for k in KINDS]


def snapshot(folder: Path) -> dict[str, tuple]:
    return {
        str(p.relative_to(folder)): (
            p.is_symlink(),
            p.stat(follow_symlinks=False).st_size if not p.is_dir() else 0,
            p.stat(follow_symlinks=False).st_mtime_ns,
        )
        for p in _entries(folder)
    }


def _entries(folder: Path):
    """Every entry below ``folder`` without recursion or following links (the corpus holds
    folders 1500 deep)."""
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as found:
            for entry in found:
                yield Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))


def _remove(folder: Path) -> None:
    """Delete ``folder``'s contents deepest first (shutil.rmtree recurses once per level, and
    pytest would fail to clean up a 1500-deep tree later)."""
    for path in sorted(_entries(folder), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o700)
            path.rmdir()
        else:
            path.unlink()


@pytest.fixture
def workspace():
    """A short folder (a socket's path must stay below 108 bytes, whatever TMPDIR and
    pytest-xdist's folders add), removed deepest first (the corpus holds trees 1500 folders
    deep, which pytest would fail to remove)."""
    root = Path(tempfile.mkdtemp(prefix="hostile-", dir="/tmp"))
    yield root
    _remove(root)
    root.rmdir()


@pytest.mark.parametrize("kind", sampled(KINDS, 6, ids=[k.name for k in KINDS]))
def test_hostile_submission(kind, workspace):
    tmp_path = workspace
    phase = kind.phase(tmp_path)
    submission = kind.submission(tmp_path)
    before = {"phase": snapshot(phase), "input": snapshot(submission)}
    workdir, scratch, output = tmp_path / "cwd", tmp_path / "scratch", tmp_path / "output"
    workdir.mkdir()
    scratch.mkdir()
    args = ["--input", str(submission), "--ground-truth", str(phase), "--output", str(output)]
    done = capped.run(args, workdir, CAP_MB, TIME_LIMIT_S, env={"TMPDIR": str(scratch)}, cold=kind.name in COLD)
    used = done.used
    last = Ending.of(done.code, done.stdout, done.stderr).last_line
    _record(kind, used, done.code, last)

    assert not used["timed_out"], f"ran past {TIME_LIMIT_S} s"
    assert used["peak_mb"] <= CAP_MB, f"peak {used['peak_mb']} MB"
    expected_exit = {SCORED: 0, PHASE_FAULT: 1}.get(kind.outcome, 2)
    assert done.code == expected_exit, f"exit {done.code}: {(done.stdout + done.stderr)[-1500:]}"
    if kind.outcome != SCORED:
        assert last.startswith("Case " if kind.outcome == PHASE_FAULT else "Submission rejected: "), last
        assert "Traceback" not in last and not last.startswith("  File ")
        assert last.isprintable(), repr(last)
        assert str(scratch) not in last and str(tmp_path) not in last, last
        for word in kind.words:
            assert word in last, f"{word!r} not in {last!r}"

    written = {p: p.read_bytes() for p in output.rglob("*") if p.is_file()} if output.exists() else {}
    for text in [done.stdout, done.stderr, *(b.decode("latin-1") for b in written.values())]:
        assert MARKER not in text and str(phase) not in text
    for content in written.values():
        assert str(scratch).encode() not in content

    if kind.outcome in (CASE_FAILURE, SCORED):
        metrics = json.loads((output / "metrics.json").read_text())
        validate_metrics(metrics)
        assert metrics["case"], "the other cases must still be scored"
        if kind.outcome == CASE_FAILURE:
            assert metrics["failures"] and all(f["kind"] == "submission" for f in metrics["failures"])
        if kind.check:
            kind.check(metrics)

    assert snapshot(phase) == before["phase"] and snapshot(submission) == before["input"]
    assert not any(workdir.iterdir()) and not any(scratch.iterdir())

    # the preflight against the public phase ends as grading ended
    public = publish(phase, tmp_path / "public")
    checked = capped.run(check_args(submission, public), workdir, CAP_MB, TIME_LIMIT_S, cold=kind.name in COLD)
    checked = Ending.of(checked.code, checked.stdout, checked.stderr)
    assert checked.same_as(Ending.of(done.code, done.stdout, done.stderr)), f"graded: {last}\nchecked: {checked}"


def _record(kind, used: dict, code: int, last: str) -> None:
    entry = {
        "kind": kind.name,
        "outcome": kind.outcome,
        "exit": code,
        "seconds": used["seconds"],
        "peak_mb": used["peak_mb"],
        "last_line": last.removeprefix("Submission rejected: ") if kind.outcome != SCORED else "",
    }
    MEASURED.append(entry)
    if os.environ.get("CORPUS_REPORT"):
        with open(os.environ["CORPUS_REPORT"], "a") as f:
            f.write(json.dumps(entry) + "\n")
