"""CellMap per-label scoring and aggregation: hand-computed values and properties."""

import math

import numpy as np
import pytest

from evaluation.errors import SubmissionError
from evaluation.suites.cellmap.inputs import match_crops, read_manifest
from evaluation.suites.cellmap.instances import max_distance, normalize_distances
from evaluation.suites.cellmap.options import Limits
from evaluation.suites.cellmap.v2 import combine, missing_entry, score_instance, score_semantic

VS = (8.0, 8.0, 8.0)
LIMITS = Limits.reference()


def _three_blobs():
    truth = np.zeros((32, 32, 32), np.uint32)
    truth[2:8, 2:8, 2:8] = 1
    truth[12:20, 12:20, 12:20] = 2
    truth[24:30, 3:9, 20:28] = 3
    return truth


def test_cap_and_normalisation_examples_from_the_spec():
    assert max_distance(VS, (32, 32, 32)) == 128.0
    assert normalize_distances([256.0], VS)[0] == pytest.approx(0.8320735519424923, rel=1e-15)
    assert normalize_distances([128.0], VS)[0] == pytest.approx(0.9121806575139008, rel=1e-15)
    assert normalize_distances([math.inf], VS)[0] == 0.0


def test_perfect_instance_prediction_scores_one():
    truth = _three_blobs()
    scores = score_instance(truth.copy(), truth, VS, LIMITS)
    assert scores["mean_accuracy"] == 1.0 and scores["hausdorff_distance"] == 0.0
    assert scores["combined_score"] == 1.0 and scores["iou"] == 1.0


def test_instance_scores_do_not_depend_on_prediction_ids():
    truth = _three_blobs()
    pred = np.roll(truth, 1, axis=2)
    permuted = np.choose(pred, [0, 70, 5, 900]).astype(np.uint64)
    assert score_instance(pred, truth, VS, LIMITS) == score_instance(permuted, truth, VS, LIMITS)


def test_empty_prediction_gets_the_cap_once():
    truth = _three_blobs()
    scores = score_instance(np.zeros_like(truth), truth, VS, LIMITS)
    assert scores["hausdorff_distance"] == 128.0
    assert scores["normalized_hausdorff_distance"] == pytest.approx(0.9121806575139008, rel=1e-15)
    assert scores["mean_accuracy"] == pytest.approx(1 - np.count_nonzero(truth) / truth.size)


def test_too_many_instances_is_pathological():
    truth = np.zeros((32, 32, 32), np.uint32)
    truth[:4, :4, :4] = 1
    noise = np.zeros_like(truth)
    noise[::2, ::2, ::2] = 1  # 4096 isolated voxels: 4096 components against 1 GT
    scores = score_instance(noise, truth, VS, LIMITS)
    assert scores["status"] == "skipped_too_many_instances"
    assert scores["combined_score"] == 0 and scores["hausdorff_distance"] == 128.0


def semantic_example():
    """(prediction, truth) with tp 2, fp 1, fn 2, tn 3."""
    truth = np.zeros((2, 2, 2), np.uint8)
    truth[0] = 1
    pred = np.zeros_like(truth)
    pred[0, 0] = 1
    pred[1, 0, 0] = 1
    return pred, truth


def test_semantic_scores_by_hand_and_both_empty():
    scores = score_semantic(*semantic_example())  # tp 2, fp 1, fn 2, tn 3
    assert scores["iou"] == pytest.approx(2 / 5) and scores["dice_score"] == pytest.approx(4 / 7)
    assert scores["binary_accuracy"] == 5 / 8
    both_empty = score_semantic(np.zeros(3), np.zeros(3))
    assert both_empty["iou"] == 1 and both_empty["dice_score"] == 1


def test_aggregation_is_voxel_weighted():
    """aggregation.py combine_scores, case d / ld: (1.0 * 32768 + 0 * 38400) / 71168."""
    found = {
        "combined_score": 1.0,
        "mean_accuracy": 1.0,
        "hausdorff_distance": 0.0,
        "normalized_hausdorff_distance": 1.0,
        "num_voxels": 32768,
        "voxel_size": list(VS),
        "is_missing": False,
    }
    entries = {"crop104": {"ld": found}, "crop105": {"ld": missing_entry(None, True, VS, (24, 40, 40))}}
    everything = combine(entries, ("ld",), include_missing=True)
    assert everything["label_scores"]["ld"]["combined_score"] == pytest.approx(0.460431654676259, rel=1e-12)
    assert everything["overall_semantic_score"] == 0 and everything["overall_score"] == 0.0
    assert combine(entries, ("ld",), include_missing=False)["label_scores"]["ld"]["combined_score"] == 1.0


def test_manifest_last_row_wins(tmp_path):
    path = tmp_path / "manifest.csv"
    path.write_text(
        "crop_name,dataset,class_label,voxel_size,translation,shape\n"
        "7,d,mito,[8.0;8.0;8.0],[0.0;0.0;0.0],[4;4;4]\n"
        "7,d,mito,[4.0;4.0;4.0],[1.0;2.0;3.0],[8;8;8]\n"
    )
    grid = read_manifest(path)[(7, "mito")]
    assert grid.voxel_size == (4.0, 4.0, 4.0) and grid.shape == (8, 8, 8) and grid.translation == (1.0, 2.0, 3.0)


def test_crop_names_fall_back_to_bare_ids_only_when_nothing_matches():
    assert match_crops({"crop1", "2"}, {"crop1", "crop2"}) == {"crop1": "crop1"}
    assert match_crops({"1", "2"}, {"crop1", "crop2"}) == {"crop1": "1", "crop2": "2"}
    with pytest.raises(SubmissionError, match="no test crop"):
        match_crops({"volume"}, {"crop1"})
