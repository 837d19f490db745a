"""``definition: metricsreloaded-2bf9c91`` (MetricsReloaded's branch of PR #57) against the
library's own values at 2bf9c91 (test/fixtures/segmentation/metricsreloaded_2bf9c91, README.md
there says how they were made), through the command line:

* every pairwise value of the 27-case generic kit and of 18 degenerate extra cases, with the
  branch's ``worse_dist`` and ``check_empty`` (``metrics: [nanrep]``), under the kit's rules;
* the instance evaluation (unchanged at 2bf9c91), and where the branch's ``ProcessEvaluation
  ('InS')`` raises (``KeyError: 'check_empty'``, ``'hd'``), its faithful output;
* ``ProcessEvaluation('SemS')`` on the recorded case sets: every row's raw and ``<m>_nanrep``
  values and the per-label statistics (count, mean, median, min, max: NaN left out), literally
  (a Both distance replaced by ``worse_dist``) and, with ``corrections:
  [metricsreloaded_nanrep_both_distance]``, as the branch intends (0);
* cb38dfc stays the definition of ``metricsreloaded``.
"""

import functools
import json
from pathlib import Path

import numpy as np
import pytest
import test_segmentation_parity as parity
from helpers.grading import FIXTURES, run_cli

KIT = FIXTURES / "segmentation"
HERE = KIT / "metricsreloaded_2bf9c91"
EXTRA = HERE / "cases_extra"
EXPECTED = {
    **json.loads((HERE / "expected_2bf9c91.json").read_text())["cases"],
    **json.loads((HERE / "expected_extra_2bf9c91.json").read_text())["cases"],
}
MANIFEST = {
    **{c: (KIT / "cases", m) for c, m in parity.MANIFEST.items()},
    **{c: (EXTRA, m) for c, m in json.loads((EXTRA / "manifest.json").read_text())["cases"].items()},
}
PROCESS = json.loads((HERE / "process_evaluation_2bf9c91.json").read_text())
DEFINITION = "metricsreloaded-2bf9c91"
TOLERANCES = sorted({t for _, m in MANIFEST.values() for t in m["nsd_tolerances"]})
METRICS = parity.METRICS.replace("centre_distance]", "centre_distance, nanrep]")
COMMON = (
    f"metrics: {METRICS}\nnsd_tolerances: [{', '.join(map(str, TOLERANCES))}]\nfbeta: [1, 2]\n"
    "boundary_iou_distances: [1, 2]\nstatistics: [mean]\n"
)
SEMANTIC = sorted(c for c, (_, m) in MANIFEST.items() if m["kind"] != "instance")
INSTANCE = sorted(c for c, (_, m) in MANIFEST.items() if m["kind"] == "instance")


def channels(case: str) -> list[str]:
    meta = MANIFEST[case][1]
    return ["fg"] if meta["kind"] == "instance" else [str(c) for c in range(1, meta.get("n_classes", 1) + 1)]


def pairwise_map(case: str) -> dict:
    """The kit's MetricsReloaded names -> the suite's keys, at the case's two tolerances."""
    found = dict(parity.pairwise_maps("bin2d_disks_iso")["metricsreloaded"])
    first, second = MANIFEST[case][1]["nsd_tolerances"]
    found.update(nsd_tau1=f"nsd_{parity.key(first)}", nsd_tau2=f"nsd_{parity.key(second)}")
    return found


def write_case(case: str, phase: Path, submission: Path) -> None:
    folder, meta = MANIFEST[case]
    data = np.load(folder / f"{case}.npz")
    parity.write_image(data["gt"], data["spacing"], phase / "labels" / f"{case}.mha")
    parity.write_image(data["pred"], data["spacing"], submission / f"{case}.mha")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """run(name, cases, config) -> (metrics.json, instances.json), computed once."""
    root = tmp_path_factory.mktemp("metricsreloaded_2bf9c91")

    @functools.cache
    def outputs(name: str, cases: tuple[str, ...], config: str) -> tuple[dict, dict]:
        folder = root / name
        for case in cases:
            write_case(case, folder / "phase", folder / "input")
        (folder / "phase" / "phase.yaml").write_text("suite: segmentation\n" + config)
        done = run_cli(folder / "input", folder / "phase", folder / "out")
        assert done.code == 0, done.stderr[-3000:]
        details = done.output / "instances.json"
        return done.metrics, json.loads(details.read_text()) if details.exists() else {}

    return outputs


def semantic(run):
    return run("semantic", tuple(SEMANTIC), f"classes: [1, 2, 3, 4, 5]\ndefinition: {DEFINITION}\n" + COMMON)


