"""CellMap ``version: head`` (6b9ad68): pooled counts, the corrected handling of pathological
crops, head's shape-inferred downsampling, and the instance count of missing labels — on
hand-computed values. Parity on the conformance cases is in test_cellmap_parity.py."""

import json

import numpy as np
import pytest
import zarr
from helpers.cellmap_alignment import align
from helpers.grading import FIXTURES, run_cli, validate_metrics
from scipy import ndimage
from test_cellmap_scoring import _three_blobs, semantic_example

from evaluation.suites.cellmap import alignment, head, inputs
from evaluation.suites.cellmap.alignment import Grid
from evaluation.suites.cellmap.instances import normalize_distances
from evaluation.suites.cellmap.options import Limits

VS = (8.0, 8.0, 8.0)
LIMITS = Limits.reference()
NORM_128 = 0.9121806575139008  # distance.py normalize_distance: norm(128 nm) at 8 nm


def test_perfect_prediction_pools_one_distance_per_instance():
    truth = _three_blobs()
    entry = head.score_instance(truth * 7, truth, VS, LIMITS)
    assert entry == {"tp": 3, "fp": 0, "fn": 0, "hausdorff_norm_sum": 3.0, "n_hausdorff": 3, "status": "scored"}


def test_empty_prediction_counts_every_instance_at_the_cap():
    """Unlike v2 (one capped entry for the crop), head computes d_g for every truth id."""
    entry = head.score_instance(np.zeros((32, 32, 32), np.uint8), _three_blobs(), VS, LIMITS)
    assert (entry["tp"], entry["fp"], entry["fn"], entry["n_hausdorff"]) == (0, 0, 3, 3)
    assert entry["hausdorff_norm_sum"] == pytest.approx(3 * NORM_128, rel=1e-15)


def test_both_empty_contributes_nothing_and_false_positives_count():
    empty = np.zeros((32, 32, 32), np.uint32)
    assert head.score_instance(empty, empty, VS, LIMITS)["n_hausdorff"] == 0
    pred = np.zeros_like(empty)
    pred[1:3, 1:3, 1:3], pred[20:22, 20:22, 20:22] = 1, 1  # two components, no truth
    entry = head.score_instance(pred, empty, VS, LIMITS)
    assert (entry["tp"], entry["fp"], entry["fn"], entry["n_hausdorff"]) == (0, 2, 0, 2)
    assert entry["hausdorff_norm_sum"] == pytest.approx(2 * NORM_128, rel=1e-15)


def test_semantic_counts_by_hand():
    assert head.score_semantic(*semantic_example()) == {"tp": 2, "fp": 1, "fn": 2, "status": "scored"}


def _entry(**counts):
    return {"num_voxels": 8, "voxel_size": list(VS), "is_missing": False, "status": "scored", **counts}


def test_pooling_over_crops_and_plain_means_over_classes():
    inst = ("mito", "ld")
    entries = {
        "crop1": {
            "mito": _entry(tp=3, fp=1, fn=0, hausdorff_norm_sum=3.5, n_hausdorff=4),
            "er": _entry(tp=2, fp=1, fn=1),
            "ld": _entry(tp=0, fp=0, fn=0, hausdorff_norm_sum=0.0, n_hausdorff=0),
        },
        "crop2": {"mito": head.missing_counts(True, VS, (2, 2, 2), 2), "er": _entry(tp=0, fp=0, fn=0)},
    }
    everything = head.combine(entries, inst, include_missing=True)
    mito = everything["label_scores"]["mito"]
    assert (mito["tp"], mito["fp"], mito["fn"]) == (3, 1, 2)
    assert mito["f1"] == 6 / 9 and mito["normalized_hausdorff_distance"] == 3.5 / 6
    assert mito["combined_score"] == pytest.approx((6 / 9 * 3.5 / 6) ** 0.5, rel=1e-15)
    assert everything["label_scores"]["ld"] == {
        "f1": 1.0,
        "normalized_hausdorff_distance": 1.0,
        "combined_score": 1.0,
        "tp": 0,
        "fp": 0,
        "fn": 0,
    }  # nothing anywhere
    assert everything["label_scores"]["er"]["iou"] == 2 / 4
    assert everything["overall_instance_score"] == pytest.approx((mito["combined_score"] + 1.0) / 2, rel=1e-15)
    assert everything["overall_score"] == pytest.approx((everything["overall_instance_score"] * 0.5) ** 0.5, rel=1e-15)
    submitted = head.combine(entries, inst, include_missing=False)
    assert submitted["label_scores"]["mito"]["f1"] == 6 / 7
    public = head.public_results(everything, {"label_scores": {"er": {}}})
    assert public["label_scores"] == {"er": {"iou": 0.5}} and public["overall_score"] == everything["overall_score"]


def test_missing_semantic_label_counts_every_voxel():
    entry = head.missing_counts(False, VS, (3, 4, 5), 0)
    assert (entry["tp"], entry["fp"], entry["fn"], entry["is_missing"]) == (0, 0, 60, True)


