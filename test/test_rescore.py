"""Re-scoring on Dask distributed: results identical to the command line's, a worker killed
mid-run changes nothing, a killed run resumes without recomputing finished units."""

import csv
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers.grading import FIXTURES, ROOT, run_cli

from evaluation.contract import Outcome
from evaluation.organizer import rescore
from evaluation.suites.cellmap.alignment import Grid
from evaluation.suites.cellmap.inputs import Pair
from evaluation.suites.cellmap.options import Limits

CASE = FIXTURES / "cellmap" / "cases" / "b_split_merge_jitter"
PLANNABLE = ("broken_label", "jitter", "missing_crop", "perfect", "zipped")


def _zip(folder: Path, archive: Path) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(folder).as_posix())


def make_submissions(root: Path) -> tuple[Path, Path]:
    """A CellMap phase (conformance case b) and six submissions: the case's own (as a folder
    and as a zip), the truth itself, one without a crop, one with an unusable label (a failed
    case) and one without any zarr (rejected)."""
    phase, subs = root / "phase", root / "subs"
    shutil.copytree(CASE / "truth.zarr", phase / "truth.zarr")
    shutil.copy(CASE / "manifest.csv", phase / "manifest.csv")
    (phase / "phase.yaml").write_text("suite: cellmap\n")
    for name in ("jitter", "missing_crop", "broken_label"):
        shutil.copytree(CASE / "submission.zarr", subs / name / "submission.zarr")
    shutil.copytree(CASE / "truth.zarr", subs / "perfect" / "submission.zarr")
    shutil.rmtree(subs / "missing_crop" / "submission.zarr" / "crop114")
    label = subs / "broken_label" / "submission.zarr" / "crop102" / "mito_mem"
    shutil.rmtree(label)
    zarr.create_array(str(label), data=np.zeros((64, 64), np.uint8), zarr_format=2)  # 2-D: unusable
    _zip(CASE / "submission.zarr", subs / "zipped.zip")
    (subs / "empty").mkdir()
    (subs / "empty" / "notes.txt").write_text("no zarr here")
    return phase, subs


def run_rescore(phase: Path, subs: Path, out: Path, *extra: str, wait: bool = True):
    command = [
        sys.executable,
        "-m",
        "evaluation",
        "rescore",
        "--ground-truth",
        str(phase),
        "--submissions",
        str(subs),
        "--output",
        str(out),
        *extra,
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    if not wait:
        return process
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1])


def unit_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in (out / rescore.STATE_DIR / "units").rglob("*.json")}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The submissions, and each one scored alone by the command line (the reference result)."""
    root = tmp_path_factory.mktemp("rescore")
    phase, subs = make_submissions(root)
    single = {}
    for name in ("jitter", "perfect", "missing_crop", "broken_label"):
        run = run_cli(subs / name, phase, root / "cli" / name)
        assert run.code == (2 if name == "broken_label" else 0), run.stderr
        single[name] = run.output
    single["zipped"] = single["jitter"]
    return phase, subs, single


def assert_identical_to_cli(out: Path, single: dict) -> None:
    for name, cli_out in single.items():
        for path in sorted(cli_out.iterdir()):
            assert json.loads((out / name / path.name).read_text()) == json.loads(path.read_text()), f"{name}/{path.name}"


def assert_leaderboard(out: Path, single: dict) -> None:
    table = json.loads((out / "leaderboard.json").read_text())
    order = [(row["rank"], row["submission"], row["status"]) for row in table["rows"]]
    assert order == [
        (1, "perfect", "scored"),
        (2, "jitter", "scored"),
        (2, "zipped", "scored"),
        (4, "missing_crop", "scored"),
        (None, "broken_label", "failed"),
        (None, "empty", "rejected"),
    ]
    scores = [row["overall_score"] for row in table["rows"][:4]]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert scores[1] == json.loads((single["jitter"] / "metrics.json").read_text())["aggregates"]["overall_score"]
    with open(out / "leaderboard.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["submission"] for r in rows] == [row["submission"] for row in table["rows"]]
    assert float(rows[0]["overall_score"]) == 1.0 and rows[5]["rank"] == "" and "no zarr" in rows[5]["message"]
    case_scores = json.loads((out / "jitter" / rescore.CASE_SCORES_FILE).read_text())
    assert set(case_scores["case_scores"]) == {"crop102", "crop114"}


def test_rescore_on_a_cluster_with_a_worker_killed_mid_run(setup, tmp_path):
    """An existing 2-worker cluster (--scheduler); one worker is killed while it scores a
    unit. Dask moves the unit; every result is still identical to the command line's."""
    from dask.distributed import Client, LocalCluster

    phase, subs, single = setup
    out = tmp_path / "out"
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        pids = client.run(os.getpid)
        process = run_rescore(phase, subs, out, "--scheduler", cluster.scheduler_address, wait=False)
        killed = None
        while process.poll() is None and killed is None:
            for address, keys in client.processing().items():
                running = [k for k in keys if str(k).startswith("unit-")]
                if running:
                    os.kill(pids[address], signal.SIGKILL)
                    killed = running
                    break
            time.sleep(0.01)
        stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    assert killed, "no unit was running when the test meant to kill its worker"
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert (summary["scored"], summary["failed"], summary["rejected"], summary["retry"]) == (4, 1, 1, [])
    stored = {Path(name).stem for name in unit_files(out)}
    assert summary["units_computed"] == len(stored)
    assert {k.removeprefix("unit-") for k in killed} <= stored  # the lost units were scored elsewhere
    assert_identical_to_cli(out, single)
    assert_leaderboard(out, single)


