"""Names a participant chooses (model folders, model ids) become keys of metrics.json,
leaderboard columns, file names and plot labels. Two rules keep such a name from taking the
grader's place or breaking an output:

- a length bound, checked where the name is first read, so the participant hears of it before
  anything is scored (a file name holds at most 255 bytes, a platform's column key far fewer);
- a namespace: a flat key made from a participant's name is ``<name>/<key>``. A folder name
  cannot hold a '/', and no key of the grader's own does, so no name can stand for a grader's
  key nor two names for one key.
"""

from evaluation.errors import SubmissionError, printable

MAX_BYTES = 64
SEPARATOR = "/"


def checked(name: str, what: str) -> str:
    """``name`` if it can name outputs: not empty, at most ``MAX_BYTES`` bytes, no separator."""
    size = len(name.encode("utf-8", "surrogateescape"))
    if not name or size > MAX_BYTES:
        raise SubmissionError(f"{what} '{printable(name)}' is {size} bytes long; name it in 1 to {MAX_BYTES} bytes")
    if SEPARATOR in name:
        raise SubmissionError(f"{what} '{printable(name)}' holds a '{SEPARATOR}'; rename it")
    return name


def key(name: str, grader_key: str) -> str:
    """The flat key of ``grader_key`` for the participant's ``name``d part (a model)."""
    return f"{name}{SEPARATOR}{grader_key}"
