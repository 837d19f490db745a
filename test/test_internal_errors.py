"""Internal errors: the organizer's phase is broken or the grader fails. The participant sees a
neutral last line and exit 1; the organizer finds the cause in the JSON log (with a structured
traceback when the error was not anticipated); no log line, traceback included, shows the
ground truth's paths or names (CodaBench shows participants the whole log)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.grading import ROOT
from helpers.hostile import MARKER, cellmap_phase, cellmap_submission, tomo_phase, tomo_submission

NEUTRAL = "Evaluation failed because of an internal error of the grader"


def _run(submission: Path, phase: Path, output: Path):
    """The grader as CodaBench runs it (the submission in input/res): what participants see. Run
    locally, the organizer's own run, the last line names the cause instead."""
    platform_input = output.with_name(f"{output.name}-input")
    shutil.copytree(submission, platform_input / "res")
    return subprocess.run(
        [sys.executable, "-m", "evaluation", "--platform", "codabench", "--input", str(platform_input)]
        + ["--ground-truth", str(phase), "--output", str(output)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _events(log: str) -> list[dict]:
    return [json.loads(line) for line in log.splitlines() if line.startswith("{")]


def _assert_internal(done, phase: Path, output: Path):
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, (done.stdout + done.stderr)[-2000:]
    assert lines[-1].startswith(NEUTRAL)
    written = [p.read_text(errors="replace") for p in output.rglob("*") if p.is_file()] if output.is_dir() else []
    for text in [done.stdout, done.stderr, *written]:
        assert MARKER not in text and str(phase) not in text and str(phase.resolve()) not in text


def _break_truth_chunks(phase: Path) -> None:
    for chunk in (phase / f"{MARKER}-truth.zarr" / "crop101" / "mito").rglob("[0-9]*"):
        if chunk.is_file():
            chunk.write_bytes(b"garbage" * 9)


def test_a_corrupt_truth_fails_its_case_as_internal_without_naming_the_truth(tmp_path):
    phase, submission = cellmap_phase(tmp_path), cellmap_submission(tmp_path)
    _break_truth_chunks(phase)
    done = _run(submission, phase, tmp_path / "out")
    _assert_internal(done, phase, tmp_path / "out")
    failed = [e for e in _events(done.stdout) if e["event"] == "case_failed"]
    assert failed and failed[0]["kind"] == "internal" and "cannot be read" in failed[0]["message"]


def test_a_missing_truth_file_names_the_step_not_the_file(tmp_path):
    phase, submission = tomo_phase(tmp_path), tomo_submission(tmp_path)
    shutil.rmtree(phase / "A")
    done = _run(submission, phase, tmp_path / "out")
    _assert_internal(done, phase, tmp_path / "out")
    message = next(e for e in _events(done.stdout) if e["event"] == "phase_or_grader_error")["message"]
    assert "time step A" in message and "does not exist" in message


def test_an_unexpected_failure_leaves_a_traceback_for_the_organizer(tmp_path):
    """An output path that is a file: the grader cannot write metrics.json. The log carries
    the exception and its frames (no local variables), the participant a neutral line."""
    phase, submission = cellmap_phase(tmp_path), cellmap_submission(tmp_path)
    output = tmp_path / "out"
    output.write_text("not a folder")
    done = _run(submission, phase, output)
    assert done.returncode == 1 and [l for l in done.stderr.splitlines() if l.strip()][-1].startswith(NEUTRAL)
    event = next(e for e in _events(done.stdout) if e["event"] == "internal_error")
    exception = event["exception"][0]
    assert exception["exc_type"] in ("NotADirectoryError", "FileExistsError") and exception["frames"]
    assert all("locals" not in frame or not frame["locals"] for frame in exception["frames"])
    assert MARKER not in done.stdout + done.stderr and str(phase) not in done.stdout + done.stderr


@pytest.mark.parametrize("wrapping", [True, False])
def test_a_ground_truth_folder_without_a_phase_at_its_top_is_refused(tmp_path, wrapping):
    """--ground-truth pointing at an extracted tarball: one wrapping folder is looked through
    (platform folders only); a folder of several without phase.yaml is the organizer's error."""
    from evaluation.errors import PhaseError
    from evaluation.platforms.base import phase_folder

    phase = cellmap_phase(tmp_path)
    extracted = tmp_path / "extracted"
    extracted.mkdir()
    shutil.move(str(phase), extracted / "phase")
    if not wrapping:
        (extracted / "other").mkdir()
        with pytest.raises(PhaseError, match="no phase.yaml"):
            phase_folder(extracted, "the ground-truth tarball")
    else:
        assert phase_folder(extracted, "the ground-truth tarball") == extracted / "phase"
