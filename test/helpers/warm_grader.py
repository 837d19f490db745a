"""A warm interpreter that runs ``python -m evaluation`` command lines for the corpus tests,
each in a forked child capped as ``measured_run.py`` caps a fresh process.

Starting Python, importing numpy, scipy, numba, matplotlib and the suites and loading the
compiled kernels from numba's cache cost about 1.5 s of the 2 s a rejected upload takes, and
the hostile corpus runs some 370 command lines (grading and the preflight). This process pays
for that once, then forks one child per command line. The child runs ``evaluation/__main__.py``
as ``python -m evaluation`` runs it (``runpy``), in its own session, under ``RLIMIT_DATA`` if
one is given, in the given folder and environment, stdin from /dev/null and stdout and stderr
into files; it is killed with its workers past the time limit. The answer is ``measured_run.py``'s report; the
peak includes what the child inherited (this process's imports), which a fresh interpreter
that scores the same upload would have imported too.

Protocol: one JSON request per line on stdin (``args``, ``cwd``, ``env``, ``data_limit``,
``time_limit``, ``stdout``, ``stderr``), one JSON report per line on stdout.
"""

import atexit
import io
import json
import os
import resource
import runpy
import signal
import sys
import tempfile
import time
import traceback


def warm() -> None:
    """Import what grading imports and load every kernel the image's build compiles
    (``Dockerfile``), so that no child pays for them."""
    from evaluation import figures, numba_cache, suites

    numba_cache.use_install_cache(numba_cache.compiled_folders())  # as cli.run does: the image's kernels
    import evaluation.cli  # noqa: F401
    from evaluation.metrics import label_stats, lee_thinning
    from evaluation.metrics.hausdorff import scans as hausdorff_scans
    from evaluation.suites import segmentation
    from evaluation.suites.cellmap import linear

    for name in suites.names():
        suites.get(name)
    figures.pyplot()
    lee_thinning.warm_up()
    label_stats.warm_up()
    hausdorff_scans.warm_up()
    linear.warm_up([bool, "uint8", "float32", "float64"])
    segmentation.warm_up_every_definition()


def child(request: dict) -> None:
    """Become ``python -m evaluation ARGS`` and exit with its status (never returns)."""
    code = 1
    try:
        os.setsid()
        limit = request["data_limit"]
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # read again from TMPDIR
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], None), (2, request["stderr"], None)):
            opened = os.open(path, flags if flags is not None else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
        sys.argv = ["python -m evaluation", *request["args"]]
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            runpy.run_module("evaluation", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            if exit_.code is not None and not isinstance(exit_.code, int):
                print(exit_.code, file=sys.stderr)
        except BaseException:  # what the interpreter does with an uncaught exception
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve(request: dict) -> dict:
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        child(request)
    deadline, timed_out = started + request["time_limit"], False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
            _kill_group(pid)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.01)
    _kill_group(pid)  # workers the command left behind
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": round(time.monotonic() - started, 3),
        "peak_mb": usage.ru_maxrss // 1024,
        "timed_out": timed_out,
    }


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> None:
    answers = sys.stdout
    sys.stdout = sys.stderr  # nothing but answers on the pipe (warming up logs, on a new install)
    warm()
    answers.write("ready\n")
    answers.flush()
    for line in sys.stdin:
        answers.write(json.dumps(serve(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
