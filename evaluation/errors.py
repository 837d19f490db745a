"""The two kinds of failure a run can end in, and the exit codes they map to.

A participant sees only the last line of stderr (Grand-Challenge shows nothing else), so a
``SubmissionError`` message must say what to fix in the participant's terms and must never
contain ground-truth values or paths. Everything else is the organizer's or our problem.
"""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_SUBMISSION = 2


class GraderError(Exception):
    """Base class: a failure with a message meant to be shown as is."""

    exit_code = EXIT_INTERNAL


class SubmissionError(GraderError):
    """The submission cannot be scored as uploaded; the participant has to fix it."""

    exit_code = EXIT_SUBMISSION


class PhaseError(GraderError):
    """The phase (config or ground truth) is broken: the organizer has to fix it."""

    exit_code = EXIT_INTERNAL
