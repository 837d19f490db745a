"""The segmentation suite through the command line: finding and pairing cases, options
(regions, empty-mask conventions, spacing, nan policy, ranking), failures and the files
written."""

import csv
import json
import math

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import run_cli, validate_metrics
from scipy import ndimage


def image(array: np.ndarray, path, spacing=(1.0, 1.0, 1.0)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    written = sitk.GetImageFromArray(array)
    written.SetSpacing(tuple(float(s) for s in spacing[: array.ndim][::-1]))
    sitk.WriteImage(written, str(path))


def organs(seed: int) -> np.ndarray:
    """Two touching blocks (labels 1, 2) and a ball (label 3) in 24 x 32 x 32."""
    labels = np.zeros((24, 32, 32), np.uint8)
    labels[4:16, 6:18, 5:15] = 1
    labels[4:16, 6:18, 15:24] = 2
    ball = np.zeros(labels.shape, bool)
    ball[18, 22, 24] = True
    labels[ndimage.binary_dilation(ball, iterations=3 + seed % 2)] = 3
    return labels


@pytest.fixture
def case_folders(tmp_path):
    """Two cases: truth in phase/labels, a shifted prediction in input/."""

    def make(phase_yaml: str, predictions=None, spacing=(2.0, 1.0, 1.0)) -> tuple:
        phase, submission = tmp_path / "phase", tmp_path / "input"
        for seed in (1, 2):
            image(organs(seed), phase / "labels" / f"case_{seed}.nii.gz", spacing)
            predicted = np.roll(organs(seed), 1, axis=2) if predictions is None else predictions[seed]
            if predicted is not None:
                image(predicted, submission / f"case_{seed}.nii.gz", spacing)
        submission.mkdir(exist_ok=True)
        (phase / "phase.yaml").write_text("suite: segmentation\n" + phase_yaml)
        return phase, submission, tmp_path / "output"

    return make


def test_a_typical_phase_scores_every_class_and_writes_its_files(case_folders):
    phase, submission, output = case_folders(
        "classes: {left: 1, right: 2, ball: 3, block: [1, 2]}\nmetrics: [dice, hd, hd_percentile, nsd, assd]\n"
        "nsd_tolerances: [1.0, 2.0]\ninstance_metrics: [detection, panoptic, dice]\n"
    )
    done = run_cli(submission, phase, output)
    assert done.code == 0, done.stderr[-2000:]
    metrics = done.metrics
    validate_metrics(metrics)
    entry = metrics["case"]["case_1"]
    assert entry["status"] == "scored" and entry["spacing"] == [2.0, 1.0, 1.0]
    assert set(entry["classes"]) == {"left", "right", "ball", "block"}
    assert entry["classes"]["ball"]["instances"]["tp"] == 1
    block = entry["classes"]["block"]
    assert block["dice"] == pytest.approx(1 - 2 * 12 * 12 / (2 * 12 * 12 * 19))  # the union moved by one column
    assert metrics["aggregates"]["ranking"] == {"key": "dice", "statistic": "mean", "higher_is_better": True}
    assert metrics["aggregates"]["score"] == pytest.approx(
        np.mean([metrics["aggregates"]["classes"][c]["dice"]["mean"] for c in ("left", "right", "ball", "block")])
    )
    rows = list(csv.DictReader((output / "cases.csv").open()))
    assert len(rows) == 8 and {"case", "class", "dice", "hd95", "nsd_1", "nsd_2", "instances_pq"} <= set(rows[0])
    assert "<svg" in (output / "report.html").read_text()
    details = json.loads((output / "instances.json").read_text())
    assert details["case_1"]["ball"]["matches"][0]["ref"] == 1


def test_regions_equal_the_merged_labels(case_folders, tmp_path):
    phase, submission, output = case_folders("classes: {block: [1, 2]}\nmetrics: [dice, hd, assd, nsd]\nunknown_labels: ignore\n")
    merged = run_cli(submission, phase, output).metrics["case"]["case_1"]["classes"]["block"]
    truth = np.isin(organs(1), [1, 2]).astype(np.uint8)
    image(truth, tmp_path / "p2" / "labels" / "case_1.nii.gz", (2.0, 1.0, 1.0))
    image(np.roll(truth, 1, axis=2), tmp_path / "i2" / "case_1.nii.gz", (2.0, 1.0, 1.0))
    (tmp_path / "p2" / "phase.yaml").write_text("suite: segmentation\nclasses: {block: 1}\nmetrics: [dice, hd, assd, nsd]\n")
    single = run_cli(tmp_path / "i2", tmp_path / "p2", tmp_path / "o2").metrics["case"]["case_1"]["classes"]["block"]
    assert merged == single


def test_a_missing_case_rejects_unless_skipped_or_scored_empty(case_folders):
    phase, submission, output = case_folders("classes: [1, 2, 3]\n", predictions={1: np.roll(organs(1), 1, axis=2), 2: None})
    done = run_cli(submission, phase, output)
    assert done.code == 2 and "case_2" in done.last_line
    (phase / "phase.yaml").write_text("suite: segmentation\nclasses: [1, 2, 3]\nmissing_cases: empty\nempty_masks: nan\n")
    done = run_cli(submission, phase, output)
    assert done.code == 0
    empty = done.metrics["case"]["case_2"]["classes"]["1"]
    assert empty["dice"] is None and empty["hd"] is None  # an empty prediction under empty_masks: nan


def test_unknown_labels_fail_their_case_unless_ignored(case_folders):
    wrong = organs(2).copy()
    wrong[0, 0, 0] = 7
    phase, submission, output = case_folders("classes: [1, 2, 3]\n", predictions={1: np.roll(organs(1), 1, axis=2), 2: wrong})
    done = run_cli(submission, phase, output)
    assert done.code == 2 and "7" in done.last_line and "case_2" in done.last_line
    assert done.metrics["case"]["case_1"]["status"] == "scored" and done.metrics["case"]["case_2"]["status"] == "failed"
    (phase / "phase.yaml").write_text("suite: segmentation\nclasses: [1, 2, 3]\nunknown_labels: ignore\n")
    assert run_cli(submission, phase, output).code == 0


def test_a_prediction_on_another_grid_fails(case_folders, tmp_path):
    phase, submission, output = case_folders("classes: [1, 2, 3]\n")
    image(organs(1), submission / "case_1.nii.gz", (3.0, 1.0, 1.0))
    done = run_cli(submission, phase, output)
    assert done.code == 2 and "spacing" in done.last_line


def test_empty_values_replace_a_convention(case_folders):
    phase, submission, output = case_folders(
        "classes: [1, 2, 3, 9]\ndefinition: monai\nmetrics: [dice, hd]\n"
        "empty_values: {dice: {both_empty: 1.0}, hd: {both_empty: 0}}\n",
    )
    absent = run_cli(submission, phase, output).metrics["case"]["case_1"]["classes"]["9"]
    assert absent == {"dice": 1.0, "hd": 0}


def test_worst_policy_counts_undefined_distances_as_the_diagonal(case_folders):
    phase, submission, output = case_folders(
        "classes: [1, 3]\nmetrics: [hd]\nnan_policy: worst\nranking: hd\nunknown_labels: ignore\n",
        predictions={1: np.where(organs(1) == 3, 0, organs(1)), 2: organs(2)},
    )
    metrics = run_cli(submission, phase, output).metrics
    diagonal = math.sqrt((24 * 2.0) ** 2 + 32**2 + 32**2)
    ball = metrics["aggregates"]["classes"]["3"]["hd"]
    assert metrics["case"]["case_1"]["classes"]["3"]["hd"] is None  # MetricsReloaded: nan for an empty prediction
    assert ball["mean"] == pytest.approx(diagonal / 2) and ball["n_undefined"] == 0
    assert metrics["aggregates"]["ranking"]["higher_is_better"] is False
    assert metrics["aggregates"]["score"] == pytest.approx(
        -np.mean([metrics["aggregates"]["classes"][c]["hd"]["mean"] for c in ("1", "3")])
    )


def test_spacing_can_be_dropped_or_given(case_folders):
    phase, submission, output = case_folders("classes: [1]\nmetrics: [hd]\nspacing: voxel\nunknown_labels: ignore\n")
    assert run_cli(submission, phase, output).metrics["case"]["case_1"]["classes"]["1"]["hd"] == 1.0


def test_instance_maps_are_one_class_with_matching(tmp_path):
    truth = ndimage.label(organs(1) > 0)[0].astype(np.uint16) * 7
    image(truth, tmp_path / "phase" / "labels" / "a.mha")
    moved = np.roll(truth, 1, axis=1)
    image(np.where(moved > 0, moved // 7 + 100, 0).astype(np.uint16), tmp_path / "input" / "a.mha")
    (tmp_path / "phase" / "phase.yaml").write_text(
        "suite: segmentation\ninput: instances\nmetrics: [dice]\ninstance_metrics: [detection, panoptic]\ndefinition: panoptica\n"
    )
    done = run_cli(tmp_path / "input", tmp_path / "phase", tmp_path / "output")
    assert done.code == 0, done.stderr[-2000:]
    found = done.metrics["case"]["a"]["classes"]["foreground"]["instances"]
    assert (found["n_ref"], found["n_pred"], found["tp"]) == (2, 2, 2)


def test_deepmind_has_no_instance_evaluation(case_folders):
    phase, submission, output = case_folders(
        "classes: [1]\nmetrics: [dice]\ndefinition: deepmind\ninstance_metrics: [detection]\n"
    )
    done = run_cli(submission, phase, output)
    assert done.code != 0 and "no instance evaluation" in done.stdout  # the organizer's cause, in the log


def test_a_ranking_key_that_is_not_computed_is_refused(case_folders):
    phase, submission, output = case_folders("classes: [1]\nmetrics: [dice]\nranking: hd95\n")
    done = run_cli(submission, phase, output)
    assert done.code != 0 and "hd95" in done.stdout


def test_multiclass_measures_per_case_and_over_cases(case_folders):
    """``metrics: [multiclass]``: one set per case over the declared labels (a region does not
    add a label), in metrics.json only, with statistics over the cases."""
    phase, submission, output = case_folders(
        "classes: {left: 1, right: 2, ball: 3, block: [1, 2]}\nmetrics: [dice, multiclass]\n"
    )
    done = run_cli(submission, phase, output)
    assert done.code == 0, done.stderr[-2000:]
    validate_metrics(done.metrics)
    cases = done.metrics["case"]
    assert set(cases["case_1"]["multiclass"]) == {"mcc", "weighted_kappa", "balanced_accuracy", "expected_cost"}
    assert 0 < cases["case_1"]["multiclass"]["mcc"] < 1
    summary = done.metrics["aggregates"]["multiclass"]["mcc"]
    assert summary["n"] == 2 and summary["mean"] == pytest.approx(np.mean([cases[c]["multiclass"]["mcc"] for c in cases]))
    assert "multiclass" not in done.metrics["aggregates"]["overall"]


def test_the_image_build_warms_every_library_with_every_metric(monkeypatch):
    """The Dockerfile's warm-up: each library's phase with every metric is valid and warmed."""
    from evaluation.phase import option_schemas
    from evaluation.suites import segmentation
    from evaluation.suites.segmentation.options import LIBRARIES

    warmed = []
    monkeypatch.setattr(segmentation, "warm_up", warmed.append)
    segmentation.warm_up_every_definition()
    assert [o.definitions["distance"] for o in warmed] == list(LIBRARIES)
    every = option_schemas("segmentation")["metrics"]["items"]["enum"]
    assert all(o.metrics == tuple(every) and o.instance_metrics for o in warmed)