def test_count_instances_reads_in_slabs(tmp_path, monkeypatch):
    truth = np.zeros((9, 5, 5), np.uint32)
    truth[0, 0, 0], truth[4, 1, 1], truth[8, 4, 4], truth[8, 0, 0] = 7, 900, 7, 3
    zarr.create_array(str(tmp_path / "t"), data=truth, chunks=(2, 5, 5), zarr_format=2)
    monkeypatch.setattr(inputs, "SLAB_VOXELS", 50)  # two z-slices a slab
    inputs._count_instances_cached.cache_clear()
    assert inputs.count_instances(tmp_path / "t") == 3


# --------------------------------------------------------------------------------------------
# The "nothing anywhere" rule and its corrected option, through the command line


def _case_h_components() -> dict[tuple[str, str], tuple[int, int]]:
    """(truth instances, 26-connected predicted components) of case h's pathological crops,
    counted independently of the grader (numpy + scipy.ndimage)."""
    case = FIXTURES / "cellmap" / "cases" / "h_too_many_instances"
    found = {}
    for crop, label in (("crop109", "lyso"), ("crop109", "ves")):
        truth = zarr.open_array(str(case / "truth.zarr" / crop / label), mode="r")[:]
        pred = zarr.open_array(str(case / "submission.zarr" / crop / label), mode="r")[:]
        n_pred = 0
        for value in np.unique(pred[pred != 0]):
            n_pred += ndimage.label(pred == value, structure=np.ones((3, 3, 3)))[1]
        found[crop, label] = (np.unique(truth[truth != 0]).size, n_pred)
    return found


def test_reference_rule_scores_an_all_pathological_class_one(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("h_too_many_instances", "suite: cellmap\nversion: head\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    assert run.metrics["aggregates"]["label_scores"]["lyso"]["combined_score"] == 1.0


def test_unmatched_option_counts_pathological_crops(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("h_too_many_instances", "suite: cellmap\nversion: head\npathological_crops: unmatched\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    counts = _case_h_components()
    assert counts[("crop109", "lyso")] == (3, 343)
    scores = run.metrics["aggregates"]["label_scores"]

    n_gt, n_pred = counts[("crop109", "lyso")]
    assert (scores["lyso"]["tp"], scores["lyso"]["fp"], scores["lyso"]["fn"]) == (0, n_pred, n_gt)
    assert scores["lyso"]["f1"] == 0.0 and scores["lyso"]["combined_score"] == 0.0
    assert scores["lyso"]["normalized_hausdorff_distance"] == pytest.approx(NORM_128, rel=1e-12)  # cap 32 * 8 / 2

    # ves pools the pathological crop109 with crop115, which the option leaves as the reference scores it.
    crop115 = json.loads((FIXTURES / "cellmap" / "expected-head.json").read_text())["cases"]["h_too_many_instances"]["scores"][
        "crop115"
    ]["ves"]
    n_gt, n_pred = counts[("crop109", "ves")]
    tp, fp, fn = crop115["tp"], crop115["fp"] + n_pred, crop115["fn"] + n_gt
    nhd = (crop115["hausdorff_norm_sum"] + (n_gt + n_pred) * NORM_128) / (crop115["n_hausdorff"] + n_gt + n_pred)
    assert (scores["ves"]["tp"], scores["ves"]["fp"], scores["ves"]["fn"]) == (tp, fp, fn)
    assert scores["ves"]["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn), rel=1e-12)
    assert scores["ves"]["normalized_hausdorff_distance"] == pytest.approx(nhd, rel=1e-12)
    assert run.metrics["case"]["crop109"]["lyso"]["status"] == "skipped_too_many_instances"


def test_pathological_option_requires_head(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("h_too_many_instances", "suite: cellmap\npathological_crops: unmatched\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 1 and not (tmp_path / "out" / "metrics.json").exists()


# --------------------------------------------------------------------------------------------
# head's alignment addition: large arrays without a voxel size are downsampled by shape ratio


@pytest.mark.parametrize("head", [True, False])
def test_large_array_without_voxel_size(head, monkeypatch):
    monkeypatch.setattr(alignment, "CHUNKED_LOADING_MIB", 0)  # every array counts as large
    coarse = np.arange(1, 1 + 4 * 6 * 8, dtype=np.uint32).reshape(4, 6, 8)
    fine = np.kron(coarse, np.ones((2, 2, 2), np.uint32))  # each coarse voxel as a 2x2x2 block
    grid = Grid((8.0, 8.0, 8.0), coarse.shape, (0.0, 0.0, 0.0))
    out = align(
        fine,
        {},
        grid,
        True,
        read=lambda region: fine[region],
        max_size_ratio=4096,
        display="crop1/mito",
        infer_scale_from_shape=head,
    )
    if head:
        assert out.shape == coarse.shape and (out == coarse).all()
    else:  # v2: centre crop of the fine array
        assert (out == fine[2:6, 3:9, 4:12]).all()


def test_shape_ratio_below_one_is_not_inferred():
    assert alignment.inferred_scale((8, 12, 15), Grid(VS, (4, 6, 16), (0.0,) * 3)) is None
    assert alignment.inferred_scale((4, 6, 8), Grid(VS, (4, 6, 8), (0.0,) * 3)) is None
    np.testing.assert_array_equal(alignment.inferred_scale((8, 12, 8), Grid(VS, (4, 6, 8), (0.0,) * 3)), [0.5, 0.5, 1.0])


def test_normalised_cap_constant():
    assert normalize_distances([np.float32(128.0)], VS)[0] == NORM_128
