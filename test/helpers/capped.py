"""``python -m evaluation ARGS`` capped as Grand-Challenge caps a process: ``RLIMIT_DATA``, a
time limit, its own process group killed at the end, and what it used measured.

``cold=True`` (or ``EVALUATION_TEST_COLD=1`` in the environment) starts a fresh interpreter
for it (``measured_run.py``), exactly as a platform does; otherwise the command line runs in a
child forked from this test process's warm interpreter (``warm_grader.py``, started on first
use): the same ``evaluation/__main__.py`` under the same caps, without paying for Python's
start and the imports again each time.
"""

import atexit
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from helpers.grading import ROOT

HELPERS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    used: dict  # measured_run.py's report: exit, seconds, peak_mb, timed_out


def run(args: list[str], cwd: Path, cap_mb: int | None, time_limit: float, env: dict | None = None, cold: bool = False) -> Run:
    """The command line under ``RLIMIT_DATA`` = ``cap_mb`` (None: none) and ``time_limit``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    cold = cold or os.environ.get("EVALUATION_TEST_COLD") == "1"
    return (_cold if cold else _warm)(list(args), Path(cwd), None if cap_mb is None else cap_mb << 20, time_limit, env)


def _cold(args, cwd, data_limit, time_limit, env) -> Run:
    with tempfile.TemporaryDirectory(prefix="capped-") as folder:
        report = Path(folder) / "measured.json"
        limit = "none" if data_limit is None else str(data_limit)
        command = [sys.executable, str(HELPERS / "measured_run.py"), str(report), limit, str(time_limit), "--"]
        done = subprocess.run(
            [*command, sys.executable, "-m", "evaluation", *args],
            capture_output=True,
            text=True,
            timeout=time_limit + 60,
            cwd=cwd,
            env=env,
            errors="backslashreplace",
        )
        return Run(done.returncode, done.stdout, done.stderr, json.loads(report.read_text()))


_idle: list[subprocess.Popen] = []  # warm graders waiting for a command line
_idle_lock = threading.Lock()


@contextlib.contextmanager
def _warm_grader():
    """A warm grader of this process for one command line: an idle one, or a new one when
    every other is busy (tests run command lines from several threads)."""
    with _idle_lock:
        server = _idle.pop() if _idle else None
    if server is None or server.poll() is not None:
        server = subprocess.Popen(
            [sys.executable, str(HELPERS / "warm_grader.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        atexit.register(server.kill)
        assert server.stdout.readline() == "ready\n", "the warm grader did not start"
    yield server
    with _idle_lock:
        _idle.append(server)


def _warm(args, cwd, data_limit, time_limit, env) -> Run:
    with _warm_grader() as server, tempfile.TemporaryDirectory(prefix="capped-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        request = {
            "args": args,
            "cwd": str(cwd),
            "env": env,
            "data_limit": data_limit,
            "time_limit": time_limit,
            "stdout": str(out),
            "stderr": str(err),
        }
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        used = json.loads(server.stdout.readline())
        read = lambda path: path.read_bytes().decode("utf-8", "backslashreplace")  # noqa: E731
        code = used["exit"] if used["exit"] >= 0 else 128 - used["exit"]  # as measured_run.py exits
        return Run(code, read(out), read(err), used)
