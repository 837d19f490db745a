"""The two kinds of failure a run can end in, the exit codes they map to, and the one
refusal every reader raises.

A participant sees only the last line of stderr (Grand-Challenge shows nothing else), so a
``SubmissionError`` message must say what to fix in the participant's terms and must never
contain ground-truth values or paths. Everything else is the organizer's or our problem.

Readers do not know whose file they read: they raise ``Unusable`` ("this file is unusable
because ..."). Whoever asked for the file does know, and assigns the blame once, with
``participant_file()`` (the upload: ``SubmissionError``, exit 2) or ``organizer_file()`` (the
phase's ground truth: ``PhaseError``, exit 1). An ``Unusable`` that reaches the runner or the
command line unassigned is our bug and is reported as an internal error with its traceback;
so is any other exception a reader raises: only a refusal is the participant's fault.
"""

import re
import sys
from contextlib import contextmanager

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_SUBMISSION = 2

# The last line of a run that failed for any other reason than the submission (the cause is in
# the log above it, which a participant may not see).
INTERNAL_ERROR_LINE = (
    "Evaluation failed because of an internal error of the grader, not because of your submission; "
    "please contact the challenge organizers."
)


_LONG_WORD = re.compile(r"\S{121,}")


def printable(text: str) -> str:
    """``text`` as one safe line: every character ``str.isprintable`` refuses is escaped as
    Python writes it (``\\x1b``, ``\\u200b``, ``\\U000e0041``): C0/C1 controls, the format
    characters (Unicode Cf: bidirectional marks and overrides, zero-width spaces and joiners,
    the Arabic letter mark, soft hyphens, word joiners, invisible operators, tag characters),
    line and paragraph separators (Zl, Zp), unassigned and private-use code points and spaces
    other than ' ', any of which can make a name read as something else. Undecodable bytes
    are escaped, and words longer than 120 characters (a 4 KB file name) shortened in the
    middle."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
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


class Unusable(Exception):
    """A file (or a value read from one) cannot be used as it is: "this file is unusable
    because ...". Raised by the readers, which do not know whose file it is; the message names
    the file as the caller displays it and says what is wrong (and, where it can, what to do
    instead), and is made printable here. See ``participant_file`` / ``organizer_file``."""

    def __init__(self, message: str = ""):
        super().__init__(printable(str(message)))


@contextmanager
def participant_file():
    """The files read inside are the participant's: a refusal is theirs to fix (exit 2).
    (Running out of memory on them is theirs too: the command line refuses the submission when
    its intake does, the runner fails the task that does, with the memory it had.)"""
    try:
        yield
    except Unusable as exc:
        raise SubmissionError(str(exc)) from None


@contextmanager
def organizer_file():
    """The files read inside are the organizer's (the phase's ground truth): a refusal is a
    broken phase (exit 1, the message in the log, never shown to the participant)."""
    try:
        yield
    except Unusable as exc:
        raise PhaseError(str(exc)) from None
