"""Parity of the segmentation suite with the four libraries, on every case of the generic
conformance kit (test/fixtures/segmentation: the kit's cases and expected.json, copied).

The command line runs once per configuration the kit recorded (definition, matcher,
threshold): binary and multi-class cases as semantic label maps with classes 1..5, instance
cases as instance maps; every case is written as a MetaImage with its spacing in the header.
Each value the library produced is compared under the kit's rules: counts exactly, float64 to
1e-12 relative, float32 values (MONAI, MetricsReloaded's float32 ratios) to 1e-6. NaN and
infinity are null in metrics.json. Where the library raised, the suite's documented value is
checked instead (docs/suites/segmentation.md, "Where a library raises").
"""

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import FIXTURES, run_cli

KIT = FIXTURES / "segmentation"
EXPECTED = json.loads((KIT / "expected.json").read_text())["cases"]
MANIFEST = json.loads((KIT / "cases" / "manifest.json").read_text())["cases"]
SEMANTIC = [c for c, m in MANIFEST.items() if m["kind"] != "instance"]
INSTANCE = [c for c, m in MANIFEST.items() if m["kind"] == "instance"]
TOLERANCES = sorted({t for m in MANIFEST.values() for t in m["nsd_tolerances"]})
FLOAT64, FLOAT32 = 1e-12, 1e-6


def key(value) -> str:
    return f"{float(value):g}".replace(".", "p")


def tau_keys(case: str) -> tuple[str, str]:
    first, second = MANIFEST[case]["nsd_tolerances"]
    return key(first), key(second)


# --------------------------------------------------------------------------------------------
# Running the command line once per configuration


METRICS = (
    "[counts, dice, iou, precision, recall, fbeta, specificity, npv, accuracy, balanced_accuracy, mcc, cohens_kappa, "
    "youden, lr_plus, volume_difference, abs_volume_difference, hd, hd_percentile, assd, masd, asd, nsd, surface_overlap, "
    "surface_size, boundary_iou, cldice, topology, centre_distance]"
)
TOLERANCES = sorted(set(TOLERANCES) | {0.5})  # 0.5: panoptica's global_bin_nsd
COMMON = (
    f"metrics: {METRICS}\nnsd_tolerances: [{', '.join(map(str, TOLERANCES))}, min_spacing]\nfbeta: [1, 2]\n"
    "boundary_iou_distances: [1, 2]\nstatistics: [mean]\n"
)
PANOPTICA_INSTANCES = "instance_metrics: [detection, panoptic, dice, iou, hd, hd_percentile, assd, nsd, cldice, volume_difference, abs_volume_difference, ref_size]\n"
MR_INSTANCES = "instance_metrics: [detection, panoptic, dice, iou, hd, hd_percentile, assd, masd, nsd, boundary_iou, cldice]\n"
MONAI_INSTANCES = "instance_metrics: [detection, panoptic]\n"
# (definition, matching option or None, threshold) of every instance configuration the kit recorded
MATCHERS = {
    "panoptica/naive_iou0.5": ("panoptica", None, 0.5),
    "panoptica/naive_many_to_one_iou0.5": ("panoptica", "many_to_one", 0.5),
    "panoptica/maxbipartite_iou0.5": ("panoptica", "optimal", 0.5),
    "panoptica/maximize_merge_iou0.5": ("panoptica", "maximize_merge", 0.5),
    "panoptica/naive_iou0.25": ("panoptica", None, 0.25),
    "panoptica/maxbipartite_iou0.25": ("panoptica", "optimal", 0.25),
    "metricsreloaded/greedy_matching_iou0.5": ("metricsreloaded", None, 0.5),
    "metricsreloaded/greedy_matching_iou0.25": ("metricsreloaded", None, 0.25),
    "metricsreloaded/hungarian_iou0.5": ("metricsreloaded", "hungarian", 0.5),  # its own name for optimal_all_pairs
    "metricsreloaded/hungarian_iou0.25": ("metricsreloaded", "optimal_all_pairs", 0.25),
    "monai/iou0.5": ("monai", None, 0.5),
    "monai/iou0.25": ("monai", None, 0.25),
    "deepmind/fg": ("deepmind", None, 0.5),
}
INSTANCE_METRICS = {"panoptica": PANOPTICA_INSTANCES, "metricsreloaded": MR_INSTANCES, "monai": MONAI_INSTANCES, "deepmind": ""}
KEEP_EMPTY = "empty_values: {dice: {both_empty: 1, ref_empty: 0}, iou: {both_empty: 1, ref_empty: 0}}\n"
RUNS = {
    "panoptica": ("semantic", "definition: panoptica\n" + PANOPTICA_INSTANCES),
    "metricsreloaded": ("semantic", "definition: metricsreloaded\n"),
    "monai": ("semantic", "definition: monai\n"),
    "monai_keep_empty": ("semantic", "definition: monai\n" + KEEP_EMPTY),
    "monai_subvoxels": ("semantic", "definition: monai\nmonai_subvoxels: true\n"),
    "deepmind": ("semantic", "definition: deepmind\n"),
    "metricsreloaded_corrected": ("semantic", "definition: metricsreloaded\ncorrections: [avdr_wraparound]\n"),
    "metricsreloaded_corrected/fg": ("instances", "definition: metricsreloaded\ncorrections: [avdr_wraparound]\n"),
    "panoptica_voxel": ("semantic", "definition: panoptica\nspacing: voxel\npanoptica_global: true\n"),
    "panoptica_voxel/fg": ("instances", "definition: panoptica\nspacing: voxel\npanoptica_global: true\n"),
    **{
        name: (
            "instances",
            f"definition: {definition}\nmatch_threshold: {threshold}\n"
            + (f"matching: {matching}\n" if matching else "")
            + INSTANCE_METRICS[definition],
        )
        for name, (definition, matching, threshold) in MATCHERS.items()
    },
    # MultiClassPairwiseMeasures over the labels 0..K of the kit's K-class cases
    **{
        f"metricsreloaded_multiclass_{k}": (
            "semantic",
            f"suite: segmentation\nclasses: {list(range(1, k + 1))}\nmetrics: [dice, multiclass]\nunknown_labels: ignore\n",
        )
        for k in sorted({m["n_classes"] for m in MANIFEST.values() if m["kind"] == "multiclass"})
    },
}


