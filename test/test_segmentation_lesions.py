"""Label groups, multi-class instance maps and lesion-level detail of the generic segmentation
suite, through the command line, against independently known values:

* multi-class instance maps (ids grouped into classes) and per-size-bin recall against
  panoptica 2.1.7 run with instance input and one label group per class
  (test/fixtures/segmentation/instances/expected.json);
* COCO AP@[.5:.95], AP50, AP75 per case and over the cases against pycocotools 2.0.11's
  COCOeval on the same masks;
* per-bin precision, instance sizes in instances.json and instances.csv against a direct
  computation from the label maps in this file;
* label groups (a non-merged group keeps each label's components apart, a single-instance
  group is one instance) against panoptica's evaluator with the same groups
  (test/fixtures/segmentation/brats/panoptica/custom_naive.json).
"""

import csv
import json
import math
import shutil

import numpy as np
import pytest
from helpers.grading import FIXTURES, run_cli

KIT = FIXTURES / "segmentation" / "instances"
EXPECTED = json.loads((KIT / "expected.json").read_text())
CLASSES = {"cell": list(range(1, 50)), "nucleus": list(range(101, 150))}
CLASSES["all"] = CLASSES["cell"] + CLASSES["nucleus"]


@pytest.fixture(scope="module")
def instance_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("instances")
    root = tmp / "phase"
    shutil.copytree(KIT / "truth", root / "labels")
    (root / "phase.yaml").write_text(
        "suite: segmentation\ninput: instances\n"
        f"classes: {json.dumps(CLASSES)}\n"
        "definition: panoptica\nmetrics: [dice]\n"
        "instance_metrics: [detection, panoptic, dice, size_bins, ap]\n"
        "size_bins: [10, 40]\nsize_unit: voxels\nstatistics: [mean]\n"
    )
    run = run_cli(KIT / "pred", root, tmp / "out")
    assert run.code == 0, run.stderr[-3000:]
    return run


def close(got, expected) -> bool:
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        return got is None
    return got is not None and abs(got - expected) <= 1e-12 * max(1.0, abs(expected))


def test_multiclass_instances_match_panoptica(instance_run):
    compared = 0
    keys = {"tp": "tp", "fp": "fp", "fn": "fn", "rq": "rq", "sq": "sq", "pq": "pq", "mean_dice": "sq_dsc", "pq_dice": "pq_dsc"}
    for case, groups in EXPECTED["panoptica"].items():
        for cls, expected in groups.items():
            got = instance_run.metrics["case"][case]["classes"][cls]["instances"]
            for ours, theirs in keys.items():
                if theirs in expected:
                    assert close(got[ours], expected[theirs]), (case, cls, ours, got[ours], expected[theirs])
                    compared += 1
            for i in range(3):
                assert close(got[f"recall_bin{i}"], expected["recall_by_voxel_count"][f"rec_q{i}"]), (case, cls, i)
                compared += 1
    assert compared > 120


def test_coco_average_precision_matches_pycocotools(instance_run):
    compared = 0
    for case, classes in EXPECTED["coco"]["per_case"].items():
        for cls, expected in classes.items():
            got = instance_run.metrics["case"][case]["classes"][cls]["instances"]
            if expected is None:  # no prediction of the class: COCO's precision is 0 at every recall
                assert (got["ap"], got["ap50"], got["ap75"]) == (0.0, 0.0, 0.0)
                continue
            for key in ("ap", "ap50", "ap75"):
                assert close(got[key], None if expected[key] == -1 else expected[key]), (case, cls, key)
                compared += 1
    pooled = instance_run.metrics["aggregates"]["instances_pooled"]
    for cls, expected in EXPECTED["coco"]["dataset"].items():
        for key in ("ap", "ap50", "ap75"):
            assert close(pooled[cls]["ap"][key], expected[key]), (cls, key)
            compared += 1
    assert compared == 30


def _instances(array: np.ndarray, ids) -> dict[int, np.ndarray]:
    return {int(v): array == v for v in np.unique(array) if v in ids}


