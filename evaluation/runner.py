"""Score tasks in isolated worker processes, within the machine's cores and memory.

Each task runs in its own forked process, so a worker that crashes, is killed for memory or
runs past the time limit loses only its own task: the others' results are kept and the dead
one is reported. Tasks start largest-first while their summed memory estimates fit the
budget (the platforms give 7-8 GB on 2 cores; loading several 3D volumes at once is the
classic out-of-memory failure). Results come back as JSON text over a pipe.

No worker may use more than the whole budget: its data segment is capped with
``RLIMIT_DATA`` (as Grand-Challenge caps every process), so whatever slips past the readers'
size checks ends as a ``MemoryError`` in that worker, reported as the submission needing too
much memory, instead of the machine running out.
"""

import json
import multiprocessing
import signal
import time
from multiprocessing.connection import wait

from evaluation import log
from evaluation.contract import Outcome, Resources, Task, failure
from evaluation.machine import limit_memory, peak_rss_mb
from evaluation.progress import Progress

_log = log.get(__name__)
_CONTEXT = multiprocessing.get_context("fork")
# What a worker needs before it touches any data (interpreter and libraries, as measured in
# the benches); added to every task's own estimate, which covers its data only.
WORKER_BASELINE_BYTES = 200 * 2**20


def _child(connection, function, payload, key: str, memory_cap: int | None) -> None:
    try:
        if memory_cap:
            limit_memory(memory_cap)
        reply = {"value": function(payload)}
    except Exception as exc:  # MemoryError included: any failure comes back as this task's outcome
        reply = failure(key, exc, memory_cap)
    reply["peak_rss_mb"] = peak_rss_mb()
    try:
        connection.send_bytes(json.dumps(reply, allow_nan=True).encode())
    finally:
        connection.close()


class _Running:
    def __init__(self, task: Task, function, memory_cap: int | None):
        self.task = task
        self.started = time.monotonic()
        self.receiver, sender = _CONTEXT.Pipe(duplex=False)
        self.process = _CONTEXT.Process(target=_child, args=(sender, function, task.payload, task.key, memory_cap))
        self.process.start()
        sender.close()
        self.reply = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def outcome(self) -> Outcome:
        key, seconds = self.task.key, self.elapsed()
        if self.reply is None:
            code = self.process.exitcode
            cause = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
            hint = " (probably out of memory)" if code == -signal.SIGKILL else ""
            return Outcome(key, kind="crashed", message=f"the worker scoring {key} died: {cause}{hint}", seconds=seconds)
        reply = json.loads(self.reply)
        if "traceback" in reply:
            _log.error("task_exception", task=key, traceback=reply["traceback"])
        return Outcome(
            key,
            value=reply.get("value"),
            kind=reply.get("kind"),
            message=reply.get("message"),
            seconds=seconds,
            peak_rss_mb=reply.get("peak_rss_mb"),
        )


def footprint(task: Task, baseline: int) -> int:
    return task.memory_bytes + baseline


def _refusal(task: Task, memory_bytes: int, baseline: int) -> Outcome | None:
    """Tasks refused before anything is loaded: those the plan refused, and those whose
    estimate exceeds the whole budget (killed for memory halfway, they would be lost without
    a useful message): the participant's fault only if the smallest prediction would fit."""
    if task.refusal:
        return Outcome(task.key, kind="submission", message=task.refusal)
    if footprint(task, baseline) > memory_bytes:
        need, have = footprint(task, baseline) / 2**30, memory_bytes / 2**30
        floor = task.memory_bytes if task.phase_memory_bytes is None else task.phase_memory_bytes
        if floor + baseline > memory_bytes:
            return Outcome(
                task.key,
                kind="internal",
                message=(
                    f"{task.key}: the phase's case needs about {(floor + baseline) / 2**30:.1f} GiB of memory even for the "
                    f"smallest prediction, more than the {have:.1f} GiB available: give the phase a machine with more "
                    "memory, or smaller cases"
                ),
            )
        return Outcome(
            task.key,
            kind="submission",
            message=(
                f"{task.key}: scoring it would need about {need:.1f} GiB of memory, more than the {have:.1f} GiB "
                "available; submit smaller arrays (fewer voxels or a smaller data type)"
            ),
        )
    return None


