"""The two kinds of failure a run can end in, and the exit codes they map to.

A participant sees only the last line of stderr (Grand-Challenge shows nothing else), so a
``SubmissionError`` message must say what to fix in the participant's terms and must never
contain ground-truth values or paths. Everything else is the organizer's or our problem.
"""

import re
import sys

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_SUBMISSION = 2

# The last line of a run that failed for any other reason than the submission (the cause is in
# the log above it, which a participant may not see).
INTERNAL_ERROR_LINE = (
    "Evaluation failed because of an internal error of the grader, not because of your submission; "
    "please contact the challenge organizers."
)


# Characters that must not reach a terminal or a web page verbatim: C0/C1 controls, line and
# paragraph separators, bidirectional overrides (they can make a name read as something else).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LONG_WORD = re.compile(r"\S{121,}")


def printable(text: str) -> str:
    """``text`` as one safe line: control characters and undecodable bytes escaped, words
    longer than 120 characters (a 4 KB file name) shortened in the middle."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return _LONG_WORD.sub(lambda m: f"{m.group()[:80]}...{m.group()[-30:]}", text)


class GraderError(Exception):
    """Base class: a failure with a message meant to be shown as is (made printable here, so
    no caller has to remember to escape the names it quotes)."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str = ""):
        super().__init__(printable(str(message)))


class SubmissionError(GraderError):
    """The submission cannot be scored as uploaded; the participant has to fix it."""

    exit_code = EXIT_SUBMISSION


class PhaseError(GraderError):
    """The phase (config or ground truth) is broken: the organizer has to fix it."""

    exit_code = EXIT_INTERNAL


def last_line(text: str) -> None:
    """A line for the participant, plain text on stderr (the log is on stdout); the last one a
    run writes is the line the platform shows."""
    sys.stdout.flush()
    print(" ".join(text.split()), file=sys.stderr, flush=True)