def test_size_bins_and_instance_sizes(instance_run):
    """Precision per bin, instance sizes and instances.csv from the maps themselves: a
    prediction is matched when its IoU with a truth instance of its class is at least 0.5."""
    details = json.loads((instance_run.output / "instances.json").read_text())
    rows = list(csv.DictReader((instance_run.output / "instances.csv").open()))
    compared = 0
    for case in EXPECTED["panoptica"]:
        truth, pred = np.load(KIT / "truth" / f"{case}.npy"), np.load(KIT / "pred" / f"{case}.npy")
        for cls, ids in CLASSES.items():
            refs, preds = _instances(truth, ids), _instances(pred, ids)
            matched = {p for p, m in preds.items() if any((m & r).sum() / (m | r).sum() >= 0.5 for r in refs.values())}
            bins = np.digitize([m.sum() for m in preds.values()], [10, 40])
            got = instance_run.metrics["case"][case]["classes"][cls]["instances"]
            for i in range(3):
                in_bin = [p for p, b in zip(preds, bins) if b == i]
                expected = sum(p in matched for p in in_bin) / len(in_bin) if in_bin else None
                assert close(got[f"precision_bin{i}"], expected), (case, cls, i)
                assert got[f"n_pred_bin{i}"] == len(in_bin)
                compared += 2
            found = details[case][cls]
            sizes = {u["id"]: u["voxels"] for u in found["unmatched_ref_instances"]}
            sizes.update({m["ref"]: m["ref_voxels"] for m in found["matches"]})
            assert sizes == {r: int(m.sum()) for r, m in refs.items()}
            unmatched = {u["id"]: u["voxels"] for u in found["unmatched_pred_instances"]}
            assert unmatched == {p: int(m.sum()) for p, m in preds.items() if p not in matched}
            listed = [r for r in rows if r["case"] == case and r["class"] == cls]
            assert len(listed) == len(found["matches"]) + len(sizes) - len(found["matches"]) + len(unmatched)
            compared += len(sizes) + len(unmatched)
    assert compared > 100


# --------------------------------------------------------------------------------------------
# Label groups on semantic maps


BRATS = FIXTURES / "segmentation" / "brats"


def test_label_groups_match_panoptica(tmp_path):
    """{labels, merge: false}: each label its own components (panoptica's LabelGroup in 3-D);
    a list: one region (LabelMergeGroup); single_instance: one instance, matched whatever
    its overlap."""
    root = tmp_path / "phase"
    shutil.copytree(BRATS / "cases" / "truth", root / "labels")
    (root / "phase.yaml").write_text(
        "suite: segmentation\n"
        "classes: {parts: {labels: [1, 3], merge: false}, snfh: 2, rc: {labels: [4], single_instance: true}, wt: [1, 2, 3]}\n"
        "definition: panoptica\nmetrics: [dice]\ninstance_metrics: [detection, panoptic, dice]\n"
        "missing_cases: skip\nstatistics: [mean]\n"
    )
    run = run_cli(BRATS / "cases" / "pred", root, tmp_path / "out")
    reference = json.loads((BRATS / "panoptica" / "custom_naive.json").read_text())
    keys = {"n_ref": "n_ref_instances", "n_pred": "n_pred_instances", "tp": "tp", "fp": "fp", "fn": "fn"}
    keys.update({"rq": "rq", "sq": "sq", "pq": "pq", "mean_dice": "sq_dsc"})
    compared = 0
    for entry in reference["metrics"]:
        if "error" in entry:
            continue
        case = entry["subject_name"].removesuffix(".nii.gz")
        for cls in ("parts", "snfh", "rc", "wt"):
            got = run.metrics["case"][case]["classes"][cls]["instances"]
            for ours, theirs in keys.items():
                expected = entry[cls].get(theirs)
                if entry[cls]["tp"] == 0 and ours in ("sq", "pq", "mean_dice"):
                    continue  # the zero-TP rules differ: the generic suite's are panoptica's defaults
                assert close(got[ours], expected), (case, cls, ours, got[ours], expected)
                compared += 1
    assert compared > 150