def instances(run, matching: str = "greedy_matching"):
    config = f"input: instances\ndefinition: {DEFINITION}\nmatching: {matching}\n" + COMMON + parity.MR_INSTANCES
    return run(f"instances_{matching}", tuple(INSTANCE), config)


# --------------------------------------------------------------------------------------------
# Every pairwise value, and the branch's columns


@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_pairwise_values_and_branch_columns(run, case):
    metrics, _ = semantic(run) if case in SEMANTIC else instances(run)
    problems = []
    for channel in channels(case):
        found = parity.class_entry(metrics, case, channel)
        expected = EXPECTED[case]["metricsreloaded"]["pairwise"][channel]
        problems += parity.compare(found, expected, pairwise_map(case), f"{case}[{channel}]", parity.MR_FLOAT32)
        columns = EXPECTED[case]["metricsreloaded_branch_columns"][channel]
        if found["check_empty"] != columns["check_empty"] or not parity.matches(
            found["worse_dist"], columns["worse_dist"], parity.FLOAT64
        ):
            problems.append(f"{case}[{channel}]: {found['worse_dist']}, {found['check_empty']} != {columns}")
    assert not problems, problems
    assert metrics["reference"]["families"]["overlap"] == DEFINITION


@pytest.mark.parametrize("case", INSTANCE)
@pytest.mark.parametrize("assignment", ["greedy_matching", "hungarian"])
def test_instances_unchanged_and_process_evaluation_faithful(run, assignment, case):
    """``MultiLabelLocSegPairwiseMeasure`` is the same at 2bf9c91; ``ProcessEvaluation('InS')``
    raises there, and the faithful guard gives cb38dfc's rows."""
    metrics, details = instances(run, assignment)
    summary = parity.class_entry(metrics, case, "fg")["instances"]
    block = EXPECTED[case]["metricsreloaded"]["instance"][f"{assignment}_iou0.5"]
    process = EXPECTED[case]["metricsreloaded"].get("process_evaluation_InS", {}).get(assignment, {})
    if "error" in block:  # no instance at all: KeyError 'pred', at both commits
        assert (summary["tp"], summary["fp"], summary["fn"]) == (0, 0, 0)
        return
    problems = parity.compare(summary, block["detection"], parity.MR_DETECTION, case, ("fbeta", "PQ"))
    tau = parity.key(MANIFEST[case][1]["nsd_tolerances"][0])
    problems += parity.mr_pairs_problems(details[case]["foreground"], block["per_tp"], case, tau)
    if process:  # the kit's call at 2bf9c91: check_empty (pairs) or 'hd' (no pair)
        assert process["error"] in ("KeyError: 'check_empty'", "KeyError: 'hd'"), process
    faithful = PROCESS["faithful_process_evaluation_InS"].get(case, {}).get(assignment)
    if faithful is not None:
        problems += parity.compare(summary, faithful["resdet"][0], parity.MR_DETECTION, case, ("fbeta",))
        rows = [
            {**row, "pred_label": m["pred"][0], "ref_label": m["ref"]}
            for row, m in zip(faithful["resseg"], details[case]["foreground"]["matches"])
        ]
        problems += parity.mr_pairs_problems(details[case]["foreground"], rows, case, "1")
    assert not problems, problems


# --------------------------------------------------------------------------------------------
# ProcessEvaluation('SemS'): the rows and their statistics


RAW = {
    "dsc": "dice",
    "iou": "iou",
    "fbeta": "f1",
    "hd": "hd",
    "hd_perc": "hd95",
    "masd": "masd",
    "assd": "assd",
    "nsd": "nsd_1",
    "boundary_iou": "boundary_iou_1",
    "numb_ref": "n_ref",
    "numb_pred": "n_pred",
    "numb_tp": "tp",
    "numb_fp": "fp",
    "numb_fn": "fn",
}
NANREP = {f"{theirs}_nanrep": f"{ours}_nanrep" for theirs, ours in list(RAW.items())[:9]}
ROWS = {**RAW, **NANREP}
STATISTICS = {"count": "n", "mean": "mean", "50%": "median", "min": "min", "max": "max"}
GROUPS = sorted(k for k, g in PROCESS["groups"].items() if k.startswith("SemS"))
SEMS = (
    f"definition: {DEFINITION}\nmetrics: [counts, dice, iou, fbeta, hd, hd_percentile, masd, assd, nsd, boundary_iou, "
    "nanrep]\nnsd_tolerances: [1]\npercentiles: [95]\nstatistics: [mean, median, min, max]\n"
)


def group_run(run, group: str, corrected: bool):
    labels = PROCESS["groups"][group]["call"]["list_values"]
    config = f"classes: {labels}\n" + SEMS + ("corrections: [metricsreloaded_nanrep_both_distance]\n" if corrected else "")
    return run(f"{group}{'_corrected' if corrected else ''}", tuple(PROCESS["groups"][group]["cases"]), config)[0]