@pytest.mark.slow
def test_a_killed_run_resumes_without_recomputing(setup, tmp_path):
    phase, shared, single = setup
    subs = shutil.copytree(shared, tmp_path / "subs")  # replaced below: the module's copy stays as it is
    out = tmp_path / "out"
    process = run_rescore(phase, subs, out, "--workers", "1", wait=False)
    before = {}
    while process.poll() is None and not before:
        before = unit_files(out)
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)  # the driver, its cluster and its worker
    process.communicate()
    before = unit_files(out)
    assert before, "the first run ended before any unit was stored"

    summary = run_rescore(phase, subs, out, "--workers", "1")
    after = unit_files(out)
    assert {k: after[k] for k in before} == before  # finished units were not written again
    assert summary["units_reused"] >= len(before)
    assert summary["units_computed"] + summary["units_reused"] == len(after)
    assert_identical_to_cli(out, single)

    again = run_rescore(phase, subs, out, "--workers", "1")
    assert again["units_computed"] == 0 and again["submissions_reused"] == len(PLANNABLE) + 1

    shutil.rmtree(subs / "missing_crop" / "submission.zarr")  # a participant replaces a submission
    shutil.copytree(CASE / "submission.zarr", subs / "missing_crop" / "submission.zarr")
    changed = run_rescore(phase, subs, out, "--workers", "1")
    assert changed["submissions_reused"] == len(PLANNABLE) and changed["units_computed"] == 4
    assert (
        json.loads((out / "missing_crop" / "metrics.json").read_text())["case"]
        == json.loads((single["jitter"] / "metrics.json").read_text())["case"]
    )


# --------------------------------------------------------------------------------------------
# Pieces, without a cluster


def test_only_deterministic_outcomes_are_stored(tmp_path, cellmap_phase):
    phase, submission = cellmap_phase("b_split_merge_jitter")
    good = Pair(
        crop="crop102",
        label="mito_mem",
        display="x",
        truth=phase / "truth.zarr" / "crop102" / "mito_mem",
        pred=submission / "submission.zarr" / "crop102" / "mito_mem",
        mask=None,
        instance=False,
        grid=Grid((8.0,) * 3, (64,) * 3, (0.0,) * 3),
        version="v2",
        limits=Limits.reference(),
        pathological_crops="ignore",
    )
    record = rescore.score_unit("cellmap", "crop102/mito_mem", good, str(tmp_path / "ok.json"))
    assert record["value"]["status"] == "scored" and (tmp_path / "ok.json").is_file()
    missing_pred = dataclasses.replace(good, pred=tmp_path / "nothing")
    record = rescore.score_unit("cellmap", "k", missing_pred, str(tmp_path / "bad.json"))
    assert record["kind"] == "submission" and (tmp_path / "bad.json").is_file()
    broken_phase = dataclasses.replace(good, truth=tmp_path / "nothing")
    record = rescore.score_unit("cellmap", "k", broken_phase, str(tmp_path / "internal.json"))
    assert record["kind"] == "internal" and not (tmp_path / "internal.json").exists()


