"""The preflight ends as grading ends for the suites' malformed conformance uploads
(``helpers/malformed.py``: what test_cli.py and each suite's tests reject), and the preflight's
own promises: a full phase is checked as its public copy is, ``--score`` grades as the platform
does, progress is shown at a terminal only, the estimate follows the runner's schedule."""

import io
import json

import pytest
from helpers.grading import ROOT
from helpers.malformed import MALFORMED
from helpers.preflight import check_args, grade_args, in_process, publish

from evaluation.contract import Resources, Task
from evaluation.progress import at_terminal
from evaluation.runner import WORKER_BASELINE_BYTES, schedule

FAST = (
    "cellmap: one corrupt chunk",
    "multiclass: two broken cases",
    "annotators: a prediction of another shape",
    "fisbe: negative ids",
    "tomo_foam: shape",
    "tomo_fuelcell: a wrong slice count",
)
CASES = [pytest.param(name, marks=() if name in FAST else pytest.mark.slow) for name in MALFORMED]


@pytest.mark.parametrize("name", CASES)
def test_check_against_the_public_phase_ends_as_grading(name, tmp_path, capsys):
    phase, submission = MALFORMED[name](tmp_path)
    public_dir = publish(phase, tmp_path / "public")
    graded = in_process(grade_args(submission, phase, tmp_path / "output"), capsys)
    assert graded.code == 2, graded  # each is a rejection of the suite's own tests
    checked = in_process(check_args(submission, public_dir), capsys)
    assert checked.same_as(graded), f"graded: {graded}\nchecked: {checked}"


def test_a_full_phase_is_checked_as_its_public_copy(tmp_path, capsys):
    phase, submission = MALFORMED["multiclass: two broken cases"](tmp_path)
    against_public = in_process(check_args(submission, publish(phase, tmp_path / "public")), capsys)
    against_full = in_process([*check_args(submission, phase), "--output", str(tmp_path / "summary")], capsys)
    assert against_full.last_line == against_public.last_line and against_full.code == against_public.code == 2
    summary = json.loads((tmp_path / "summary" / "check.json").read_text())
    assert [f["case"] for f in summary["failures"]] == ["img1", "img3"] and summary["exit"] == 2
    assert not list(phase.rglob("*.json")), "the check writes nothing into the phase"


def test_check_score_grades_as_the_platform(tmp_path, capsys):
    submission = ROOT / "examples" / "cellmap" / "submission"
    graded = in_process(grade_args(submission, ROOT / "ground-truth", tmp_path / "graded"), capsys)
    scored = in_process([*check_args(submission, ROOT / "ground-truth"), "--score", "--output", str(tmp_path / "scored")], capsys)
    assert graded.code == scored.code == 0
    assert (tmp_path / "scored" / "metrics.json").read_bytes() == (tmp_path / "graded" / "metrics.json").read_bytes()


def test_check_score_refuses_a_public_phase(tmp_path, capsys):
    public_dir = publish(ROOT / "ground-truth", tmp_path / "public")
    scored = in_process([*check_args(ROOT / "examples" / "cellmap" / "submission", public_dir), "--score"], capsys)
    assert scored.code == 1 and "public phase" in scored.output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_at_a_terminal_only_and_erased():
    assert not at_terminal("scoring", io.StringIO()).shown
    quiet = at_terminal("scoring", io.StringIO())
    quiet.update(1, 4)
    assert quiet.stream is None
    stream = _Terminal()
    line = at_terminal("scoring", stream)
    line.update(0, 4)
    line.update(2, 4)
    line.close()
    text = stream.getvalue()
    assert "scoring: 0/4 cases done" in text and "scoring: 2/4 cases done, about " in text and " left" in text
    assert text.endswith("\r\x1b[K")  # the participant's last line stays the last line


def test_the_estimate_follows_the_runners_schedule():
    """Two workers, 3 GiB for both: the two large tasks cannot run together."""
    gib = 2**30
    tasks = [Task(key, None, memory_bytes=size * gib - WORKER_BASELINE_BYTES) for key, size in (("a", 2), ("b", 2), ("c", 1))]
    seconds = {"a": 10.0, "b": 10.0, "c": 4.0}
    wall, peak = schedule(tasks, seconds, Resources(workers=2, memory_bytes=3 * gib))
    assert wall == 20.0 and peak == 3 * gib  # a with c, then b
    wall, peak = schedule(tasks, seconds, Resources(workers=3, memory_bytes=8 * gib))
    assert wall == 10.0 and peak == 5 * gib
    refused = [Task("big", None, memory_bytes=10 * gib), *tasks[2:]]
    assert schedule(refused, {"big": 100.0, "c": 4.0}, Resources(workers=2, memory_bytes=3 * gib)) == (4.0, gib)


def test_the_first_corrupt_chunk_in_order_is_named_however_the_threads_run():
    """Chunks decode on several threads; the failure reported is the first in the chunks'
    order, so grading names the same chunk on every run, and the preflight names it too."""
    import time

    from evaluation.readers.zarr_store.threads import run_tasks

    def fails(name, delay):
        def task():
            time.sleep(delay)
            raise ValueError(name)

        return task

    tasks = [lambda: None, fails("chunk 1", 0.3), lambda: None, fails("chunk 3", 0.0), lambda: None]
    for _ in range(3):
        with pytest.raises(ValueError, match="chunk 1"):
            run_tasks(tasks, workers=4)
