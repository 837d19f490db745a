"""The multiclass suite: confusion counts against nnU-Net's mask arithmetic, aggregation
properties, hand-computed options (ignore_index, groups, missing cases), input formats and
the failure policy, through the command line where behaviour is user-visible."""

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
from helpers.grading import ROOT, run_cli, validate_metrics
from test_multiclass_parity import EXPECTED, load_cases, make_phase, write_label_map, write_model

from evaluation.errors import PhaseError
from evaluation.metrics.confusion import ClassIndex, class_counts, confusion_matrix, region_counts
from evaluation.suites.multiclass.classwise import Summary, dice_iou, nanmean, zero_dice_ratios
from evaluation.suites.multiclass.options import parse_classes, parse_members

EXAMPLE = ROOT / "examples" / "multiclass"


# --------------------------------------------------------------------------------------------
# Confusion counts


def nnunet_counts(truth, pred, class_ids, ignore=None):
    """nnU-Net's ``compute_tp_fp_fn_tn`` on the masks of ``region_or_label_to_mask`` (``== c``
    for a label, the union of its labels for a region), written out as they are defined."""
    use = np.ones(truth.shape, bool) if ignore is None else truth != ignore
    rows = []
    for c in class_ids:
        ref, prd = np.isin(truth, c), np.isin(pred, c)
        rows.append([np.sum(ref & prd & use), np.sum(~ref & prd & use), np.sum(ref & ~prd & use), np.sum(~ref & ~prd & use)])
    return np.array(rows).T


DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype,ignore", [(d, i) for d in DTYPES for i in (None, 5, -3) if i is None or i >= np.iinfo(d).min])
def test_counts_equal_nnunet_masks(dtype, ignore):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    low = max(int(info.min), -6)
    truth = rng.integers(low, 12, size=(7, 33, 29)).astype(dtype)
    pred = rng.integers(low, 12, size=truth.shape).astype(dtype)
    pred.flat[:5] = info.max  # values far outside the class range count as 'no class'
    class_ids = [0, 1, 2, 4, 7, 9]  # not contiguous; 3, 8, 10, 11 and negatives are 'other'
    counts = class_counts(truth, pred, ClassIndex(class_ids, ignore))
    got = np.stack([counts.tp, counts.fp, counts.fn, counts.tn])
    assert (got == nnunet_counts(truth, pred, class_ids, ignore)).all()


@pytest.mark.parametrize("ignore", [None, 5])
def test_region_counts_equal_nnunet_masks(ignore):
    """A region counts the union of its labels in truth and prediction; a one-label region
    counts as the label; labels outside the declared ones are no region's."""
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 7, size=(6, 31, 27)).astype(np.int16)
    pred = rng.integers(0, 7, size=truth.shape).astype(np.int16)
    labels = [0, 1, 2, 3, 4]  # 5 is ignored or 'other', 6 is 'other'
    regions = [(1, 2, 3), (2, 3), (3,), 2, (0, 4), (4, 1)]
    entries = [tuple(labels.index(m) for m in (r if isinstance(r, tuple) else (r,))) for r in regions]
    counts = region_counts(confusion_matrix(truth, pred, ClassIndex(labels, ignore)), entries)
    got = np.stack([counts.tp, counts.fp, counts.fn, counts.tn])
    assert (got == nnunet_counts(truth, pred, [list(r) if isinstance(r, tuple) else r for r in regions], ignore)).all()


def test_boolean_maps_and_chunking(monkeypatch):
    from evaluation.metrics import confusion

    monkeypatch.setattr(confusion, "_CHUNK", 1000)  # several chunks must add up to one pass
    rng = np.random.default_rng(4)
    truth, pred = rng.random((50, 70)) > 0.5, rng.integers(0, 3, (50, 70))
    counts = class_counts(truth, pred, ClassIndex([0, 1, 2]))
    got = np.stack([counts.tp, counts.fp, counts.fn, counts.tn])
    assert (got == nnunet_counts(truth.astype(int), pred, [0, 1, 2])).all()