def test_unit_id_depends_on_phase_submission_and_payload():
    base = rescore.unit_id("p", "s", "cellmap", "crop1/mito", {"a": 1})
    assert base == rescore.unit_id("p", "s", "cellmap", "crop1/mito", {"a": 1})
    assert (
        len(
            {
                base,
                rescore.unit_id("q", "s", "cellmap", "crop1/mito", {"a": 1}),
                rescore.unit_id("p", "t", "cellmap", "crop1/mito", {"a": 1}),
                rescore.unit_id("p", "s", "cellmap", "crop1/mito", {"a": 2}),
            }
        )
        == 4
    )


def test_ranking_direction_and_ties():
    def entry(name, value, status=rescore.SCORED):
        e = rescore.Entry(name, Path(name), "", Path(name))
        e.status, e.leaderboard = status, {"score": value}
        return e

    entries = [entry("a", 0.5), entry("b", 0.9), entry("c", 0.5), entry("d", 0.1), entry("e", 0.99, rescore.FAILED)]
    assert [(r, e.name) for r, e in rescore.ranked(entries, "score", True)] == [
        (1, "b"),
        (2, "a"),
        (2, "c"),
        (4, "d"),
        (None, "e"),
    ]
    assert [(r, e.name) for r, e in rescore.ranked(entries, "score", False)] == [
        (1, "d"),
        (2, "a"),
        (2, "c"),
        (4, "b"),
        (None, "e"),
    ]


def test_outcome_round_trip():
    record = {"key": "k", "value": {"x": float("nan")}, "seconds": 1.5}
    outcome = rescore.to_outcome(json.loads(json.dumps(record, allow_nan=True)))
    assert isinstance(outcome, Outcome) and outcome.ok and np.isnan(outcome.value["x"])


def test_cli_and_rescore_grade_through_one_pipeline(tmp_path):
    """The same uploads, valid and broken, with the phase's additional inputs, graded by the
    command line and by rescore: the same metrics.json (additional inputs set aside and
    recorded, a failed case listed alike) and the same refusal for an unusable upload."""
    from helpers.hostile import multiclass_phase, multiclass_submission

    phase = multiclass_phase(tmp_path / "phase", "grand_challenge:\n  additional_inputs: [notes.json]\n")
    subs = tmp_path / "subs"
    for name in ("valid", "broken", "unusable"):
        shutil.copytree(multiclass_submission(tmp_path / name), subs / name)
        (subs / name / "notes.json").write_text('{"model": "' + name + '"}')
    (subs / "broken" / "case_1.nii.gz").write_bytes(b"not an image")
    for case in (subs / "unusable").glob("case_*"):
        case.unlink()
    single = {name: run_cli(subs / name, phase, tmp_path / "cli" / name) for name in ("valid", "broken", "unusable")}
    assert [single[n].code for n in ("valid", "broken", "unusable")] == [0, 2, 2]
    run_rescore(phase, subs, tmp_path / "out")
    for name in ("valid", "broken"):
        graded = json.loads((tmp_path / "out" / name / "metrics.json").read_text())
        assert graded == single[name].metrics, name
        assert graded["additional_inputs"] == {"notes.json": {"value": {"model": name}}}
    rejected = json.loads((tmp_path / "out" / "unusable" / rescore.REJECTED_FILE).read_text())
    assert f"Submission rejected: {rejected['message']}" == single["unusable"].last_line


