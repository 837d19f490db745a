"""What the bench scripts share: scoring a suite's first task in a fresh process, and measuring
that process's own peak memory."""

import multiprocessing
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's own peak resident memory (``VmHWM``). ``ru_maxrss`` is not used: Linux
    carries a parent's high-water mark into children across fork and exec, so a bench that
    generated large data first would report the generator's peak."""
    from evaluation.machine import peak_rss_mb as own_peak

    return float(own_peak())


def run_cli(submission: Path, phase: Path, output: Path, *extra: str, prefix: tuple = ()) -> dict:
    """``python -m evaluation`` on the inputs (after ``prefix``, e.g. a ``prlimit`` call): wall
    seconds, exit status, and the peaks the grader logs itself (its own process and its largest
    worker, both ``VmHWM``). The package is byte-compiled first, as the image compiles it at
    build: where ``PYTHONDONTWRITEBYTECODE`` is set, every run would otherwise compile every
    module again (0.3 s)."""
    import compileall
    import json
    import subprocess
    import sys

    import evaluation

    compileall.compile_dir(Path(evaluation.__file__).parent, quiet=1)
    started = time.perf_counter()
    done = subprocess.run(
        [
            *prefix,
            sys.executable,
            "-m",
            "evaluation",
            "--input",
            str(submission),
            "--ground-truth",
            str(phase),
            "--output",
            str(output),
            *extra,
        ],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    written = {}
    for line in done.stdout.splitlines():  # the log is on stdout; stderr holds only a failure's last line
        if '"event": "written"' in line:
            written = json.loads(line)
    peaks = [written.get("peak_rss_mb"), written.get("worker_peak_rss_mb")]
    return {
        "seconds": seconds,
        "exit": done.returncode,
        "log": done.stdout,
        "stderr": done.stderr,
        "peak_mb": max((p for p in peaks if p is not None), default=float("nan")),
    }


def in_fresh_process(target, *args):
    """``target(*args, queue)`` in a spawned interpreter; returns what it put on the queue, and
    stops the bench with the child's exit status when it dies without putting anything there
    (its traceback is on stderr), instead of waiting for ever."""
    import queue as queues

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    while True:
        try:
            value = queue.get(timeout=1.0)
            break
        except queues.Empty:
            if not process.is_alive():
                raise SystemExit(f"the scoring process ended with status {process.exitcode} and no result") from None
    process.join()
    return value


def _score_first_task(suite_name: str, phase: str, submission: str, queue) -> None:
    from evaluation import phase as phases
    from evaluation.contract import Resources
    from evaluation.submission import Submission
    from evaluation.suites import get

    suite = get(suite_name)
    plan = suite.plan(Submission(Path(submission)), phases.load(Path(phase)), Resources.detect())
    task = plan.tasks[0]
    started, cpu = time.perf_counter(), time.process_time()
    result = suite.score(task.payload)
    queue.put(
        {
            "seconds": time.perf_counter() - started,
            "cpu_seconds": time.process_time() - cpu,
            "peak_mb": peak_rss_mb(),
            "result": result,
            "estimate_bytes": task.memory_bytes,
        }
    )


def score_first_task(suite_name: str, phase: Path, submission: Path) -> dict:
    """Plan the suite on a phase and submission, then score its first task, in a fresh
    process: seconds and CPU seconds of the scoring, the process's peak RSS, the result and
    the scheduler's memory estimate."""
    return in_fresh_process(_score_first_task, suite_name, str(phase), str(submission))
