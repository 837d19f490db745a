"""Failure isolation and scheduling of the worker pool."""

import os
import signal
import time

from evaluation import contract, runner
from evaluation.contract import Task
from evaluation.errors import SubmissionError


def _work(payload):
    action = payload["action"]
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "sleep":
        time.sleep(payload["seconds"])
    if action == "bad":
        raise SubmissionError("crop1/mito: broken chunk")
    if action == "bug":
        raise ZeroDivisionError("oops")
    if action == "touch":
        open(payload["path"], "w").close()
    if action == "allocate":
        bytearray(payload["bytes"])
    return {"value": payload.get("value"), "nan": float("nan"), "pid": os.getpid()}


def test_a_dead_worker_loses_only_its_task():
    tasks = [Task("a", {"action": "ok", "value": 1}), Task("dead", {"action": "kill"}), Task("b", {"action": "ok", "value": 2})]
    outcomes = runner.run(tasks, _work, contract.Resources(workers=2, memory_bytes=1 << 30))
    assert outcomes["a"].ok and outcomes["a"].value["value"] == 1
    assert outcomes["b"].ok and outcomes["b"].value["value"] == 2
    assert outcomes["dead"].kind == "crashed" and "signal 9" in outcomes["dead"].message
    assert outcomes["a"].value["pid"] != os.getpid()


def test_errors_keep_their_kind_and_nan_survives_transport():
    outcomes = runner.run(
        [Task("s", {"action": "bad"}), Task("i", {"action": "bug"}), Task("ok", {"action": "ok"})],
        _work,
        contract.Resources(workers=3, memory_bytes=1 << 30),
    )
    assert outcomes["s"].kind == "submission" and outcomes["s"].message == "crop1/mito: broken chunk"
    assert outcomes["i"].kind == "internal" and "ZeroDivisionError" in outcomes["i"].message
    assert outcomes["ok"].value["nan"] != outcomes["ok"].value["nan"]


def test_time_limit_stops_a_case():
    started = time.monotonic()
    outcomes = runner.run(
        [Task("slow", {"action": "sleep", "seconds": 60}), Task("fast", {"action": "ok"})],
        _work,
        contract.Resources(workers=2, memory_bytes=1 << 30, time_limit=1.0),
    )
    assert outcomes["slow"].kind == "timeout" and outcomes["fast"].ok
    assert time.monotonic() - started < 30


def test_the_run_deadline_stops_the_running_and_never_starts_the_rest():
    """One worker, four 0.6 s tasks and a deadline 1 s away: the first ends, the second is
    stopped at the deadline, the last two never start; the run ends right after it."""
    started = time.monotonic()
    tasks = [Task(f"t{i}", {"action": "sleep", "seconds": 0.6}, memory_bytes=i) for i in (4, 3, 2, 1)]
    resources = contract.Resources(workers=1, memory_bytes=1 << 30, deadline=started + 1.0)
    outcomes = runner.run(tasks, _work, resources, worker_baseline=0)
    assert outcomes["t4"].ok
    assert outcomes["t3"].kind == "deadline" and "stopped" in outcomes["t3"].message
    assert [outcomes[k].kind for k in ("t2", "t1")] == ["deadline", "deadline"] and "not started" in outcomes["t1"].message
    assert time.monotonic() - started < 3


def test_memory_budget_serialises_big_tasks():
    """Two tasks that each take most of the budget never overlap."""
    tasks = [Task(k, {"action": "sleep", "seconds": 0.5}, memory_bytes=700) for k in "ab"]
    started = time.monotonic()
    outcomes = runner.run(tasks, _work, contract.Resources(workers=2, memory_bytes=1000), worker_baseline=0)
    assert all(o.ok for o in outcomes.values())
    assert time.monotonic() - started >= 1.0


def test_a_task_over_the_whole_budget_is_refused_before_it_starts(tmp_path):
    """Refused as the participant's fault when the smallest prediction would fit (their arrays
    are too large), as the phase's when even that would not (the organizer's setting)."""
    marker = tmp_path / "started"
    tasks = [
        Task("huge prediction", {"action": "touch", "path": str(marker)}, memory_bytes=5000, phase_memory_bytes=900),
        Task("huge case", {"action": "touch", "path": str(marker)}, memory_bytes=5000),
        Task("huge case too", {"action": "touch", "path": str(marker)}, memory_bytes=5000, phase_memory_bytes=1200),
        Task("ok", {"action": "ok"}, memory_bytes=10),
    ]
    outcomes = runner.run(tasks, _work, contract.Resources(workers=2, memory_bytes=1000), worker_baseline=0)
    assert outcomes["huge prediction"].kind == "submission" and "submit smaller arrays" in outcomes["huge prediction"].message
    for key in ("huge case", "huge case too"):
        assert outcomes[key].kind == "internal" and "even for the smallest prediction" in outcomes[key].message
    assert not marker.exists() and outcomes["ok"].ok


def test_workers_report_their_peak_memory():
    outcome = runner.run([Task("ok", {"action": "ok"})], _work, contract.Resources(workers=1, memory_bytes=1 << 30))["ok"]
    assert outcome.peak_rss_mb > 10


def test_resources_follow_the_process_limits():
    """Grand-Challenge caps each process with RLIMIT_DATA (instance memory less 1 GiB) and
    strips its own variables from the environment: the budget comes from the limit itself."""
    import resource
    import subprocess
    import sys

    seven_gib = 7 * 2**30
    probe = (
        "from evaluation import contract, machine; r = contract.Resources.detect(); "
        "print(r.memory_bytes, machine.memory_limits()['rlimit_data'], r.workers, r.memory_limited_by)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_DATA, (seven_gib, seven_gib)),
    )
    budget, seen, workers, source = done.stdout.split()
    assert int(seen) == seven_gib and int(budget) == int(seven_gib * contract.MEMORY_HEADROOM) and int(workers) >= 1
    assert source == "rlimit_data"
    lowered = contract.Resources.detect(workers=3, memory_limit_bytes=2**30, time_limit=5)
    expected = contract.Resources(3, int(2**30 * contract.MEMORY_HEADROOM), time_limit=5, memory_limited_by="phase")
    assert lowered == expected


def test_a_worker_cannot_grow_past_the_budget():
    """The backstop behind the readers' size checks: a worker allocating beyond the run's
    budget fails its own task with a memory message."""
    outcome = runner.run(
        [Task("greedy", {"action": "allocate", "bytes": 3 << 30})], _work, contract.Resources(workers=1, memory_bytes=1 << 30)
    )["greedy"]
    assert outcome.kind == "submission" and "memory" in outcome.message