def test_ignore_index_by_hand():
    truth = np.array([[1, 1, 255, 0], [0, 2, 255, 2]])
    pred = np.array([[1, 0, 1, 0], [2, 2, 2, 255]])  # predicting 255 elsewhere is just 'no class'
    counts = class_counts(truth, pred, ClassIndex([0, 1, 2], ignore_index=255))
    # 6 counted pixels: (1,1) (1,0) (0,0) (0,2) (2,2) (2,255)
    assert counts.tp.tolist() == [1, 1, 1]
    assert counts.fp.tolist() == [1, 0, 1]
    assert counts.fn.tolist() == [1, 1, 1]
    assert counts.tn.tolist() == [3, 4, 3]
    with pytest.raises(ValueError):
        ClassIndex([0, 1, 255], ignore_index=255)


# --------------------------------------------------------------------------------------------
# Aggregation


def test_dice_iou_by_hand():
    dice, iou = dice_iou(np.array([3, 0, 0, 0]), np.array([1, 2, 0, 0]), np.array([2, 0, 4, 0]))
    assert dice[:3].tolist() == [6 / 9, 0.0, 0.0] and np.isnan(dice[3])
    assert iou[:3].tolist() == [3 / 6, 0.0, 0.0] and np.isnan(iou[3])


def test_class_means_are_bit_identical_to_nnunet_lists():
    rng = np.random.default_rng(5)
    values = rng.random((37, 6))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[:, 5] = np.nan
    got = nanmean(values, axis=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = [np.nanmean([row[c] for row in values]) for c in range(6)]  # nnU-Net: a list per class
    assert got[:5].tobytes() == np.array(expected[:5]).tobytes() and np.isnan(got[5])


def test_zero_dice_ratios_by_hand():
    dice = np.array([[0.0, np.nan, 0.5], [1.0, np.nan, 0.0], [0.0, np.nan, np.nan], [0.5, np.nan, np.nan]])
    ratios = zero_dice_ratios(dice)
    assert ratios["n_valid"].tolist() == [4, 0, 2]
    assert ratios["of_valid"][[0, 2]].tolist() == [0.5, 0.5] and np.isnan(ratios["of_valid"][1])
    assert ratios["of_all"].tolist() == [0.5, 0.0, 0.25]


def test_groups_are_class_first_with_defined_counts():
    """Groups of the kit's model A: per-class Dice 0.96296, 0.95238, 0.0, NaN (SPEC 8)."""
    cases = load_cases()
    stacked = [class_counts(t, p, ClassIndex(range(5))) for t, p in zip(cases["gt"], cases["pred_A"])]
    tp, fp, fn, tn = (np.stack([getattr(s, k) for s in stacked]) for k in ("tp", "fp", "fn", "tn"))
    groups = {"pair": np.array([1, 2]), "rare": np.array([3, 4]), "never": np.array([4])}
    summary = Summary(tp, fp, fn, tn, np.array([False, True, True, True, True]), groups)
    table = summary.group_table()
    per_class = EXPECTED["models"]["A"]["spec"]["per_class_dice_nanmean"]
    assert table["pair"]["Dice"] == pytest.approx((per_class[1] + per_class[2]) / 2, rel=1e-12)
    assert (table["rare"]["Dice"], table["rare"]["n_classes"], table["rare"]["n_classes_defined"]) == (0.0, 2, 1)
    assert np.isnan(table["never"]["Dice"]) and table["never"]["n_classes_defined"] == 0
    assert table["never"]["zero_dice_ratio_of_all_images"] == 0.0
    # The headline is the group of all foreground classes.
    everything = Summary(tp, fp, fn, tn, summary.foreground, {"fg": np.array([1, 2, 3, 4])}).group_table()["fg"]
    assert everything["Dice"] == summary.fg_dice


def test_class_and_group_options():
    assert parse_classes(3) == ((0, 1, 2), ("0", "1", "2"))
    assert parse_classes({"liver": 1, "background": 0}) == ((0, 1), ("background", "liver"))
    assert parse_classes([4, 2]) == ((2, 4), ("2", "4"))
    assert parse_members("ribs", [1, "24-26", 25]) == (1, 24, 25, 26)
    with pytest.raises(PhaseError):
        parse_members("bad", ["26-24"])
    with pytest.raises(PhaseError):
        parse_classes({"a": 1, "b": 1})
    # regions: nnU-Net's tuples, the given order kept (the order its foreground_mean sums in)
    assert parse_classes({"wt": [1, 2, 3], "tc": [2, 3], "et": [3]}) == (((1, 2, 3), (2, 3), (3,)), ("wt", "tc", "et"))
    assert parse_classes([3, [2, 3], 1]) == ((3, (2, 3), 1), ("3", "(2, 3)", "1"))
    with pytest.raises(PhaseError):
        parse_classes({"a": [2, 3], "b": [2, 3]})


def region_options(tmp_path, text: str):
    from evaluation import phase as phases
    from evaluation.suites.multiclass.options import Options

    (tmp_path / "phase.yaml").write_text("suite: multiclass\n" + text)
    return Options.from_phase(phases.load(tmp_path))


def test_region_options(tmp_path):
    options = region_options(tmp_path, "classes: {background: 0, kidney: [1, 2, 3], masses: [2, 3], tumor: 2}\n")
    assert options.class_ids == (0, (1, 2, 3), (2, 3), 2) and options.labels == (0, 1, 2, 3)
    assert options.entry_members() == ((0,), (1, 2, 3), (2, 3), (2,))
    assert options.foreground.tolist() == [False, True, True, True]
    assert options.columns() == ("class_0", "region_kidney", "region_masses", "class_2")
    # classes without the background: its label is still known (no unknown-label failure)
    assert region_options(tmp_path, "classes: [1, 2]\n").labels == (0, 1, 2)
    for bad in (
        "classes: {a: [1, 2], b: [3]}\ngroups: {g: [1]}\n",  # groups average labels, not regions
        "classes: {a: [1, 4]}\nignore_index: 4\n",  # an ignored label inside a region
        "classes: {a b: [1, 2], a-b: [3]}\n",  # one leaderboard column for two regions
    ):
        with pytest.raises(PhaseError):
            region_options(tmp_path, bad)


# --------------------------------------------------------------------------------------------
# Through the command line


def phase_with(tmp_path, options: str = "") -> Path:
    return make_phase(tmp_path / "phase", "suite: multiclass\nclasses: 5\n" + options)


def test_tiff_png_and_npy_score_like_nifti(tmp_path):
    phase = phase_with(tmp_path)
    preds = load_cases()["pred_A"]
    for i, pred in enumerate(preds):
        folder = tmp_path / "input"
        folder.mkdir(exist_ok=True)
        if i == 0:
            tifffile.imwrite(folder / "img0.tif", pred.astype(np.uint16))
        elif i == 1:
            sitk.WriteImage(sitk.GetImageFromArray(pred.astype(np.uint8)), str(folder / "img1.png"))  # no geometry: shape only
        elif i == 2:
            np.save(folder / "img2.npy", pred.astype(np.int32))
        else:
            write_label_map(folder / "img3.nii.gz", pred)
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    aggregate = run.metrics["aggregates"]
    assert aggregate["mean_dice_fg_nanmean"] == pytest.approx(EXPECTED["models"]["A"]["spec"]["mean_dice_fg_nanmean"], rel=1e-12)


def test_missing_case_is_rejected_by_default(tmp_path):
    phase = phase_with(tmp_path)
    write_model(tmp_path / "input", "A", ".nii.gz")
    (tmp_path / "input" / "img2.nii.gz").unlink()
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 2
    assert "1 of 4 test cases have no prediction (img2)" in run.last_line
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_missing_case_skipped_or_scored_empty(tmp_path):
    write_model(tmp_path / "input", "A", ".nii.gz")
    (tmp_path / "input" / "img2.nii.gz").unlink()
    skip = run_cli(tmp_path / "input", phase_with(tmp_path / "s", "missing_cases: skip\n"), tmp_path / "out-skip")
    assert skip.code == 0, skip.stderr
    assert set(skip.metrics["case"]) == {"img0", "img1", "img3"}
    assert skip.metrics["aggregates"]["n_missing_images"] == 1
    # Without img2, class 3 only occurs as A's false positive in img1: mean Dice 0 over 1 image.
    assert skip.metrics["aggregates"]["mean"]["3"]["Dice"] == 0.0
    assert skip.metrics["aggregates"]["n_valid_images_per_class"]["3"] == 1

    empty = run_cli(tmp_path / "input", phase_with(tmp_path / "e", "missing_cases: empty\n"), tmp_path / "out-empty")
    assert empty.code == 0, empty.stderr
    img2 = empty.metrics["case"]["img2"]
    # An all-background prediction: every foreground class in the truth of img2 (1, 2, 3) scores 0.
    assert [img2["Dice"][c] for c in "123"] == [0.0, 0.0, 0.0] and img2["Dice"]["4"] is None
    assert img2["prediction_file"] is None
    counts = json.loads((tmp_path / "out-empty" / "summary.json").read_text())["metric_per_case"][2]["metrics"]
    assert counts["0"]["FP"] == sum(counts[c]["n_ref"] for c in "123") and counts["0"]["FN"] == 0


def test_a_broken_case_fails_alone(tmp_path):
    phase = phase_with(tmp_path)
    write_model(tmp_path / "input", "A", ".nii.gz")
    write_label_map(tmp_path / "input" / "img1.nii.gz", load_cases()["pred_A"][1], spacing=(1.0, 1.0))
    np.save(tmp_path / "input" / "img3.npy", load_cases()["pred_A"][3] + 0.5)
    (tmp_path / "input" / "img3.nii.gz").unlink()
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 2
    metrics = run.metrics
    validate_metrics(metrics)
    failures = {f["case"]: f["message"] for f in metrics["failures"]}
    assert set(failures) == {"img1", "img3"}
    assert "spacing" in failures["img1"] and "img1.nii.gz" in failures["img1"]
    assert "non-integer" in failures["img3"]
    assert metrics["case"]["img1"]["status"] == "failed" and metrics["case"]["img0"]["status"] == "scored"
    assert metrics["aggregates"]["n_images"] == 2 and metrics["aggregates"]["n_failed_images"] == 2
    assert "labels" not in run.last_line  # nothing of the truth's location is revealed


def test_unknown_files_and_too_many_models_are_rejected(tmp_path):
    phase = phase_with(tmp_path)
    write_model(tmp_path / "one", "A", ".nii.gz")
    write_label_map(tmp_path / "one" / "img9.nii.gz", load_cases()["pred_A"][0])
    run = run_cli(tmp_path / "one", phase, tmp_path / "out1")
    assert run.code == 2 and "match no test case (img9.nii.gz)" in run.last_line

    write_model(tmp_path / "two" / "m1", "A", ".nii.gz")
    write_model(tmp_path / "two" / "m2", "B", ".nii.gz")
    run = run_cli(tmp_path / "two", phase, tmp_path / "out2")
    assert run.code == 2 and "2 folders of predictions" in run.last_line


def test_default_baseline_is_the_first_model_and_best_model_is_ranked(tmp_path):
    phase = phase_with(tmp_path, "max_models: 3\n")
    write_model(tmp_path / "input" / "m1", "A", ".nii.gz")
    write_model(tmp_path / "input" / "m2", "B", ".nii.gz")
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    aggregates = run.metrics["aggregates"]
    assert aggregates["comparison"]["baseline"] == "m1" and aggregates["best_model"] == "m2"
    assert aggregates["mean_dice_fg_nanmean"] == aggregates["models"]["m2"]["mean_dice_fg_nanmean"]


def test_a_model_named_after_a_leaderboard_column_does_not_take_it(tmp_path):
    """Each model's columns are '<model>/<column>': a folder named 'pooled' (whose own columns
    would once have been 'pooled_<column>') leaves the ranked model's pooled Dice in place."""
    phase = phase_with(tmp_path, "max_models: 3\n")
    write_model(tmp_path / "input" / "m1", "A", ".nii.gz")
    write_model(tmp_path / "input" / "pooled", "B", ".nii.gz")
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    board = json.loads((tmp_path / "out" / "metrics.json").read_text())["leaderboard"]
    models = run.metrics["aggregates"]["models"]
    ranked = run.metrics["aggregates"]["best_model"]
    assert board["pooled_mean_dice_fg_nanmean"] == models[ranked]["pooled"]["mean_dice_fg_nanmean"]
    assert board["pooled/mean_dice_fg_nanmean"] == models["pooled"]["mean_dice_fg_nanmean"]
    assert board["m1/pooled_mean_dice_fg_nanmean"] == models["m1"]["pooled"]["mean_dice_fg_nanmean"]
    assert not [key for key in board if "/" in key and key.split("/")[0] not in models]


def test_a_model_folder_name_too_long_for_an_output_is_refused_before_scoring(tmp_path):
    phase = phase_with(tmp_path, "max_models: 3\n")
    write_model(tmp_path / "input" / "m1", "A", ".nii.gz")
    write_model(tmp_path / "input" / ("m" * 240), "B", ".nii.gz")
    run = run_cli(tmp_path / "input", phase, tmp_path / "out")
    assert run.code == 2 and "is 240 bytes long; name it in 1 to 64 bytes" in run.last_line


@pytest.mark.parametrize(
    "options",
    [
        "suite: multiclass\n",  # classes are required
        "suite: multiclass\nclasses: 5\nbogus: 1\n",  # unknown option
        "suite: multiclass\nclasses: 5\nmissing_cases: maybe\n",
        "suite: multiclass\nclasses: 5\ngroups: {g: [0]}\n",  # background is no group member
        "suite: multiclass\nclasses: 5\ngroups: {g: [1, 9]}\n",  # no class 9
        "suite: multiclass\nclasses: 5\nignore_index: 4\n",  # a class cannot be ignored
    ],
)
def test_invalid_phase_options_are_refused(tmp_path, options):
    from evaluation import phase as phases
    from evaluation.suites.multiclass.options import Options

    (tmp_path / "phase.yaml").write_text(options)
    with pytest.raises(PhaseError):
        Options.from_phase(phases.load(tmp_path))


def test_bundled_example_writes_the_report(tmp_path):
    """examples/multiclass: the kit's images as NIfTI, two models, named classes, groups."""
    output = tmp_path / "out"
    run = run_cli(EXAMPLE / "submission", EXAMPLE / "phase", output)
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    report = (output / "report.txt").read_text()
    for expected in (
        "Model: baseline",
        "Model: candidate",
        "Groups",
        "Per class, sorted by Dice",
        "Model comparison",
        "+0.1415",
        "3 lesion",
        "0.6384",
        "0.7800",
    ):
        assert expected in report, expected
    cases = load_cases()
    for i in range(4):  # the example is the kit's data
        assert (
            sitk.GetArrayFromImage(sitk.ReadImage(str(EXAMPLE / "phase" / "labels" / f"img{i}.nii.gz"))) == cases["gt"][i]
        ).all()
        for model, key in (("baseline", "pred_A"), ("candidate", "pred_B")):
            assert (
                sitk.GetArrayFromImage(sitk.ReadImage(str(EXAMPLE / "submission" / model / f"img{i}.nii.gz"))) == cases[key][i]
            ).all()
    page = (output / "report.html").read_text()
    assert page.lower().startswith("<!doctype html>") and "+0.1415" in page and "&#x27;baseline&#x27;" in page
    shown = (EXAMPLE / "report.txt").read_text()
    assert report == shown, "examples/multiclass/report.txt is out of date"
    delta = run.metrics["aggregates"]["comparison"]["deltas"]["candidate"]["delta_mean_dice_fg_nanmean"]
    assert delta == pytest.approx(EXPECTED["delta_B_minus_A_mean_fg_nanmean"], rel=1e-12)


def test_batched_cases_fail_by_batch_and_name_every_bad_file(tmp_path):
    """12 cases on one worker run as 4 batches of 3 (``batch_size``); two bad files in one
    batch fail that batch with one message naming both, the other 9 cases are kept."""
    cases = load_cases()
    phase, submission = tmp_path / "phase", tmp_path / "input"
    for n in range(12):
        write_label_map(phase / "labels" / f"c{n:02d}.nii.gz", cases["gt"][n % 4])
        write_label_map(submission / f"c{n:02d}.nii.gz", cases["pred_B"][n % 4])
    (phase / "phase.yaml").write_text("suite: multiclass\nclasses: 5\nworkers: 1\n")
    for bad in ("c04", "c05"):
        write_label_map(submission / f"{bad}.nii.gz", cases["pred_B"][0][:20])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2
    metrics = run.metrics
    assert [(f["case"], f["kind"]) for f in metrics["failures"]] == [("c03 .. c05", "submission")]
    assert "c04.nii.gz: has shape (20, 24)" in run.last_line and "c05.nii.gz" in run.last_line
    assert [c for c, e in metrics["case"].items() if e["status"] == "failed"] == ["c03", "c04", "c05"]
    assert metrics["aggregates"]["n_images"] == 9
    # The 9 kept cases are 3 copies each of kit images 0, 1, 2 (minus the failed batch): the
    # per-class means over them equal the means over the kit's per-image values.
    spec = EXPECTED["models"]["B"]["spec"]["per_image_dice"]
    kept = [n % 4 for n in range(12) if n not in (3, 4, 5)]
    expected = np.nanmean(np.array([[np.nan if v is None else v for v in spec[i][:4]] for i in kept]), axis=0)
    got = [metrics["aggregates"]["mean"][str(c)]["Dice"] for c in range(4)]
    assert got == pytest.approx(expected.tolist(), rel=1e-12)


def test_ignore_index_through_the_command_line(tmp_path):
    """Truth pixels equal to ignore_index count for nothing, whatever is predicted there."""
    cases = load_cases()
    truth, pred = cases["gt"].copy(), cases["pred_A"].copy()
    truth[0, :6, :] = 255  # covers part of class 1 in img0
    pred[0, :6, :] = 2  # a prediction there would otherwise be false positives of class 2
    phase, submission = tmp_path / "phase", tmp_path / "input"
    for i in range(4):
        write_label_map(phase / "labels" / f"img{i}.nii.gz", truth[i])
        write_label_map(submission / f"img{i}.nii.gz", pred[i])
    (phase / "phase.yaml").write_text("suite: multiclass\nclasses: 5\nignore_index: 255\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    tp, fp, fn, _ = nnunet_counts(truth[0], pred[0], range(5), ignore=255)
    dice, _ = dice_iou(tp, fp, fn)
    got = [run.metrics["case"]["img0"]["Dice"][str(c)] for c in range(5)]
    assert got[:3] == pytest.approx(dice[:3].tolist(), rel=1e-12) and got[3] is None and got[4] is None
    assert fp[2] == 0  # the predictions on ignored pixels did not count


def test_unknown_prediction_labels_fail_the_case_unless_ignored(tmp_path):
    """-1 and 2**63 are no class of the phase: reported by default, nnU-Net's 'no class' on request."""
    from evaluation.errors import SubmissionError
    from evaluation.metrics.confusion import ClassIndex
    from evaluation.suites.multiclass.scoring import refuse_unknown_labels

    index = ClassIndex([0, 1, 2])
    refuse_unknown_labels(np.array([0, 1, 2, 2]), index, "case.nii.gz")
    with pytest.raises(SubmissionError, match=r"case.nii.gz: .*\(-1\); expected only 0, 1, 2"):
        refuse_unknown_labels(np.array([0, -1, 2]), index, "case.nii.gz")
    with pytest.raises(SubmissionError, match=str(2**63 - 5)):
        refuse_unknown_labels(np.array([0, 2**63 - 5], dtype=np.uint64), index, "case.nii.gz")
    refuse_unknown_labels(np.array([0, 255]), ClassIndex([0, 1], ignore_index=255), "case.nii.gz")