def row_problems(metrics: dict, rows: list[dict], mapping: dict) -> list[str]:
    problems = []
    for row in rows:
        found = parity.class_entry(metrics, row["case"], str(row["label"]))
        where = f"{row['case']}[{row['label']}]"
        float32 = ("fbeta", "fbeta_nanrep", "numb_fp", "numb_fn")
        problems += parity.compare(found, row, mapping, where, float32)
        for key in ("worse_dist", "check_empty"):
            if key in row and not (found[key] == row[key] or parity.matches(found[key], row[key], parity.FLOAT64)):
                problems.append(f"{where}: {key} {found[key]!r} != {row[key]!r}")
    return problems


def statistics_problems(metrics: dict, stats: dict, mapping: dict) -> list[str]:
    problems = []
    for label, keys in stats.items():
        summary = metrics["aggregates"]["classes"][str(label)]
        for theirs, ours in mapping.items():
            if theirs not in keys:
                continue
            for statistic, value in keys[theirs].items():
                got = summary[ours][STATISTICS[statistic]]
                expected = int(value) if statistic == "count" else value
                if not parity.matches(got, expected, parity.FLOAT32 if theirs.startswith(("fbeta", "numb_f")) else 1e-12):
                    problems.append(f"[{label}].{ours}.{statistic}: {got!r} != {expected!r}")
    return problems


@pytest.mark.parametrize("group", GROUPS)
def test_process_evaluation_rows_and_statistics(run, group):
    """The branch's rows and per-label statistics, literally: a both-empty distance's
    ``_nanrep`` is ``worse_dist``; where the branch raises (``ValueError: Must produce aggregated
    value``, every label absent from a case), the faithful rows."""
    metrics = group_run(run, group, corrected=False)
    recorded = PROCESS["groups"][group]["main/case=True"]
    if "error" in recorded:
        assert recorded["error"] == "ValueError: Must produce aggregated value"
        faithful = recorded["faithful"]
        raw = [{k: v for k, v in row.items() if not k.endswith("_nanrep")} for row in faithful["resseg"]]
        assert not row_problems(metrics, raw, RAW)
        return
    assert not row_problems(metrics, recorded["resseg"], ROWS)
    assert not statistics_problems(metrics, recorded["stats_lab"], ROWS)


@pytest.mark.parametrize(
    "group", [g if "32x32" in g or "all_background" in g else pytest.param(g, marks=pytest.mark.slow) for g in GROUPS]
)
def test_process_evaluation_as_intended(run, group):
    """``corrections: [metricsreloaded_nanrep_both_distance]``: the faithful rows (a Both
    distance's ``_nanrep`` is 0, ``BEST``) and their statistics."""
    metrics = group_run(run, group, corrected=True)
    faithful = PROCESS["groups"][group]["main/case=True"]["faithful"]
    assert not row_problems(metrics, faithful["resseg"], NANREP)
    assert not statistics_problems(metrics, faithful["stats_lab"], NANREP)


def test_the_default_stays_cb38dfc(run):
    """``definition: metricsreloaded`` is cb38dfc: two empty masks score Dice 1 and HD 0 there."""
    metrics, _ = run("cb38dfc", ("bin2d_both_empty",), "classes: [1]\ndefinition: metricsreloaded\nmetrics: [dice, hd, nsd]\n")
    found = metrics["case"]["bin2d_both_empty"]["classes"]["1"]
    assert (found["dice"], found["hd"], found["nsd_1"]) == (1.0, 0.0, 1.0)
    branch, _ = semantic(run)
    assert all(v is None for k, v in branch["case"]["bin2d_both_empty"]["classes"]["1"].items() if k in ("dice", "hd", "nsd_1"))


def test_nanrep_needs_no_other_metric(tmp_path):
    """``metrics: [nanrep]`` alone writes worse_dist and check_empty (no key to replace)."""
    phase, submission = tmp_path / "phase", tmp_path / "input"
    write_case("bin2d_gt_empty", phase, submission)
    (phase / "phase.yaml").write_text(f"suite: segmentation\nclasses: [1]\ndefinition: {DEFINITION}\nmetrics: [dice, nanrep]\n")
    done = run_cli(submission, phase, tmp_path / "out")
    assert done.code == 0, done.stderr[-2000:]
    found = done.metrics["case"]["bin2d_gt_empty"]["classes"]["1"]
    assert found["check_empty"] == "Ref" and found["dice_nanrep"] == 0.0
    assert done.metrics["reference"]["definitions"]["dice_nanrep"] == DEFINITION
