"""The edge-case census in metrics.json: how many cases hit each empty-mask / undefined-value
rule, and the leaderboard value under each alternative policy. Each alternative is checked
against the grader run with that policy actually set in phase.yaml."""

import math

import numpy as np
import pytest
from helpers.grading import run_cli, validate_metrics
from test_segmentation_suite import case_folders, organs  # noqa: F401 - the fixture
from test_tomo_fuelcell import REGION_LABELS, START, STOP, SUB_B, TOTAL, TRUTH_B, make_phase, stack, write_volume

from evaluation.contract import Outcome
from evaluation.suites.tomo_foam import aggregate as foam


def test_segmentation_counts_empty_pairs_and_scores_each_policy(case_folders, tmp_path):  # noqa: F811
    """case_1's prediction lacks the ball (class 3): one pred_empty pair whose HD is undefined.
    The census's value under nan_policy worst and empty_masks nan are what runs with those
    options give."""
    phase_yaml = "classes: [1, 3]\nmetrics: [hd]\nranking: hd\nunknown_labels: ignore\n"
    predictions = {1: np.where(organs(1) == 3, 0, organs(1)), 2: organs(2)}
    phase, submission, output = case_folders(phase_yaml, predictions=predictions)
    metrics = run_cli(submission, phase, output).metrics
    validate_metrics(metrics)
    census = metrics["census"]
    assert census["rules"] == {"pred_empty": 1, "hd undefined": 1}
    policies = census["alternatives"]["nan_policy"]
    assert policies["in_force"] == "ignore" and policies["values"]["ignore"] == metrics["leaderboard"]["score"]
    for option, value in (("nan_policy", "worst"), ("nan_policy", "monai"), ("empty_masks", "nan")):
        (phase / "phase.yaml").write_text("suite: segmentation\n" + phase_yaml + f"{option}: {value}\n")
        other = run_cli(submission, phase, tmp_path / f"{option}-{value}").metrics
        assert census["alternatives"][option]["values"][value] == other["leaderboard"]["score"], (option, value)
    assert policies["values"]["worst"] < policies["values"]["ignore"]  # the missing ball counts as the diagonal


def test_fuel_cell_scores_empty_regions_both_ways(tmp_path):
    """Region 4 holds water in neither the truth nor the submission: NaN by default (the
    harmonic mean too), 1 under empty_region: one (12/17, the hand-computed value)."""
    masks = "".join(f"  region_{k}: {{mask: '{{step}}/mask{k}.npy'}}\n" for k in range(1, 5))
    phase = make_phase(tmp_path / "phase", {"B": TRUTH_B}, "regions:\n" + masks)
    members = {1: (1, 2, 3, 4), 2: (3,), 3: (2,), 4: (1,)}
    for k, labels in members.items():
        write_volume(
            phase / "B" / f"mask{k}.npy", np.isin(np.pad(REGION_LABELS, ((START, TOTAL - STOP), (0, 0), (0, 0))), labels)
        )
    (phase / "B" / "regions.h5").unlink()
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "anything.h5", stack(SUB_B, total=False).astype(bool))
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    census = run.metrics["census"]
    assert census["rules"] == {"empty region (neither has water)": 1}
    values = census["alternatives"]["empty_region"]["values"]
    assert values["nan"] is None and values["one"] == pytest.approx(12 / 17, rel=1e-15)


def test_foam_harmonic_mean_of_all_or_defined_scores():
    """Two phantoms, one without small voids (NaN sensitivity): the reference's harmonic mean
    is NaN there; over the defined scores it is 4 / (1/0.5 + 3) by hand."""
    full = {"dice_foam": 0.5, "sens_large": 1.0, "sens_medium": 1.0, "sens_small": 1.0, "dice_edge": 1.0}
    partial = {**full, "sens_small": math.nan}
    outcomes = {
        "a": Outcome("a", value=full),
        "b": Outcome("b", value=partial),
        "c": Outcome("c", kind="submission", message="x"),
    }
    census = foam.census(["a", "b", "c"], outcomes, "all")
    assert census["rules"] == {"undefined score (void class absent)": 1}
    values = census["alternatives"]["harm_mean_of"]["values"]
    assert math.isnan(values["all"])
    assert values["defined"] == pytest.approx((5 / (2 + 4) + 4 / (2 + 3) + 0.0) / 3, rel=1e-15)


def test_cellmap_counts_labels_not_submitted(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("c_missing_label")
    metrics = run_cli(submission, phase, tmp_path / "out").metrics
    missing = sum(entry.get("status") == "missing" for labels in metrics["case"].values() for entry in labels.values())
    assert missing > 0 and metrics["census"]["rules"] == {"missing": missing}
