"""Running grading and the preflight on the same upload, the preflight against the public phase.

The command lines of both (``grade_args``, ``check_args``, the public copy made by ``publish``),
run in this process (``in_process``) or capped as a platform caps a process (``capped.py``);
``Ending`` is what a participant sees: the exit status and the last stderr line.
"""

from dataclasses import dataclass
from pathlib import Path


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


def in_process(args: list[str], capsys) -> Ending:
    """``python -m evaluation ARGS`` in this process (its workers are forked from it)."""
    from evaluation import cli

    capsys.readouterr()
    code = cli.main(args)
    captured = capsys.readouterr()
    return Ending.of(code, captured.out, captured.err)
