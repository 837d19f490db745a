"""Parity with nnU-Net v2's per-image multi-class evaluation (conformance kit ``multiclass``),
through the public command line, on the kit's label maps written as real NIfTI/MHA files."""

import json

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import FIXTURES, differences, run_cli, validate_metrics

EXPECTED = json.loads((FIXTURES / "multiclass" / "expected.json").read_text())
CLASSES = [str(c) for c in EXPECTED["classes"]]
FOREGROUND = [str(c) for c in EXPECTED["foreground"]]
COUNTS = ("n_valid_images_per_class",)


def load_cases() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "multiclass" / "cases.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def write_label_map(path, array, dtype=np.uint8, spacing=(0.8, 0.8)):
    image = sitk.GetImageFromArray(array.astype(dtype))
    image.SetSpacing(spacing)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


def make_phase(folder, phase_yaml: str):
    cases = load_cases()
    for i, truth in enumerate(cases["gt"]):
        write_label_map(folder / "labels" / f"img{i}.nii.gz", truth)
    (folder / "phase.yaml").write_text(phase_yaml)
    return folder


def write_model(folder, model: str, suffix: str = ".mha"):
    """Model A as int16 MHA, B as uint8 NIfTI unless told otherwise: dtypes need not match."""
    for i, pred in enumerate(load_cases()[f"pred_{model}"]):
        write_label_map(folder / f"img{i}{suffix}", pred, np.int16 if suffix == ".mha" else np.uint8)


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("multiclass")
    phase = make_phase(root / "phase", "suite: multiclass\nclasses: 5\nmax_models: 2\nbaseline: A\n")
    write_model(root / "input" / "A", "A", ".mha")
    write_model(root / "input" / "B", "B", ".nii.gz")
    run = run_cli(root / "input", phase, root / "out")
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    return run


def spec_view(case: dict, aggregate: dict) -> dict:
    """Our metrics.json, arranged like the kit's ``spec`` block (class-indexed lists)."""
    images = sorted(case)
    per_image = lambda key: [[case[i][key][c] for c in CLASSES] for i in images]  # noqa: E731
    return {
        "per_image_dice": per_image("Dice"),
        "per_image_iou": per_image("IoU"),
        "per_class_dice_nanmean": [aggregate["mean"][c]["Dice"] for c in CLASSES],
        "per_class_iou_nanmean": [aggregate["mean"][c]["IoU"] for c in CLASSES],
        "mean_dice_fg_np_mean": aggregate["foreground_mean"]["Dice"],
        "mean_dice_fg_nanmean": aggregate["mean_dice_fg_nanmean"],
        "zero_dice_ratio_of_valid_images": [aggregate["zero_dice_ratio_of_valid_images"][c] for c in CLASSES],
        "zero_dice_ratio_of_all_images": [aggregate["zero_dice_ratio_of_all_images"][c] for c in CLASSES],
        "n_valid_images_per_class": [aggregate["n_valid_images_per_class"][c] for c in CLASSES],
    }


def nnunet_view(case: dict, aggregate: dict) -> dict:
    """Our numbers arranged like the kit's ``nnunet`` block (foreground classes, Dice and IoU)."""
    pick = lambda entry: {k: entry[k] for k in ("Dice", "IoU")}  # noqa: E731
    return {
        "per_case": [{c: {k: case[i][k][c] for k in ("Dice", "IoU")} for c in FOREGROUND} for i in sorted(case)],
        "mean": {c: pick(aggregate["mean"][c]) for c in FOREGROUND},
        "foreground_mean": pick(aggregate["foreground_mean"]),
    }


@pytest.mark.parametrize("model", ["A", "B"])
def test_each_model_matches_the_spec_and_nnunet(two_models, model):
    metrics = two_models.metrics
    case, aggregate = metrics["case"][model], metrics["aggregates"]["models"][model]
    expected = EXPECTED["models"][model]
    assert differences(spec_view(case, aggregate), expected["spec"], "spec", COUNTS) == []
    nnunet = {k: v for k, v in expected["nnunet"].items() if k != "warnings"}
    assert differences(nnunet_view(case, aggregate), nnunet, "nnunet") == []


def test_deltas_against_the_baseline(two_models):
    comparison = two_models.metrics["aggregates"]["comparison"]
    assert comparison["baseline"] == "A" and set(comparison["deltas"]) == {"B"}
    delta = comparison["deltas"]["B"]
    got = {
        "delta_B_minus_A_per_class_dice": [delta["delta_per_class_dice"][c] for c in CLASSES],
        "delta_B_minus_A_mean_fg_nanmean": delta["delta_mean_dice_fg_nanmean"],
    }
    expected = {k: EXPECTED[k] for k in got}
    assert differences(got, expected, "deltas") == []


def test_pooled_values_match_mmsegmentation(two_models):
    """Dataset-level Dice/IoU per class equal MMSegmentation's IoUMetric (float32 there)."""
    for model in ("A", "B"):
        pooled = two_models.metrics["aggregates"]["models"][model]["pooled"]["per_class"]
        mmseg = EXPECTED["models"][model]["mmseg"]["per_class_incl_bg"]
        for key, name in (("Dice", "Dice"), ("IoU", "IoU")):
            got = [pooled[c][key] for c in CLASSES]
            assert got[-1] is None and mmseg[name][-1] is None
            assert got[:-1] == pytest.approx(mmseg[name][:-1], rel=1e-6)


def test_nnunet_summary_files_are_written(two_models):
    for model in ("A", "B"):
        summary = json.loads((two_models.output / f"summary_{model}.json").read_text())
        expected = EXPECTED["models"][model]["nnunet"]
        per_case = [
            {c: {k: entry["metrics"][c][k] for k in ("Dice", "IoU")} for c in FOREGROUND} for entry in summary["metric_per_case"]
        ]
        assert differences(per_case, expected["per_case"], "per_case") == []
        assert [e["reference_file"] for e in summary["metric_per_case"]] == ["img0", "img1", "img2", "img3"]
        assert differences({k: summary["foreground_mean"][k] for k in ("Dice", "IoU")}, expected["foreground_mean"]) == []


@pytest.mark.parametrize("model", ["A", "B"])
def test_a_single_model_at_the_top_level_uses_flat_paths(tmp_path, model):
    phase = make_phase(tmp_path / "phase", "suite: multiclass\nclasses: 5\n")
    write_model(tmp_path / "input", model, ".nii.gz")
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    assert differences(spec_view(metrics["case"], metrics["aggregates"]), EXPECTED["models"][model]["spec"], "spec", COUNTS) == []
    report = (tmp_path / "out" / "report.txt").read_text()
    assert f"{EXPECTED['models'][model]['spec']['mean_dice_fg_nanmean']:.4f}" in report
