"""structlog configuration: JSON lines on stderr for the platforms' log collectors, a readable
console rendering when a person runs the grader in a terminal."""

import logging
import os
import sys

import structlog


def configure(level: str | None = None) -> None:
    level_name = (level or os.environ.get("EVALUATION_LOG_LEVEL", "info")).upper()
    renderer = (
        structlog.dev.ConsoleRenderer(colors=False)
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer(sort_keys=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level_name, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get(name: str | None = None):
    return structlog.get_logger(name)
