"""Running grading and the preflight on the same upload, the preflight against the public phase.

``both_ways`` grades an upload against the full phase and checks it against the phase's public
copy (``python -m evaluation publish``), each run capped as Grand-Challenge caps a process (the
hostile corpus's ``measured_run``) or in this process; ``Ending`` is what a participant sees:
the exit status and the last stderr line.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers.grading import ROOT

MEASURE = Path(__file__).resolve().parent / "measured_run.py"


@dataclass(frozen=True)
class Ending:
    code: int
    last_line: str
    output: str = ""  # stdout and stderr, for messages

    @classmethod
    def of(cls, code: int, stdout: str, stderr: str) -> "Ending":
        lines = [line for line in stderr.splitlines() if line.strip()]
        return cls(code, lines[-1] if lines else "", (stdout + stderr)[-3000:])

    def same_as(self, graded: "Ending") -> bool:
        """The preflight ends as grading ends: the same status and, for a failure, the same
        last line (a success of the preflight says 'Would be scored', grading says nothing)."""
        if self.code != graded.code:
            return False
        return self.last_line.startswith("Would be scored: ") if graded.code == 0 else self.last_line == graded.last_line


def publish(phase: Path, output: Path) -> Path:
    from evaluation import phase as phases
    from evaluation.preflight import publish_phase

    publish_phase(phases.load(phase), output)
    return output


def grade_args(submission: Path, phase: Path, output: Path) -> list[str]:
    return ["--input", str(submission), "--ground-truth", str(phase), "--output", str(output), "--workers", "2"]


def check_args(submission: Path, phase: Path) -> list[str]:
    return ["check", "--input", str(submission), "--phase", str(phase), "--workers", "2"]


def capped(args: list[str], workdir: Path, cap_mb: int, time_limit: float) -> Ending:
    """``python -m evaluation ARGS`` under ``RLIMIT_DATA`` = ``cap_mb`` and a time limit."""
    report = workdir / "measured.json"
    command = [sys.executable, str(MEASURE), str(report), str(cap_mb << 20), str(time_limit), "--"]
    command += [sys.executable, "-m", "evaluation", *args]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=time_limit + 60,
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        errors="backslashreplace",
    )
    assert not json.loads(report.read_text())["timed_out"], f"{args[0]} ran past {time_limit} s"
    return Ending.of(done.returncode, done.stdout, done.stderr)


def in_process(args: list[str], capsys) -> Ending:
    """``python -m evaluation ARGS`` in this process (its workers are forked from it)."""
    from evaluation import cli

    capsys.readouterr()
    code = cli.main(args)
    captured = capsys.readouterr()
    return Ending.of(code, captured.out, captured.err)
