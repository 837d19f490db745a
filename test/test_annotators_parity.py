"""Parity with the multi-annotator evaluation of MMV-Lab/string_vessel_project@c90f9ec on the six
conformance cases, through the public command line, at the three settings the goldens hold
(no dilation; disk of radius 3, the tool's default; square of radius 1). The cases are turned
into TIFF, PNG and MetaImage files (annotators A0, A1, A2 in folders named as the tool expects,
predictions named <image>_segPred) inside the test."""

import csv
import math

import pytest
from helpers.annotators_files import EXPECTED, write_phase, write_predictions
from helpers.grading import differences, run_cli, validate_metrics

COUNTS = ("A0", "A1", "A2", "Union", "Intersection", "Staple", "Model_count", "staple_fg_pixels", "staple_elapsed_iterations")
SETTINGS = {
    "tool_no_dilation": "dilation: false\n",
    "tool_dilation_disk3_default": "",  # the tool's default: dilation on, disk, radius 3
    "tool_dilation_square1": "dilation: {radius: 1, footprint: square}\n",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One CLI run per setting over all six cases (one model), kept for the module's tests."""
    root = tmp_path_factory.mktemp("annotators-parity")
    submission = write_predictions(root / "input" / "predictions_unet")
    done = {}
    for setting, options in SETTINGS.items():
        phase = write_phase(root / setting, f"suite: annotators\neval_class: 1\nreport: false\n{options}")
        done[setting] = run_cli(submission.parent, phase, root / f"out-{setting}")
    return done


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_rows_match_the_tool(runs, setting):
    run = runs[setting]
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    assert set(metrics["case"]) == set(EXPECTED)
    found = []
    for case, expected in EXPECTED.items():
        row = dict(metrics["case"][case]["unet"])
        assert row.pop("status") == "scored"
        found += differences(row, expected[setting], f"{case}/{setting}", COUNTS)
    assert found == []


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_per_image_csv_holds_the_same_numbers(runs, setting):
    """model_evaluation_<id>.csv: the tool's columns, one row per image, the metrics' values."""
    out = runs[setting].output
    with open(out / "model_evaluation_unet.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["image_id"] for r in table] == sorted(EXPECTED)
    header = list(table[0])
    assert header[:8] == ["image_id", "A0", "A1", "A2", "Union", "Intersection", "Staple", "Model"]
    assert header[8:16] == [
        f"{x}_jaccard"
        for x in ("A0", "A1", "A2", "Union", "Intersection", "Staple", "annotators_agree", "annotators_model_agree")
    ]
    assert header[-6:] == ["A0_sensivity", "A1_sensivity", "A2_sensivity", "A0_specificity", "A1_specificity", "A2_specificity"]
    assert len(header) == 1 + 7 + 4 * 8 + 6
    for r in table:
        expected = EXPECTED[r["image_id"]][setting]
        assert int(r["Model"]) == expected["Model_count"]
        assert int(r["Staple"]) == expected["counts"]["Staple"]
        for column in header[8:]:
            want = expected[column]
            assert r[column] == "" if want is None else float(r[column]) == want, column


def test_summary_is_mean_and_std_over_images(runs):
    """aggregates.mean/std (ddof 1) of a column equal the plain statistics of the expected rows."""
    aggregates = runs["tool_no_dilation"].metrics["aggregates"]
    assert aggregates["ranked_model"] == "unet"
    for column in ("Staple_dice", "A1_msd", "annotators_model_agree_hausdorff", "A2_specificity"):
        values = [e["tool_no_dilation"][column] for e in EXPECTED.values()]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        assert aggregates["mean"][column] == pytest.approx(mean, rel=1e-12)
        assert aggregates["std"][column] == pytest.approx(std, rel=1e-12)
        assert aggregates["min"][column] == min(values) and aggregates["max"][column] == max(values)


SURFACE = {"boundary": "msd_mean_of_means", "boundary_pooled": "assd_pooled"}


@pytest.mark.parametrize("surface", sorted(SURFACE))
def test_boundary_surface_distances_option(surface, tmp_path):
    """surface_distance: boundary / boundary_pooled give the contour-based values recorded under
    pred_vs.<X>.surface_boundary (null there = one mask empty, where the tool's sentinel applies)."""
    phase = write_phase(
        tmp_path / "phase", f"suite: annotators\neval_class: 1\nreport: false\ndilation: false\nsurface_distance: {surface}\n"
    )
    submission = write_predictions(tmp_path / "input")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    found = []
    for case, expected in EXPECTED.items():
        row = run.metrics["case"][case]["submission"]
        for x, recorded in expected["pred_vs"].items():
            boundary = recorded["surface_boundary"]
            want_hd, want_msd = (100.0, 100.0) if boundary is None else (boundary["hd"], boundary[SURFACE[surface]])
            found += differences(
                {"hd": row[f"{x}_hausdorff"], "msd": row[f"{x}_msd"]}, {"hd": want_hd, "msd": want_msd}, f"{case}/{x}"
            )
        # overlap and STAPLE do not depend on the distance definition
        assert row["Staple_jaccard"] == expected["tool_no_dilation"]["Staple_jaccard"]
    assert found == []