def test_a_submission_whose_files_do_not_verify_is_made_again(setup, tmp_path):
    """case_scores.json, written last, holds the digest of every file written with it: files
    replaced by a run killed before it (here: a metrics.json of another score) do not verify,
    and the next run makes the submission again from its stored units, not trusting the old
    score beside new files. Units of an earlier phase are pruned when a submission finishes."""
    phase, subs, single = setup
    out = tmp_path / "out"
    run_rescore(phase, subs, out)
    metrics = json.loads((out / "jitter" / "metrics.json").read_text())
    metrics["aggregates"]["overall_score"] = 0.0
    (out / "jitter" / "metrics.json").write_text(json.dumps(metrics))
    stale = out / rescore.STATE_DIR / "units" / "jitter" / "0123456789abcdef0123456789abcdef.json"
    stale.write_text("{}")
    summary = run_rescore(phase, subs, out)
    assert summary["submissions_reused"] == 5 and summary["units_computed"] == 0 and summary["units_reused"] > 0
    assert json.loads((out / "jitter" / "metrics.json").read_text()) == json.loads(
        (single["jitter"] / "metrics.json").read_text()
    )
    assert not stale.exists()
    assert summary["reuse_trusts"] == rescore.TRUSTED and summary["workers_lost"] == 0


def test_uploads_sharing_a_name_are_named_and_the_rest_scored(setup, tmp_path):
    phase, subs, _ = setup
    copy = tmp_path / "subs"
    shutil.copytree(subs, copy)
    shutil.copy(copy / "zipped.zip", copy / "jitter.zip")  # 'jitter' twice: a folder and an archive
    process = run_rescore(phase, copy, tmp_path / "out", wait=False)
    stdout, _ = process.communicate(timeout=600)
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert process.returncode == 1  # a name to settle: run again once it is
    assert summary["names_clash"] == {"jitter": ["jitter", "jitter.zip"]} and "jitter" in summary["retry"]
    assert summary["scored"] == 3 and not (tmp_path / "out" / "jitter").exists()


def test_a_failed_submission_is_listed_without_a_score():
    from types import SimpleNamespace

    from evaluation.organizer import leaderboard

    suite = SimpleNamespace(name="toy", ranking="score", higher_is_better=True)
    entries = [
        SimpleNamespace(name="good", status="scored", leaderboard={"score": 0.5}, private_leaderboard={}, message=None),
        SimpleNamespace(
            name="half", status="failed", leaderboard={"score": 0.9}, private_leaderboard={}, message="case 2 broken"
        ),
    ]
    rows = leaderboard.write(Path(os.environ.get("TMPDIR", "/tmp")), suite, Path("phase"), entries, {})
    assert [(r["rank"], r["submission"], r["score"], r["leaderboard"]) for r in rows] == [
        (1, "good", 0.5, {"score": 0.5}),
        (None, "half", None, {}),
    ]


@pytest.mark.slow
def test_a_run_whose_workers_are_all_gone_gives_up_and_keeps_what_is_done(setup, tmp_path):
    """An external scheduler with no worker: the run says so in the log, gives up after the
    timeout with the units left for the next run, instead of waiting forever."""
    from dask.distributed import LocalCluster

    phase, subs, _ = setup
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None, host="127.0.0.1") as cluster:
        started = time.monotonic()
        summary = rescore.rescore(phase, subs, tmp_path / "out", scheduler=cluster.scheduler_address, worker_timeout=6)
    assert time.monotonic() - started < 60
    assert "no Dask worker for 6 s" in summary["gave_up"] and summary["scored"] == 0 and summary["retry"]


@pytest.mark.slow
def test_the_documented_loopback_cluster_scores(setup, tmp_path):
    """docs/organizers.md's one-machine cluster: a scheduler and workers started with Dask's own
    commands on loopback, no dashboard; rescore scores through it, and the scheduler is not
    reachable on the machine's other addresses."""
    import socket

    phase, subs, single = setup
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    module = [sys.executable, "-m"]
    started = [
        subprocess.Popen([*module, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True),
        subprocess.Popen([*module, "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}", "--host", "127.0.0.1",
                          "--nworkers", "2", "--nthreads", "1", "--no-dashboard"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True),
    ]  # fmt: skip
    try:
        summary = run_rescore(phase, subs, tmp_path / "out", "--scheduler", f"tcp://127.0.0.1:{port}")
        assert (summary["scored"], summary["failed"], summary["rejected"]) == (4, 1, 1)
        assert_identical_to_cli(tmp_path / "out", single)
        others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
        for address in others:
            with socket.socket() as attempt, pytest.raises(OSError):
                attempt.settimeout(2)
                attempt.connect((address, port))
    finally:
        for process in started:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