def write_image(array: np.ndarray, spacing, path: Path) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(tuple(float(s) for s in spacing[::-1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """run(name) -> (metrics.json, instances.json) of configuration ``name``, computed once."""
    root = tmp_path_factory.mktemp("segmentation_kit")
    for group, cases in (("semantic", SEMANTIC), ("instances", INSTANCE)):
        for case in cases:
            data = np.load(KIT / "cases" / f"{case}.npz")
            write_image(data["gt"], data["spacing"], root / group / "phase" / "labels" / f"{case}.mha")
            write_image(data["pred"], data["spacing"], root / group / "input" / f"{case}.mha")

    @functools.cache
    def outputs(name: str) -> tuple[dict, dict]:
        group, extra = RUNS[name]
        phase = root / group / f"phase_{name.replace('/', '_')}"
        phase.mkdir()
        shutil.copytree(root / group / "phase" / "labels", phase / "labels")
        head = (
            "suite: segmentation\nclasses: [1, 2, 3, 4, 5]\n"
            if group == "semantic"
            else "suite: segmentation\ninput: instances\n"
        )
        (phase / "phase.yaml").write_text(extra if extra.startswith("suite:") else head + COMMON + extra)
        done = run_cli(root / group / "input", phase, root / group / f"out_{name.replace('/', '_')}")
        assert done.code == 0, done.stderr[-3000:]
        details = done.output / "instances.json"
        return done.metrics, json.loads(details.read_text()) if details.exists() else {}

    return outputs


# --------------------------------------------------------------------------------------------
# Comparing


def matches(got, expected, tolerance) -> bool:
    """Under the kit's rules; an error, nan or infinity in the kit is null here."""
    if isinstance(expected, dict) or expected in ("nan", "inf", "-inf"):
        return got is None
    if isinstance(expected, bool) or got is None:
        return False
    if isinstance(expected, int) and tolerance == FLOAT64 and float(expected).is_integer():
        return got == expected
    scale = max(1.0, abs(expected)) if tolerance == FLOAT32 else max(abs(got), abs(expected))
    return got == expected or abs(got - expected) <= tolerance * scale


def compare(found: dict, expected: dict, mapping: dict, where: str, float32=()) -> list[str]:
    problems = []
    for theirs, ours in mapping.items():
        if theirs not in expected:
            continue
        tolerance = FLOAT32 if theirs in float32 or "*" in float32 else FLOAT64
        if not matches(found.get(ours), expected[theirs], tolerance):
            problems.append(f"{where}: {theirs} = {expected[theirs]!r}, suite {ours} = {found.get(ours)!r}")
    return problems


def channels(case: str) -> list[str]:
    kind = MANIFEST[case]
    return ["fg"] if kind["kind"] == "instance" else [str(c) for c in range(1, kind.get("n_classes", 1) + 1)]


def class_entry(metrics: dict, case: str, channel: str) -> dict:
    entry = metrics["case"][case]
    assert entry["status"] == "scored", entry
    return entry["classes"]["foreground" if channel == "fg" else channel]


def pairwise_maps(case: str) -> dict:
    t1, t2 = tau_keys(case)
    return {
        "panoptica": {
            "DSC": "dice",
            "IOU": "iou",
            "HD": "hd",
            "HD95": "hd95",
            "ASSD": "assd",
            "clDSC": "cldice",
            "RVD": "volume_difference",
            "RVAE": "abs_volume_difference",
            "CEDI": "centre_distance",
            "NSD_default_tau": "nsd_min_spacing",
            "NSD_tau1": f"nsd_{t1}",
            "NSD_tau2": f"nsd_{t2}",
        },
        "metricsreloaded": {
            "numb_ref": "n_ref",
            "numb_pred": "n_pred",
            "numb_tp": "tp",
            "numb_fp": "fp",
            "numb_fn": "fn",
            "dsc": "dice",
            "iou": "iou",
            "fbeta": "f1",
            "fbeta_beta2": "f2",
            "mcc": "mcc",
            "sensitivity": "recall",
            "specificity": "specificity",
            "ppv": "precision",
            "npv": "npv",
            "accuracy": "accuracy",
            "ba": "balanced_accuracy",
            "cohens_kappa": "cohens_kappa",
            "youden_ind": "youden",
            "lr+": "lr_plus",
            "avdr": "abs_volume_difference",
            "hd": "hd",
            "hd95": "hd95",
            "assd": "assd",
            "masd": "masd",
            "nsd_tau1": f"nsd_{t1}",
            "nsd_tau2": f"nsd_{t2}",
            "boundary_iou": "boundary_iou_1",
            "boundary_iou_dist2": "boundary_iou_2",
            "cldice": "cldice",
            "topology_precision": "topology_precision",
            "topology_sensitivity": "topology_sensitivity",
            "com_dist": "centre_distance",
        },
        "monai": {
            "dice": "dice",
            "iou": "iou",
            "hd": "hd",
            "hd95": "hd95",
            "assd": "assd",
            "asd_pred_to_gt": "asd_pred_to_ref",
            "nsd_tau1": f"nsd_{t1}",
            "nsd_tau2": f"nsd_{t2}",
        },
        "monai_keep_empty": {"dice_ignore_empty_false": "dice", "iou_ignore_empty_false": "iou"},
        "monai_subvoxels": {"nsd_subvoxel_tau1": f"nsd_{t1}", "nsd_subvoxel_tau2": f"nsd_{t2}"},
        "deepmind": {
            "hd": "hd",
            "hd95": "hd95",
            "surface_dice_tau1": f"nsd_{t1}",
            "surface_dice_tau2": f"nsd_{t2}",
            "dice": "dice",
            "diag_n_surfels_gt": "surface_ref",
            "diag_n_surfels_pred": "surface_pred",
            "diag_area_gt": "surface_area_ref",
            "diag_area_pred": "surface_area_pred",
        },
    }


LIBRARY = {
    "panoptica": "panoptica",
    "metricsreloaded": "metricsreloaded",
    "monai": "monai",
    "monai_keep_empty": "monai",
    "monai_subvoxels": "monai",
    "deepmind": "surface_distance",
}
MR_FLOAT32 = ("fbeta", "fbeta_beta2", "mcc", "ppv", "npv", "accuracy", "cohens_kappa")
PAIRS = {
    "deepmind": {
        "avg_surface_distance_gt_to_pred_and_pred_to_gt": ("asd_ref_to_pred", "asd_pred_to_ref"),
        "surface_overlap_tau1_gt_and_pred": ("nsd_ref_{t1}", "nsd_pred_{t1}"),
        "surface_overlap_tau2_gt_and_pred": ("nsd_ref_{t2}", "nsd_pred_{t2}"),
    }
}


def pairwise_problems(run, configuration: str, case: str) -> list[str]:
    semantic = MANIFEST[case]["kind"] != "instance"
    name = (
        configuration
        if semantic
        else {
            "panoptica": "panoptica/naive_iou0.5",
            "metricsreloaded": "metricsreloaded/greedy_matching_iou0.5",
            "monai": "monai/iou0.5",
            "deepmind": "deepmind/fg",
        }.get(configuration)
    )
    if name is None:
        pytest.skip("MONAI variants are checked on the semantic runs")
    metrics, _ = run(name)
    library = LIBRARY[configuration]
    float32 = ("*",) if library == "monai" else MR_FLOAT32
    t1, t2 = tau_keys(case)
    problems = []
    for channel in channels(case):
        found = class_entry(metrics, case, channel)
        expected = EXPECTED[case][library]["pairwise"][channel]
        problems += compare(found, expected, pairwise_maps(case)[configuration], f"{case}[{channel}]", float32)
        for theirs, ours in PAIRS.get(configuration, {}).items():
            pair = {f"{theirs}[{i}]": v for i, v in enumerate(expected[theirs])}
            problems += compare(
                found, pair, {f"{theirs}[{i}]": o.format(t1=t1, t2=t2) for i, o in enumerate(ours)}, f"{case}[{channel}]"
            )
    return problems


@pytest.mark.parametrize("case", sorted(MANIFEST))
@pytest.mark.parametrize(
    "configuration", ["panoptica", "metricsreloaded", "monai", "monai_keep_empty", "monai_subvoxels", "deepmind"]
)
def test_pairwise_metrics(run, configuration, case):
    assert not pairwise_problems(run, configuration, case)


@pytest.mark.parametrize("case", sorted(MANIFEST))
def test_metricsreloaded_avdr_corrected(run, case):
    """``corrections: [avdr_wraparound]``: MetricsReloaded's ``avdr`` as on float masks (the
    kit's ``avdr_float64_input``), where on unsigned masks it wraps around (``avdr``, the
    default, checked in test_pairwise_metrics)."""
    semantic = MANIFEST[case]["kind"] != "instance"
    metrics, _ = run("metricsreloaded_corrected" if semantic else "metricsreloaded_corrected/fg")
    problems = []
    for channel in channels(case):
        expected = EXPECTED[case]["metricsreloaded"]["pairwise"][channel]
        found = class_entry(metrics, case, channel)
        problems += compare(found, expected, {"avdr_float64_input": "abs_volume_difference"}, f"{case}[{channel}]")
    assert not problems


MR_MULTICLASS = {"mcc": "mcc", "wck": "weighted_kappa", "ba": "balanced_accuracy", "ec": "expected_cost"}


@pytest.mark.parametrize("case", [c for c, m in MANIFEST.items() if m["kind"] == "multiclass"])
def test_metricsreloaded_multiclass(run, case):
    """``metrics: [multiclass]``: ``MultiClassPairwiseMeasures`` on the flattened maps with the
    labels 0..K, one set per case, and its statistics over the cases."""
    metrics, _ = run(f"metricsreloaded_multiclass_{MANIFEST[case]['n_classes']}")
    found = metrics["case"][case]["multiclass"]
    assert not compare(found, EXPECTED[case]["metricsreloaded"]["multiclass"], MR_MULTICLASS, case)
    summary = metrics["aggregates"]["multiclass"]["mcc"]
    assert summary["n"] + summary["n_undefined"] == metrics["aggregates"]["n_cases"]


# --------------------------------------------------------------------------------------------
# MONAI's aggregate() of one case: the suite's 'monai' nan policy


@pytest.mark.parametrize("policy", [{}, {"nan_policy": "monai"}])
@pytest.mark.parametrize("case", SEMANTIC)
def test_monai_aggregate_of_one_case(case, policy, tmp_path):
    """``aggregate()`` of one case (mean without nan; 0 when nothing is left): the suite's
    ``nan_policy: monai``, which ``definition: monai`` implies, on the case scored in this
    process (metrics.json cannot tell nan from infinity, which MONAI's mean keeps)."""
    from evaluation import phase as phases
    from evaluation.report import sanitize
    from evaluation.suites.segmentation import aggregate
    from evaluation.suites.segmentation.inputs import CaseTask
    from evaluation.suites.segmentation.options import Options
    from evaluation.suites.segmentation.scoring import score_case

    data = np.load(KIT / "cases" / f"{case}.npz")
    write_image(data["gt"], data["spacing"], tmp_path / "truth.mha")
    write_image(data["pred"], data["spacing"], tmp_path / "pred.mha")
    keys = ["dice", "iou", "hd", "hd95", "assd"]
    options = Options.from_phase(
        phases.Phase(
            tmp_path,
            "segmentation",
            {
                "classes": [1, 2, 3, 4, 5],
                "definition": "monai",
                "metrics": ["dice", "iou", "hd", "hd_percentile", "assd"],
                **policy,
            },
        )
    )
    value = score_case(CaseTask(case, str(tmp_path / "truth.mha"), str(tmp_path / "pred.mha"), "pred.mha", options))
    summary = sanitize(aggregate.summarize(options, {case: value}, keys))
    problems = []
    for channel in channels(case):
        found = {k: summary["classes"][channel][k]["mean"] for k in keys}
        problems += compare(
            found, EXPECTED[case]["monai"]["pairwise"][channel], {f"{k}_aggregate": k for k in keys}, f"{case}[{channel}]", ("*",)
        )
    assert not problems


# --------------------------------------------------------------------------------------------
# Instances: panoptica's pipeline, MetricsReloaded's detection and per-pair metrics, MONAI's PQ


PANOPTICA = {
    "n_ref_instances": "n_ref",
    "n_pred_instances": "n_pred",
    "tp": "tp",
    "fp": "fp",
    "fn": "fn",
    "prec": "precision",
    "rec": "recall",
    "rq": "rq",
    "sq": "sq",
    "sq_std": "std_iou",
    "pq": "pq",
    "pq_dsc": "pq_dice",
    "pq_cldsc": "pq_cldice",
    "instance_voxel_count_ref": "mean_ref_voxels",
    "instance_volume_ref": "mean_ref_volume",
}
PANOPTICA.update(
    {
        f"sq_{theirs}{suffix}": f"{'mean' if not suffix else 'std'}_{ours}"
        for theirs, ours in (
            ("dsc", "dice"),
            ("cldsc", "cldice"),
            ("assd", "assd"),
            ("rvd", "volume_difference"),
            ("rvae", "abs_volume_difference"),
            ("hd", "hd"),
            ("hd95", "hd95"),
            ("nsd", "nsd_min_spacing"),
        )
        for suffix in ("", "_std")
    }
)
PANOPTICA_PER_INSTANCE = {
    "DSC": "dice",
    "IOU": "iou",
    "HD": "hd",
    "HD95": "hd95",
    "ASSD": "assd",
    "NSD": "nsd_min_spacing",
    "clDSC": "cldice",
    "RVD": "volume_difference",
    "RVAE": "abs_volume_difference",
}
# Metrics panoptica has no zero-TP rule for: it raises, the suite writes null.
NO_RULE = ("sq_hd", "sq_hd_std", "sq_hd95", "sq_hd95_std", "sq_nsd", "sq_nsd_std")


def panoptica_problems(summary: dict, details: dict, block: dict, where: str) -> list[str]:
    if "error" in block["full"]:
        expected = {**block["safe"]["ungrouped"], **{k: {"error": "no zero-TP rule"} for k in NO_RULE}}
    else:
        expected = block["full"]["ungrouped"]
    problems = compare(summary, expected, PANOPTICA, where)
    matched = sorted(details["matches"], key=lambda m: m["ref"])
    for theirs, ours in PANOPTICA_PER_INSTANCE.items():
        listed = expected.get("per_instance", {}).get(theirs)
        if listed is not None:
            values = {f"{theirs}[{i}]": v for i, v in enumerate(listed)}
            problems += compare(
                {f"{theirs}[{i}]": m.get(ours) for i, m in enumerate(matched)}, values, {k: k for k in values}, where
            )
            if len(listed) != len(matched):
                problems.append(f"{where}: {len(matched)} matched instances, panoptica {len(listed)}")
    matching = block.get("matching", {})
    if "pred_to_ref" in matching:
        ours = {str(p): m["ref"] for m in details["matches"] for p in m["pred"]}
        ours.update({str(p): None for p in details["unmatched_pred"]})
        if ours != matching["pred_to_ref"]:
            problems.append(f"{where}: pred_to_ref {ours} != {matching['pred_to_ref']}")
    return problems


PANOPTICA_MATCHERS = [
    "naive_iou0.5",
    "naive_many_to_one_iou0.5",
    "maxbipartite_iou0.5",
    "maximize_merge_iou0.5",
    "naive_iou0.25",
    "maxbipartite_iou0.25",
]


@pytest.mark.parametrize("case", INSTANCE)
@pytest.mark.parametrize("matcher", PANOPTICA_MATCHERS)
def test_panoptica_instances(run, matcher, case):
    metrics, details = run(f"panoptica/{matcher}")
    block = EXPECTED[case]["panoptica"]["instance"][matcher]
    summary = class_entry(metrics, case, "fg")["instances"]
    assert not panoptica_problems(summary, details[case]["foreground"], block, case)


@pytest.mark.parametrize("case", SEMANTIC)
def test_panoptica_connected_components(run, case):
    """Binary cases: panoptica's SEMANTIC pipeline (connected components). Multi-class cases:
    the kit's single-group evaluator raises on the other labels; the suite scores every class."""
    metrics, details = run("panoptica")
    block = EXPECTED[case]["panoptica"]["semantic_cc"]["naive_iou0.5"]
    if "full" not in block:
        for channel in channels(case):
            assert class_entry(metrics, case, channel)["instances"]["n_ref"] is not None
        return
    summary = class_entry(metrics, case, "1")["instances"]
    assert not panoptica_problems(summary, details[case]["1"], block, case)


MR_DETECTION = {
    "numb_ref": "n_ref",
    "numb_pred": "n_pred",
    "numb_tp": "tp",
    "numb_fp": "fp",
    "numb_fn": "fn",
    "fbeta": "f1",
    "PQ": "pq",
}
MR_PER_PAIR = {
    "hd": "hd",
    "hd_perc": "hd95",
    "assd": "assd",
    "masd": "masd",
    "nsd": "nsd_{t1}",
    "boundary_iou": "boundary_iou_1",
    "dsc": "dice",
    "iou": "iou",
    "cldice": "cldice",
}


def mr_pairs_problems(details: dict, rows: list[dict], where: str, nsd_key: str) -> list[str]:
    ours = {(m["pred"][0], m["ref"]): m for m in details["matches"]}
    problems = []
    for row in rows:
        pair = (row["pred_label"], row["ref_label"]) if "pred_label" in row else None
        found = ours.get(pair) if pair else None
        if found is None:
            problems.append(f"{where}: pair {pair} not matched")
            continue
        mapping = {k: v.format(t1=nsd_key) for k, v in MR_PER_PAIR.items()}
        problems += compare(found, row, mapping, f"{where}{pair}")
    return problems


MR_CONFIGURATIONS = ["greedy_matching_iou0.5", "greedy_matching_iou0.25", "hungarian_iou0.5", "hungarian_iou0.25"]


@pytest.mark.parametrize("case", INSTANCE)
@pytest.mark.parametrize("configuration", MR_CONFIGURATIONS)
def test_metricsreloaded_instances(run, configuration, case):
    metrics, details = run(f"metricsreloaded/{configuration}")
    summary = class_entry(metrics, case, "fg")["instances"]
    found = details[case]["foreground"]
    block = EXPECTED[case]["metricsreloaded"]["instance"][configuration]
    if "error" in block:  # hungarian on ambiguous candidates (KeyError 'seg'), or no instance at all (KeyError 'pred')
        assert summary["tp"] + summary["fn"] == summary["n_ref"]
        if summary["n_ref"] == 0 and summary["n_pred"] == 0:
            assert (summary["tp"], summary["fp"], summary["fn"], summary["f1"], summary["pq"]) == (0, 0, 0, 1.0, 1.0)
        return
    problems = compare(summary, block["detection"], MR_DETECTION, case, ("fbeta", "PQ"))
    pairs = [[m["pred"][0], m["ref"]] for m in found["matches"]]
    if pairs != block["tp_pairs_pred_ref"]:
        problems.append(f"{case}: pairs {pairs} != {block['tp_pairs_pred_ref']}")
    if summary["fp"] != block["n_fp_rows"] or summary["fn"] != block["n_fn_rows"]:
        problems.append(f"{case}: rows {summary['fp']}/{summary['fn']} != {block['n_fp_rows']}/{block['n_fn_rows']}")
    problems += mr_pairs_problems(found, block["per_tp"], case, tau_keys(case)[0])
    assert not problems


@pytest.mark.parametrize("case", INSTANCE)
@pytest.mark.parametrize("assignment", ["greedy_matching", "hungarian"])
def test_metricsreloaded_process_evaluation(run, assignment, case):
    """``ProcessEvaluation('InS')``: the same detection at IoU 0.5 with the tolerance fixed to 1
    (it never forwards ``dict_args``)."""
    block = EXPECTED[case]["metricsreloaded"]["process_evaluation_InS"][assignment]
    if "error" in block:
        pytest.skip("the library raised; covered by test_metricsreloaded_instances")
    metrics, details = run(f"metricsreloaded/{'greedy_matching' if assignment == 'greedy_matching' else 'hungarian'}_iou0.5")
    summary = class_entry(metrics, case, "fg")["instances"]
    problems = compare(summary, block["resdet"][0], MR_DETECTION, case, ("fbeta",))
    rows = [
        {**row, "pred_label": m["pred"][0], "ref_label": m["ref"]}
        for row, m in zip(block["resseg"], details[case]["foreground"]["matches"])
    ]
    problems += mr_pairs_problems(details[case]["foreground"], rows, case, "1")
    assert not problems


MONAI_PQ = {"pq": "pq", "sq": "sq", "rq": "rq", "tp": "tp", "fp": "fp", "fn": "fn", "iou_sum": "iou_sum"}


@pytest.mark.parametrize("case", INSTANCE)
@pytest.mark.parametrize("threshold", ["iou0.5", "iou0.25"])
def test_monai_panoptic_quality(run, threshold, case):
    metrics, _ = run(f"monai/{threshold}")
    summary = class_entry(metrics, case, "fg")["instances"]
    expected = EXPECTED[case]["monai"]["panoptic_quality"][threshold]
    assert not compare(summary, expected, MONAI_PQ, case, ("pq", "sq", "rq", "iou_sum"))


GLOBAL = {
    "global_bin_volume_ref": "n_ref",
    "global_bin_volume_pred": "n_pred",
    "global_bin_dsc": "dice",
    "global_bin_iou": "iou",
    "global_bin_hd": "hd",
    "global_bin_hd95": "hd95",
    "global_bin_assd": "assd",
    "global_bin_nsd": "nsd_0p5",
    "global_bin_cldsc": "cldice",
    "global_bin_rvd": "volume_difference",
    "global_bin_rvae": "abs_volume_difference",
}


@pytest.mark.parametrize("case", [c for c in sorted(MANIFEST) if MANIFEST[c].get("n_classes", 1) == 1])
def test_panoptica_global_binary_metrics(run, case):
    """panoptica's ``global_bin_*``: the pairwise metrics without the spacing and with a 0.5
    tolerance (``panoptica_result.py: _calc_global_bin_metric``), i.e. ``spacing: voxel``;
    where the masks do not intersect, its zero-TP rules (``panoptica_global: true``)."""
    semantic = MANIFEST[case]["kind"] != "instance"
    metrics, _ = run("panoptica_voxel" if semantic else "panoptica_voxel/fg")
    blocks = EXPECTED[case]["panoptica"]["semantic_cc" if semantic else "instance"]["naive_iou0.5"]
    block = blocks["full"] if "error" not in blocks["full"] else blocks["safe"]
    found = class_entry(metrics, case, "1" if semantic else "fg")
    if found["tp"] == 0:  # panoptica raises for these (no zero-TP rule): null
        assert [found[k] for k in ("hd", "hd95", "nsd_0p5", "centre_distance")] == [None] * 4
    assert not compare(found, block["ungrouped"], GLOBAL, case)