def run(
    tasks: list[Task],
    function,
    resources: Resources,
    worker_baseline: int = WORKER_BASELINE_BYTES,
    progress: Progress | None = None,
) -> dict[str, Outcome]:
    """Run ``function(task.payload)`` for every task; returns key -> Outcome. ``progress`` is
    told how many tasks are done after each one (``progress.at_terminal``)."""
    workers, memory_bytes, time_limit = resources.workers, resources.memory_bytes, resources.time_limit
    refused = {t.key: _refusal(t, memory_bytes, worker_baseline) for t in tasks}
    outcomes: dict[str, Outcome] = {key: outcome for key, outcome in refused.items() if outcome is not None}
    pending = sorted((t for t in tasks if t.key not in outcomes), key=lambda t: t.memory_bytes, reverse=True)
    running: list[_Running] = []
    try:
        while pending or running:
            if progress:
                progress.update(len(outcomes), len(tasks))
            if resources.deadline is not None and time.monotonic() >= resources.deadline:
                outcomes.update(_stopped_at_deadline(pending, running))
                break
            _start_what_fits(pending, running, function, workers, memory_bytes, worker_baseline)
            until_deadline = resources.deadline - time.monotonic() if resources.deadline is not None else 1.0
            wait(
                [r.receiver for r in running] + [r.process.sentinel for r in running], timeout=max(0.0, min(1.0, until_deadline))
            )
            for r in list(running):
                outcome = _collect(r, time_limit)
                if outcome is not None:
                    outcomes[r.task.key] = outcome
                    running.remove(r)
                    _log.info(
                        "task_finished",
                        task=r.task.key,
                        ok=outcome.ok,
                        seconds=round(outcome.seconds, 3),
                        peak_rss_mb=outcome.peak_rss_mb,
                        estimate_mb=r.task.memory_bytes // 2**20,
                    )
    finally:
        for r in running:
            r.process.kill()
        if progress:
            progress.close()
    return outcomes


def _stopped_at_deadline(pending: list[Task], running: list["_Running"]) -> dict[str, Outcome]:
    """The run's time limit came: the running tasks are stopped, the others never start."""
    stopped = {}
    for r in running:
        r.process.kill()
        r.process.join()
        stopped[r.task.key] = Outcome(
            r.task.key, kind="deadline", seconds=r.elapsed(), message=f"{r.task.key} was stopped at the run's time limit"
        )
    running.clear()
    for task in pending:
        stopped[task.key] = Outcome(task.key, kind="deadline", message=f"{task.key} was not started before the run's time limit")
    pending.clear()
    return stopped


def schedule(tasks: list[Task], seconds: dict[str, float], resources: Resources, worker_baseline: int = WORKER_BASELINE_BYTES):
    """(wall seconds, peak bytes of the workers together) of ``run`` on ``resources`` if each
    task took ``seconds[key]``: the same order (largest estimate first), the same rule for
    starting a task (a free worker, and its estimate fits beside those running) and the same
    refusals (they take no time). An estimate, for the preflight's summary."""
    memory_bytes = resources.memory_bytes
    pending = sorted(
        (t for t in tasks if _refusal(t, memory_bytes, worker_baseline) is None), key=lambda t: t.memory_bytes, reverse=True
    )
    now, peak, running = 0.0, 0, []  # running: (finish time, footprint)
    while pending or running:
        while pending and len(running) < resources.workers:
            task = _next_task(pending, sum(f for _, f in running), len(running), memory_bytes, worker_baseline)
            if task is None:
                break
            pending.remove(task)
            running.append((now + seconds.get(task.key, 0.0), footprint(task, worker_baseline)))
            peak = max(peak, sum(f for _, f in running))
        now = min(end for end, _ in running)
        running = [r for r in running if r[0] > now]
    return now, peak


def _start_what_fits(
    pending: list[Task], running: list[_Running], function, workers: int, memory_bytes: int, baseline: int
) -> None:
    while pending and len(running) < workers:
        task = _next_task(pending, sum(footprint(r.task, baseline) for r in running), len(running), memory_bytes, baseline)
        if task is None:
            return
        pending.remove(task)
        running.append(_Running(task, function, memory_bytes))
        _log.debug("task_started", task=task.key, estimate_mb=task.memory_bytes // 2**20)


def _next_task(pending: list[Task], in_use: int, running: int, memory_bytes: int, baseline: int) -> Task | None:
    """The next task to start beside ``running`` tasks using ``in_use`` bytes: the largest that
    fits the budget; when none fits, the largest, alone; else None (wait)."""
    fits = [t for t in pending if in_use + footprint(t, baseline) <= memory_bytes]
    if running and not fits:
        return None
    return fits[0] if fits else pending[0]


def _collect(r: _Running, time_limit: float | None) -> Outcome | None:
    """The task's outcome if it has ended (or was stopped for time), else None."""
    alive = r.process.is_alive()  # checked before polling: a worker that has exited has written everything
    if r.reply is None and r.receiver.poll():
        try:
            r.reply = r.receiver.recv_bytes()
        except (EOFError, OSError):
            pass  # the worker died without answering
    timed_out = r.reply is None and alive and time_limit is not None and r.elapsed() > time_limit
    if timed_out:
        r.process.kill()
    elif r.reply is None and alive:
        return None
    r.process.join()
    r.receiver.close()
    if timed_out:
        return Outcome(
            r.task.key,
            kind="timeout",
            seconds=r.elapsed(),
            message=f"{r.task.key} took longer than the {time_limit:g} s allowed per case",
        )
    return r.outcome()
