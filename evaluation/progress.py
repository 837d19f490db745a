"""Progress of a long run at a terminal: cases done and time left, on stderr.

Only when stderr is a terminal: the platforms run the grader without one (their logs must hold
JSON lines and, on stderr, the participant's line alone), so they never see a progress line.
At a terminal the line is rewritten in place (the log lines a person sees on stdout write over
it) and erased when the run ends, so that the participant's line, when there is one, stays the
last line of stderr.
"""

import sys
import time

_ERASE = "\r\x1b[K"


class Progress:
    """``update(done, total)`` after each finished case; ``close()`` erases the line. The time
    left is the pace so far times the cases left (an estimate: cases differ in size)."""

    def __init__(self, what: str, stream):
        self.what, self.stream, self.started, self.shown = what, stream, time.monotonic(), False

    def update(self, done: int, total: int) -> None:
        elapsed = time.monotonic() - self.started
        left = f", about {duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
        # the cursor goes back to the line's start: a log line on stdout then writes over it
        self.stream.write(f"{_ERASE}{self.what}: {done}/{total} cases done{left}\r")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write(_ERASE)
            self.stream.flush()
            self.shown = False


class _Silent(Progress):
    def __init__(self):
        super().__init__("", None)

    def update(self, done: int, total: int) -> None:
        pass


def at_terminal(what: str, stream=None) -> Progress:
    """A progress line on ``stream`` (stderr) if it is a terminal, else one that shows nothing."""
    stream = stream or sys.stderr
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        interactive = False
    return Progress(what, stream) if interactive else _Silent()


def duration(seconds: float) -> str:
    """'42 s', '3 min 5 s', '1 h 12 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
