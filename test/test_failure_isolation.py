"""One broken case never loses the others: the whole pipeline (plan, isolated workers,
summary, atomic write, exit code) with a worker that is killed mid-run."""

import json
import os
import signal

from evaluation import cli, platforms, suites
from evaluation.contract import Plan, Result, Suite, Task
from evaluation.phase import Phase


class Fragile(Suite):
    name = "fragile"
    ranking = "total"

    def plan(self, submission, phase, resources):
        return Plan([Task(key, {"value": value}) for key, value in (("a", 1), ("dies", None), ("b", 2))])

    def score(self, payload):
        if payload["value"] is None:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"value": payload["value"]}

    def summarize(self, phase, plan, outcomes):
        cases = {key: (o.value if o.ok else {"status": "failed"}) for key, o in outcomes.items()}
        total = sum(o.value["value"] for o in outcomes.values() if o.ok)
        return Result(metrics={"case": cases, "aggregates": {"total": total}}, leaderboard={"total": total})


def test_killed_worker_is_reported_and_the_rest_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(suites._REGISTRY, "fragile", Fragile())
    monkeypatch.setattr(cli.phases, "load", lambda folder: Phase(root=folder, suite="fragile"))
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "anything.txt").write_text("x")
    platform = platforms.detect("local", tmp_path / "input", tmp_path / "phase", tmp_path / "out")

    code = cli.grade(platform, workers=2)

    assert code == 1  # a crashed worker is not the participant's fault
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["case"]["a"] == {"value": 1} and metrics["case"]["b"] == {"value": 2}
    assert metrics["aggregates"]["total"] == 3
    assert metrics["failures"] == [{"case": "dies", "kind": "crashed", "message": metrics["failures"][0]["message"]}]
    assert "signal 9" in metrics["failures"][0]["message"]
    # run locally, by the organizer: the last line names the first cause
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("Case dies failed (crashed): the worker scoring dies died")
