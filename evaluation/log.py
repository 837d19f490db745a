"""structlog configuration: JSON lines on **stdout** for the platforms' log collectors, a
readable console rendering when a person runs the grader in a terminal.

stderr is kept for the one line a participant reads when an upload cannot be scored. Both
platforms keep both streams, but Grand-Challenge shows a successful evaluation that wrote
anything on stderr with a *warning* badge (rse-grand-challenge ``components/models.py``
``ComponentJob.status_context``), and takes the participant's error message from the last
stderr line (``backends/utils.py`` ``user_error``; with sagemaker-shim 0.8.3 also in invoke
mode). Python's warnings are logged like everything else for the same reason.

Grand-Challenge keeps the last 500 lines of each stream and drops a line over 64 KiB (the
shim's stream reader, ``UserProcess._stream_to_external``): a rendered line is cut to
``MAX_LINE_CHARS``, and the grader ends with one summary line that repeats what the first lines
said (``cli.grade``).

Logs are public on CodaBench (participants see the scoring program's whole output unless the
organizer sets ``hide_output``), so every line passes through ``redact``: the ground truth's
location and the names it holds are replaced by ``<ground-truth>`` in every value, exception
tracebacks included. Tracebacks are structured (frames, exception type and message) and
never carry local variables, which could hold ground-truth values.
"""

import logging
import os
import re
import sys
import warnings
from pathlib import Path

import structlog
from structlog.tracebacks import ExceptionDictTransformer

REDACTED = "<ground-truth>"
MAX_LINE_CHARS = 16_384  # well below the 64 KiB at which Grand-Challenge drops a log line
_secrets: re.Pattern | None = None


def configure(level: str | None = None) -> None:
    level_name = (level or os.environ.get("EVALUATION_LOG_LEVEL", "info")).upper()
    renderer = (
        structlog.dev.ConsoleRenderer(colors=False) if sys.stdout.isatty() else structlog.processors.JSONRenderer(sort_keys=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            redact,
            renderer,
            _bounded,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level_name, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(),  # sys.stdout as it is when a line is written
        cache_logger_on_first_use=False,
    )
    warnings.showwarning = _log_warning


def _bounded(_logger, _method, line: str) -> str:
    """The rendered line, cut to ``MAX_LINE_CHARS`` (a longer one would be dropped whole)."""
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 13] + " [truncated]"


def _log_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for this process: a log line instead of text on stderr."""
    get("warnings").warning("python_warning", category=category.__name__, message=str(message), where=f"{filename}:{lineno}")


def hide_ground_truth(folder: Path, min_name_length: int = 4) -> None:
    """From now on, log lines never show ``folder`` (as given or resolved, with whatever path
    follows it) nor the names of the files and folders at its top (the phase's own option
    values name them), except ``phase.yaml`` and names shorter than ``min_name_length``."""
    global _secrets
    folder = Path(folder)
    paths = {str(folder), str(folder.absolute()), str(folder.resolve())}
    names = set()
    try:
        names = {p.name for p in folder.iterdir() if p.name != "phase.yaml" and len(p.name) >= min_name_length}
    except OSError:
        pass
    alternatives = [re.escape(p) + r"[^\s'\"]*" for p in sorted(paths, key=len, reverse=True)]
    alternatives += [re.escape(n) for n in sorted(names, key=len, reverse=True)]
    _secrets = re.compile("|".join(alternatives))


def redact(_logger, _method, event_dict: dict) -> dict:
    """structlog processor: every string in the event, however nested, without the ground
    truth's paths and names."""
    return _scrub(event_dict) if _secrets is not None else event_dict


def _scrub(value):
    if isinstance(value, str):
        return _secrets.sub(REDACTED, value)
    if isinstance(value, dict):
        return {key: _scrub(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item) for item in value]
    return value


def get(name: str | None = None):
    return structlog.get_logger(name)
