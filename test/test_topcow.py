"""``preset: topcow2024-task1`` through the command line, against TopCoW 2024's own evaluation
(CoWBenchmark/TopCoW_Eval_Metrics@25ca839) on the 20 cases of
test/fixtures/segmentation/topcow (README.md there says how the expected values were made):

* ``topcow_metrics.json``, the reference's metrics.json as the grader writes it, against the one
  the reference wrote: every case column and every aggregate, with and without the ROI
  cropping; counts, verdicts, strings and value types exactly, floats to 1e-9 relative;
* metrics.json: every per-case value, statistic and challenge aggregate under the suite's
  names, against the same record;
* the 2023 release's Betti numbers and errors (``topcow_betti1``);
* every message a participant or organizer reads when an input cannot be scored;
* hand-computed cases and the primitives against SimpleITK and scikit-image (ITK's distances,
  the uint8 cast, Betti numbers), and each correction.
"""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import FIXTURES, run_cli, validate_metrics

from evaluation.suites.segmentation import topcow, topcow_inputs, topcow_table

KIT = FIXTURES / "segmentation" / "topcow"
EXPECTED = json.loads((KIT / "expected.json").read_text())
PRESET = "suite: segmentation\npreset: topcow2024-task1\n"
PREFIXES = {"Dice": "dice", "B0err": "betti0_error", "HD": "hd", "HD95": "hd95"}
AVERAGES = {"ClsAvgDice": "dice", "ClsAvgB0err": "betti0_error", "ClsAvgHD": "hd", "ClsAvgHD95": "hd95"}
STATISTICS = {"count": "n", "mean": "mean", "std": "std", "min": "min", "25pc": "25pc", "50pc": "median", "75pc": "75pc"}
STATISTICS["max"] = "max"


def phase(tmp: Path, config: str = PRESET, truth: Path = KIT / "cases" / "gt", roi: bool = False) -> Path:
    root = tmp / "phase"
    shutil.copytree(truth, root / "labels")
    if roi:
        shutil.copytree(KIT / "cases" / "roi", root / "roi")
    (root / "phase.yaml").write_text(config)
    return root


def renamed(tmp: Path, source: Path = KIT / "cases" / "pred") -> Path:
    """The reference's predictions (``case_XX_pred.*``) named after their cases, as the grader
    pairs them."""
    folder = tmp / "input"
    folder.mkdir()
    for path in sorted(source.iterdir()):
        shutil.copy(path, folder / path.name.replace("_pred", ""))
    return folder


def differences(got, expected, path: str = "") -> list[str]:
    """Strings, booleans, None and integers exactly (an integer must stay one), floats to
    1e-9 relative, NaN as NaN."""
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return [f"{path}: keys {sorted(got) if isinstance(got, dict) else got!r} != {sorted(expected)}"]
        return [d for key in expected for d in differences(got[key], expected[key], f"{path}/{key}")]
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return [f"{path}: {got!r} != {expected!r}"]
        return [d for i, (g, e) in enumerate(zip(got, expected)) for d in differences(g, e, f"{path}[{i}]")]
    if isinstance(expected, float):
        if not isinstance(got, float):
            return [f"{path}: {got!r} is no float ({expected!r})"]
        if math.isnan(expected) or math.isnan(got):
            return [] if math.isnan(expected) and math.isnan(got) else [f"{path}: {got!r} != {expected!r}"]
        return [] if abs(got - expected) <= 1e-9 * max(abs(expected), abs(got)) else [f"{path}: {got!r} != {expected!r}"]
    return [] if got == expected and type(got) is type(expected) else [f"{path}: {got!r} != {expected!r}"]


def leaves(tree) -> int:
    if isinstance(tree, dict):
        return sum(leaves(v) for v in tree.values())
    if isinstance(tree, list):
        return sum(leaves(v) for v in tree)
    return 1


def same_number(got, expected) -> bool:
    """metrics.json: NaN is null, integers may be written as integers where the reference's
    column made them floats."""
    if isinstance(expected, float) and math.isnan(expected):
        return got is None
    return got is not None and not isinstance(got, bool) and abs(got - expected) <= 1e-9 * max(abs(expected), 1e-300)


def check_reference_file(run, expected: dict) -> int:
    got = json.loads((run.output / "topcow_metrics.json").read_text())
    expected = json.loads(json.dumps(expected))
    names = expected["case"]["pred_fname"]
    expected["case"]["pred_fname"] = {i: name.replace("_pred", "") for i, name in names.items()}
    found = differences(got, expected)
    assert not found, found[:20]
    return leaves(expected)


@pytest.fixture(scope="module")
def task1(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("topcow")
    run = run_cli(renamed(tmp), phase(tmp), tmp / "out")
    assert run.code == 0, run.stderr[-3000:]
    return run


def test_the_reference_metrics_json_every_value(task1):
    """topcow_metrics.json is the reference's metrics.json: 66 case columns, 69 aggregates."""
    expected = EXPECTED["task1"]["metrics"]
    assert len(expected["case"]) == 66 and len(expected["aggregates"]) == 69
    assert check_reference_file(task1, expected) == 3704


def test_metrics_json_every_value_under_the_suites_names(task1):
    metrics, expected = task1.metrics, EXPECTED["task1"]["metrics"]
    validate_metrics(metrics)
    order = {i: name.split(".")[0] for i, name in expected["case"]["gt_fname"].items()}
    compared = 0
    for column, values in expected["case"].items():
        prefix, _, name = column.partition("_")
        for i, value in values.items():
            case = metrics["case"][order[i]]
            if column in ("gt_fname", "pred_fname"):
                continue
            if column.startswith("all_"):
                key = {"all_detection_dicts": "detection", "all_graph_dicts": "graph", "all_topo_dicts": "topology"}[column]
                assert case[key] == value, (order[i], column)
            elif column == "clDice":
                assert same_number(case["classes"]["merged"]["cldice"], value), (order[i], column)
            elif name in AVERAGES:
                assert same_number(case["class_average"][AVERAGES[name]], value), (order[i], column)
            else:
                cls = "merged" if name == topcow.MERGED else name.lower()
                assert same_number(case["classes"][cls][PREFIXES[prefix]], value), (order[i], column)
            compared += 1
    aggregates = metrics["aggregates"]
    for column, described in expected["aggregates"].items():
        prefix, _, name = column.partition("_")
        if column in ("dect_avg", "graph_var_bal_acc", "topo_var_bal_acc"):
            key = {"dect_avg": "detection", "graph_var_bal_acc": "graph_balanced_accuracy"}.get(
                column, "topology_balanced_accuracy"
            )
            assert not differences(aggregates[key], described), column
            compared += leaves(described)
            continue
        if column.startswith("all_") or column.endswith("_fname"):
            continue
        if column == "clDice":
            targets = [(aggregates["classes"]["merged"]["cldice"], True), (aggregates["overall"]["cldice"], False)]
        elif name in AVERAGES:
            targets = [(aggregates["overall"][AVERAGES[name]], False)]
        else:
            cls = "merged" if name == topcow.MERGED else name.lower()
            targets = [(aggregates["classes"][cls][PREFIXES[prefix]], True)]
        for target, counted in targets:
            for statistic, value in described.items():
                if statistic == "count" and not counted:
                    continue
                assert same_number(target[STATISTICS[statistic]], value), (column, statistic)
                compared += 1
    assert compared == 1797
    board = metrics["leaderboard"]
    assert board["score"] == aggregates["overall"]["dice"]["mean"] == expected["aggregates"]["Dice_ClsAvgDice"]["mean"]
    assert board["detection_f1_score_mean"] == expected["aggregates"]["dect_avg"]["f1_score"]["mean"]
    assert board["topology_balanced_accuracy_posterior"] == expected["aggregates"]["topo_var_bal_acc"]["posterior"]
    assert aggregates["ranking"] == {"key": "dice", "statistic": "mean", "higher_is_better": True}
    assert metrics["reference"]["evaluation"] == "topcow2024-task1"


def test_files_beside_metrics_json(task1):
    rows = (task1.output / "cases.csv").read_text().splitlines()
    assert rows[0] == "case,class,dice,cldice,betti0_error,hd,hd95"
    assert len(rows) == 1 + 20 * 14
    assert (task1.output / "report.html").is_file()


def test_cropped_to_the_roi_every_value(tmp_path):
    """``topcow_roi``: both images cut to each case's ROI file first (need_crop=True)."""
    run = run_cli(renamed(tmp_path), phase(tmp_path, PRESET + "topcow_roi: roi\n", roi=True), tmp_path / "out")
    assert run.code == 0, run.stderr[-3000:]
    assert check_reference_file(run, EXPECTED["task1_crop"]["metrics"]) == 3489


def test_the_2023_betti_errors(tmp_path):
    """``topcow_betti1``: the merged masks' Betti-1 error as the 2023 release gives it (its
    ``CoW`` entry); its Betti-0 errors are the 2024 ones."""
    run = run_cli(renamed(tmp_path), phase(tmp_path, PRESET + "topcow_betti1: true\n"), tmp_path / "out")
    assert run.code == 0, run.stderr[-3000:]
    compared = 0
    for truth_name, entry in EXPECTED["topcow2023"]["cases"].items():
        case = run.metrics["case"][truth_name.split(".")[0]]
        errors = entry["betti_number_error_all_classes"]
        assert case["classes"]["merged"]["betti1_error"] == errors["CoW"]["Betti_1_error"]
        assert case["classes"]["merged"]["betti0_error"] == errors["CoW"]["Betti_0_error"]
        for label, value in errors.items():
            if label.isdigit():
                assert case["classes"][value["label"].lower()]["betti0_error"] == value["Betti_0_error"]
                compared += 1
        assert case["class_average"]["betti0_error"] == errors["B0err_average"]["Betti_0_error"]
        compared += 3
    assert compared > 200
    assert run.metrics["reference"]["corrections"] == []
    assert "betti1_error" in (run.output / "cases.csv").read_text().splitlines()[0]


def test_the_2023_betti_numbers():
    """b0, b1, b2 of every label and of the merged masks of both maps (the 2023
    ``betti_number``), on the images as the 2024 pipeline casts them."""
    from evaluation.metrics import betti

    compared = 0
    for truth_name, entry in EXPECTED["topcow2023"]["cases"].items():
        case = truth_name.split(".")[0]
        prediction = next((KIT / "cases" / "pred").glob(f"{case}_pred.*"))
        for side, path in (("gt", next((KIT / "cases" / "gt").glob(f"{case}.*"))), ("pred", prediction)):
            labels = topcow_inputs.cast(sitk.GetArrayFromImage(sitk.ReadImage(str(path))))
            for name, numbers in entry["betti_numbers"][side].items():
                mask = labels > 0 if name == "MergedBin" else labels == int(name)
                assert list(betti.betti_numbers(mask)) == numbers, (case, side, name)
                compared += 3
    assert compared == 1395


def test_the_corrections_on_the_kit(tmp_path):
    """Corrected, a label on one side only costs the image's diagonal instead of 90 mm, the
    case where both maps are empty (09) has no class average and no merged value, and the rest
    is the reference's (the kit's images are stored left to right: the physical left-right
    test agrees with the index one)."""
    corrections = "[topcow_hd_diagonal, topcow_empty_case, topcow_lr_physical, topcow_detection_tn]"
    run = run_cli(renamed(tmp_path), phase(tmp_path, PRESET + f"corrections: {corrections}\n"), tmp_path / "out")
    assert run.code == 0, run.stderr[-3000:]
    validate_metrics(run.metrics)
    got = json.loads((run.output / "topcow_metrics.json").read_text())["case"]
    expected = EXPECTED["task1"]["metrics"]["case"]
    order = {i: name.split(".")[0] for i, name in expected["gt_fname"].items()}
    changed = 0
    for column, values in expected.items():
        for i, value in values.items():
            if column.startswith("HD") and "ClsAvg" not in column and value == 90:
                case = run.metrics["case"][order[i]]
                spacing, shape = case["spacing"], (40, 64, 64)
                assert got[column][i] == math.sqrt(sum((n * s) ** 2 for n, s in zip(shape[::-1], spacing[::-1])))
                changed += 1
            elif order[i] == "case_09" and ("ClsAvg" in column or "MergedBin" in column or column == "clDice"):
                assert math.isnan(got[column][i]) and math.isnan(value) is False
                changed += 1
            elif column in ("HD_ClsAvgHD", "HD95_ClsAvgHD95") and order[i] != "case_09":  # of the corrected values
                prefix = column.split("_")[0]
                labels = [got[f"{prefix}_{n}"][i] for n in topcow.LABELS.values() if f"{prefix}_{n}" in got]
                assert got[column][i] == topcow.average([v for v in labels if not math.isnan(v)])
            elif column != "pred_fname":  # a column with a NaN more is a float column
                nan = isinstance(value, float) and math.isnan(value)
                assert (nan and math.isnan(got[column][i])) or got[column][i] == value, (column, i)
    assert changed == 63
    assert run.metrics["case"]["case_09"]["class_average"] == dict.fromkeys(("dice", "betti0_error", "hd", "hd95"))
    assert (
        run.metrics["aggregates"]["overall"]["dice"]["mean"]
        != EXPECTED["task1"]["metrics"]["aggregates"]["Dice_ClsAvgDice"]["mean"]
    )


# --------------------------------------------------------------------------------------------
# What cannot be scored


def one_case(tmp: Path, prediction: np.ndarray | None = None, name: str = "case_00.mha", config: str = PRESET, **header):
    """The kit's case 00 as the phase, ``prediction`` (its truth by default) as the upload."""
    root = tmp / "phase"
    (root / "labels").mkdir(parents=True)
    shutil.copy(KIT / "cases" / "gt" / "case_00.nii.gz", root / "labels")
    (root / "phase.yaml").write_text(config)
    truth = sitk.ReadImage(str(KIT / "cases" / "gt" / "case_00.nii.gz"))
    array = sitk.GetArrayFromImage(truth) if prediction is None else prediction
    image = sitk.GetImageFromArray(array)
    if array.shape == (40, 64, 64):
        image.CopyInformation(truth)
    for key, value in header.items():
        getattr(image, f"Set{key.capitalize()}")(value)
    (tmp / "input").mkdir()
    sitk.WriteImage(image, str(tmp / "input" / name))
    return run_cli(tmp / "input", root, tmp / "out")


def kit_case(number: int) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(next((KIT / "cases" / "pred").glob(f"case_{number:02d}_pred.*")))))


def truth_00() -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(KIT / "cases" / "gt" / "case_00.nii.gz")))


def rejected(run, line: str) -> None:
    assert run.code == 2, run.stderr[-3000:]
    assert line in run.last_line, run.last_line


def test_a_label_that_is_no_cow_label(tmp_path):
    """The reference stops with KeyError: '13'; the participant reads which labels."""
    labels = truth_00()
    labels[0, 0, :3] = (13, 14, 200)
    run = one_case(tmp_path, labels)
    rejected(
        run, "case_00.mha: holds labels that are no TopCoW label (13, 14, 200); the labels are 0 (background), 1 to 12 and 15"
    )
    validate_metrics(run.metrics)  # no case scored: statistics null, no reference aggregates
    assert run.metrics["aggregates"]["n_failed"] == 1 and run.metrics["aggregates"]["detection"] is None


def test_unknown_labels_ignore_reads_them_as_background(tmp_path):
    labels = truth_00()
    labels[0, 0, :3] = 13
    run = one_case(tmp_path, labels, config=PRESET + "unknown_labels: ignore\n")
    assert run.code == 0, run.stderr[-3000:]
    assert run.metrics["aggregates"]["overall"]["dice"]["mean"] == 1.0


def test_a_truth_label_that_is_no_cow_label_is_the_phases(tmp_path):
    root = phase(tmp_path, truth=KIT / "cases" / "errors" / "label13" / "gt")
    run = run_cli(renamed(tmp_path, KIT / "cases" / "errors" / "label13" / "pred"), root, tmp_path / "out")
    assert run.code == 1
    assert "holds labels that are no TopCoW label (13)" in run.last_line, run.last_line


def test_files_named_as_the_reference_pairs_them(tmp_path):
    """The reference pairs the i-th sorted files; the grader by name, and says which files
    match no case."""
    shutil.copytree(KIT / "cases" / "pred", tmp_path / "input")
    run = run_cli(tmp_path / "input", phase(tmp_path), tmp_path / "out")
    rejected(run, "20 file(s) match no test case (case_00_pred.mha, case_01_pred.mha")


def test_a_missing_case(tmp_path):
    folder = renamed(tmp_path)
    (folder / "case_07.mha").unlink()
    rejected(run_cli(folder, phase(tmp_path), tmp_path / "out"), "1 of 20 test cases have no prediction (case_07)")


@pytest.mark.parametrize(
    ("prediction", "line"),
    [
        (
            np.zeros((40, 64, 63), np.uint8),
            "case_00.mha: has shape (40, 64, 63), but the image it predicts has shape (40, 64, 64)",
        ),
        (np.zeros((64, 64), np.uint8), "case_00.mha: has shape (64, 64), but the image it predicts has shape (40, 64, 64)"),
    ],
)
def test_another_grid(tmp_path, prediction, line):
    rejected(one_case(tmp_path, prediction), line)


def test_an_unreadable_file(tmp_path):
    root = phase(tmp_path)
    folder = renamed(tmp_path)
    (folder / "case_03.mha").write_bytes(b"ObjectType = Image\nNDims = 3\nnonsense")
    run = run_cli(folder, root, tmp_path / "out")
    assert run.code == 2 and run.last_line.startswith("Submission rejected: ") and "case_03.mha" in run.last_line


def test_the_header_of_the_prediction_plays_no_part(tmp_path):
    """``pred.CopyInformation(gt)``: another spacing, origin and direction are scored on the
    truth's grid (kit case 12); ``topcow_prediction_geometry`` refuses them instead."""
    labels = truth_00()
    run = one_case(tmp_path / "a", labels, Spacing=(1.0, 1.0, 1.0), Origin=(3.0, -7.5, 11.0))
    assert run.code == 0 and run.metrics["case"]["case_00"]["classes"]["merged"]["hd95"] == 0.0
    config = PRESET + "corrections: [topcow_prediction_geometry]\n"
    rejected(
        one_case(tmp_path / "b", labels, config=config, Spacing=(1.0, 1.0, 1.0)),
        "case_00.mha: its spacing (1, 1, 1) differs from the input image's (0.6, 0.5, 0.5)",
    )


def test_the_uint8_cast_and_its_correction(tmp_path):
    """The reference casts to uint8 (kit cases 16 and 17: 263 reads 7, 2.4 reads 2);
    ``topcow_label_cast`` refuses such values."""
    labels = truth_00().astype(np.float32) + np.float32(0.4)
    run = one_case(tmp_path / "a", labels)
    assert run.code == 0 and run.metrics["case"]["case_00"]["class_average"]["dice"] == 1.0
    config = PRESET + "corrections: [topcow_label_cast]\n"
    rejected(
        one_case(tmp_path / "b", labels, config=config),
        "case_00.mha: holds non-integer values; a label map must hold whole numbers (0 = background)",
    )
    wrapping = truth_00().astype(np.int16)
    wrapping[0, 0, :2] = (256, 263)
    assert one_case(tmp_path / "c", wrapping).code == 0
    rejected(
        one_case(tmp_path / "d", wrapping, config=config),
        "case_00.mha: holds labels that are no TopCoW label (256, 263); the labels are 0 (background), 1 to 12 and 15",
    )


def test_the_preflight_reads_as_scoring_reads(tmp_path, capsys):
    """``check`` on the public phase accepts what the reference scores (another header, an
    int16 that wraps, label + 0.4 floats: kit cases 12, 16, 17) and refuses what grading
    refuses, with the same last line."""
    from helpers.preflight import check_args, grade_args, in_process, publish

    root = phase(tmp_path)
    submission = renamed(tmp_path)
    public = publish(root, tmp_path / "public")
    assert in_process(check_args(submission, public), capsys).last_line.startswith("Would be scored")
    labels = sitk.ReadImage(str(submission / "case_12.mha"))
    array = sitk.GetArrayFromImage(labels)
    array[0, 0, 0] = 13
    broken = sitk.GetImageFromArray(array)
    broken.CopyInformation(labels)
    sitk.WriteImage(broken, str(submission / "case_12.mha"))
    checked = in_process(check_args(submission, public), capsys)
    graded = in_process(grade_args(submission, root, tmp_path / "out"), capsys)
    assert checked.code == 2 and checked.same_as(graded), (checked, graded)
    assert "case_12.mha: holds labels that are no TopCoW label (13)" in checked.last_line


def test_phases_the_preset_refuses(tmp_path):
    for extra, line in (
        ("classes: [1, 2]\n", "topcow2024-task1 defines its own classes and metrics; remove classes"),
        ("missing_cases: penalty\n", "missing_cases: penalty is BraTS_evaluation's"),
    ):
        folder = tmp_path / extra.split(":")[0]
        folder.mkdir()
        run = run_cli(renamed(folder), phase(folder, PRESET + extra), folder / "out")
        assert run.code == 1 and line in run.last_line, run.last_line


def test_roi_files_the_phase_lacks_or_garbles(tmp_path):
    """A case without its ROI file, or with one the reference could not parse, fails as the
    phase's fault (exit 1), the others are scored."""
    root = phase(tmp_path, PRESET + "topcow_roi: roi\n", roi=True)
    (root / "roi" / "case_04.txt").unlink()
    (root / "roi" / "case_05.txt").write_text("Size: 1 2\n")
    run = run_cli(renamed(tmp_path), root, tmp_path / "out")
    assert run.code == 1
    assert run.last_line == "Case case_04 failed (internal): topcow_roi: no ROI file case_04.txt for case case_04"
    failures = {f["case"]: f["message"] for f in run.metrics["failures"]}
    assert failures == {
        "case_04": "topcow_roi: no ROI file case_04.txt for case case_04",
        "case_05": "topcow_roi: case_05.txt should hold 'Size (Voxels): X Y Z' on its second line and "
        "'Location (Voxels): x y z' on its third",
    }
    assert run.metrics["aggregates"]["n_cases"] == 18


# --------------------------------------------------------------------------------------------
# By hand


def tube(shape=(12, 14, 16)) -> np.ndarray:
    labels = np.zeros(shape, np.uint8)
    labels[3:6, 4:7, 2:12] = 1  # BA along x
    labels[3:6, 7:10, 5:8] = 2  # R-PCA touching it
    return labels


def test_dice_betti_and_distances_by_hand():
    truth = tube()
    pred = np.roll(truth, 1, axis=2)  # one voxel along x
    pred[9, 1, 1] = 1  # a stray BA component
    row = topcow.evaluate(truth, pred, (0.5, 1.0, 2.0))
    # BA: 90 voxels each, 81 in common (the shifted tube) -> J = 81 / 100, one stray voxel
    jaccard = 81 / (90 + 91 - 81)
    assert row["Dice_BA"] == 2 * jaccard / (1 + jaccard)
    assert row["B0err_BA"] == 1 and row["B0err_R-PCA"] == 0 and row["B0err_MergedBin"] == 1
    # the stray voxel at (9, 1, 1) is nearest the tube's corner (5, 4, 2): 4 z-steps of 2 mm,
    # 3 y-steps of 1 mm, 1 x-step of 0.5 mm
    assert row["HD_BA"] == pytest.approx(math.sqrt(8**2 + 3**2 + 0.5**2), rel=1e-7)
    assert row["HD95_R-PCA"] == 0.5 and row["HD_R-PCA"] == 0.5
    assert "Dice_L-PCA" not in row  # absent from both: no value at all
    assert row["Dice_ClsAvgDice"] == (row["Dice_BA"] + row["Dice_R-PCA"]) / 2
    graph = row["all_graph_dicts"]["posterior"]
    assert graph == {"gt_graph": [0, 0, 1, 0], "pred_graph": [0, 0, 1, 0]}  # R-P1: R-PCA touches BA


def test_a_label_on_one_side_only_and_empty_cases():
    truth = tube()
    pred = truth.copy()
    pred[pred == 2] = 0
    row = topcow.evaluate(truth, pred, (1.0, 1.0, 1.0))
    assert (row["Dice_R-PCA"], row["HD_R-PCA"], row["HD95_R-PCA"], row["B0err_R-PCA"]) == (0, 90, 90, 1)
    assert type(row["Dice_R-PCA"]) is int and type(row["HD_R-PCA"]) is int
    corrected = topcow.evaluate(truth, pred, (1.0, 1.0, 2.0), corrections=("topcow_hd_diagonal",))
    assert corrected["HD_R-PCA"] == math.sqrt(16**2 + 14**2 + 24**2)
    empty = np.zeros_like(truth)
    row = topcow.evaluate(empty, empty, (1.0, 1.0, 1.0))
    assert {k: v for k, v in row.items() if not k.startswith("all_")} == {
        "Dice_ClsAvgDice": 0,
        "Dice_MergedBin": 0,
        "B0err_ClsAvgB0err": 0,
        "B0err_MergedBin": 0,
        "HD_ClsAvgHD": 0,
        "HD_MergedBin": 0,
        "HD95_ClsAvgHD95": 0,
        "HD95_MergedBin": 0,
        "clDice": 0,
    }
    corrected = topcow.evaluate(empty, empty, (1.0, 1.0, 1.0), corrections=("topcow_empty_case",))
    assert all(math.isnan(v) for k, v in corrected.items() if not k.startswith("all_"))
    assert row["all_topo_dicts"]["match_verdict"] == {"anterior": True, "posterior": True}


def test_detection_at_the_iou_threshold():
    truth = np.zeros((3, 3, 10), np.uint8)
    truth[1, 1, 0:4] = 10
    pred = np.zeros_like(truth)
    pred[1, 1, 3:6] = 10  # 1 in common, 6 in the union: IoU 1/6 < 0.25
    assert topcow.evaluate(truth, pred, (1, 1, 1))["all_detection_dicts"]["10"]["Detection"] == "FN"
    pred[1, 1, 2:6] = 10  # 2 of 6: 1/3
    assert topcow.evaluate(truth, pred, (1, 1, 1))["all_detection_dicts"]["10"]["Detection"] == "TP"
    pred[1, 1, :] = 0
    pred[0, 0, 0] = 8
    found = topcow.evaluate(truth, pred, (1, 1, 1))["all_detection_dicts"]
    assert (found["10"]["Detection"], found["8"]["Detection"], found["9"]["Detection"]) == ("FN", "FP", "TN")
    truth[1, 1, 0:4] = 0
    truth[1, 1, 0:8] = 10
    pred[:] = 0
    pred[1, 1, 0:2] = 10  # 2 of 8: exactly 0.25
    assert topcow.evaluate(truth, pred, (1, 1, 1))["all_detection_dicts"]["10"]["Detection"] == "TP"


def left_right(mirror: bool = False) -> np.ndarray:
    """ICAs and PCAs on their side of an LPS image (x towards the patient's left), BA between."""
    labels = np.zeros((4, 6, 20), np.uint8)
    labels[1:3, 1:3, 2:5], labels[1:3, 1:3, 15:18] = 4, 6  # R-ICA at small x, L-ICA at large x
    labels[1:3, 3:5, 4:9], labels[1:3, 3:5, 9:11], labels[1:3, 3:5, 11:16] = 2, 1, 3
    return labels[:, :, ::-1].copy() if mirror else labels


def test_left_right_flips_and_the_physical_correction():
    truth = left_right()
    row = topcow.evaluate(truth, truth, (1, 1, 1))
    assert row["all_topo_dicts"]["match_verdict"] == {"anterior": True, "posterior": True}
    swapped = truth.copy()
    for a, b in ((4, 6), (2, 3)):
        swapped[truth == a], swapped[truth == b] = b, a
    found = topcow.evaluate(truth, swapped, (1, 1, 1))["all_topo_dicts"]
    assert found["pred_topology"]["anterior"]["LR_flipped"] and found["pred_topology"]["posterior"]["LR_flipped"]
    assert found["match_verdict"] == {"anterior": False, "posterior": False}
    # stored right-to-left (x towards the patient's right: direction -1 along x), correctly labelled
    mirrored, direction = left_right(mirror=True), (-1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    assert topcow.evaluate(mirrored, mirrored, (1, 1, 1))["all_topo_dicts"]["pred_topology"]["anterior"]["LR_flipped"]
    corrected = topcow.evaluate(mirrored, mirrored, (1, 1, 1), ("topcow_lr_physical",), direction)["all_topo_dicts"]
    assert corrected["match_verdict"] == {"anterior": True, "posterior": True}


def test_detection_average_and_its_correction():
    detections = [
        {"8": {"Detection": "TP"}, "9": {"Detection": "FN"}, "10": {"Detection": "TN"}, "15": {"Detection": "TN"}},
        {"8": {"Detection": "FP"}, "9": {"Detection": "TP"}, "10": {"Detection": "TN"}, "15": {"Detection": "TN"}},
    ]
    found = topcow_table.detection_average(detections)
    assert found["8"]["precision"] == 0.5 and found["9"]["recall"] == 0.5 and found["10"]["f1_score"] == 0
    assert found["f1_score"]["mean"] == (2 / 3 + 2 / 3) / 4
    corrected = topcow_table.detection_average(detections, ("topcow_detection_tn",))
    assert math.isnan(corrected["10"]["f1_score"]) and corrected["f1_score"]["mean"] == 2 / 3


def test_balanced_accuracy_over_the_truths_variants():
    truth = ["a", "a", "b", "c"]
    assert topcow_table.balanced_accuracy(truth, ["a", "x", "b", "b"]) == (0.5 + 1 + 0) / 3


def test_roi_windows():
    folder = KIT / "cases" / "roi"
    # case_01: 'Location (Voxels): -4 6 3' reads x = 4 (digit runs); size 48 50 30
    assert topcow_inputs.roi_window(folder, "case_01", (40, 64, 64)) == (slice(3, 33), slice(6, 56), slice(4, 52))
    corrected = topcow_inputs.roi_window(folder, "case_01", (40, 64, 64), ("topcow_roi_sign",))
    assert corrected == (slice(3, 33), slice(6, 56), slice(0, 44))
    # case_00: 100 voxels from 0: cut at the image's end
    assert topcow_inputs.roi_window(folder, "case_00", (40, 64, 64)) == (slice(0, 40), slice(0, 64), slice(0, 64))


# --------------------------------------------------------------------------------------------
# The primitives against the libraries the reference calls


def test_itk_distances_bit_for_bit():
    """LabelContour(fullyConnected) and |SignedMaurerDistanceMap| of SimpleITK, float32 values
    equal to the bit, on float32 spacings and on spacings no float32 holds."""
    from evaluation.metrics import itk_distance

    rng = np.random.default_rng(5)
    for i in range(40):
        mask = rng.random(tuple(int(n) for n in rng.integers(3, 13, 3))) < rng.uniform(0.05, 0.5)
        spacing = tuple(float(s) for s in rng.choice([0.3, 0.45, 0.7, 1.25], 3)) if i % 2 else (0.5, 0.25, 1.0)
        image = sitk.GetImageFromArray(mask.astype(np.uint8))
        image.SetSpacing(spacing)
        contour = sitk.LabelContour(image, fullyConnected=True)
        assert np.array_equal(sitk.GetArrayFromImage(contour).astype(bool), itk_distance.contour(mask))
        if not mask.any():
            continue
        distances = sitk.SignedMaurerDistanceMap(contour, squaredDistance=False, useImageSpacing=True)
        expected = np.abs(sitk.GetArrayFromImage(distances))
        got = itk_distance.distance_map(sitk.GetArrayFromImage(contour).astype(bool), spacing)
        assert np.array_equal(expected.view(np.uint32), got.view(np.uint32)), i


def test_the_cast_is_simpleitks():
    values = np.array([0, 2.7, -1.5, 300.0, np.nan, np.inf, -3e9, 2**31 - 1.0, 2**31, -0.5, -255.0, 255.9], np.float64)
    for array in (values, values.astype(np.float32), np.array([0, -1, 255, 256, 263, -32768, 32767], np.int16)):
        image = sitk.Cast(sitk.GetImageFromArray(array.reshape(1, 1, -1)), sitk.sitkUInt8)
        assert np.array_equal(topcow_inputs.cast(array), sitk.GetArrayFromImage(image).ravel()), array.dtype


def test_betti_numbers_are_scikit_images():
    """b0, b2 by components, b1 from ``euler_number(connectivity=3)`` of the padded mask."""
    from skimage.measure import euler_number, label

    from evaluation.metrics import betti

    rng = np.random.default_rng(11)
    for _ in range(150):
        mask = rng.random(tuple(int(n) for n in rng.integers(1, 9, 3))) < rng.random()
        padded = np.pad(mask.astype(np.uint8), 1)
        b0 = label(padded, connectivity=3, return_num=True)[1]
        b2 = label(1 - padded, connectivity=1, return_num=True)[1] - 1
        assert betti.betti_numbers(mask) == (b0, b0 + b2 - euler_number(padded, connectivity=3), b2)


def test_percentile_is_numpys_on_float64():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 20, 101):
        values = np.sort(rng.random(n) * 10)
        for q in (0.25, 0.5, 0.75, 0.95):
            assert topcow.percentile(values, q) == np.percentile(values, q * 100)
    # numpy 1.x takes the step of a float32 array in float32, then interpolates in float64
    a, b = np.float32(0.1), np.float32(0.3)
    step = float(b - a)
    assert step != float(b) - float(a)
    assert topcow.percentile(np.array([a, b], np.float64), 0.95, float32_step=True) == float(b) - step * (1 - 0.95)


def test_betti_errors_as_listed_metrics(tmp_path):
    """``metrics: [betti0_error, betti1_error]`` in any phase: a ring against a bar."""
    from evaluation.phase import Phase
    from evaluation.suites.segmentation.options import Options
    from evaluation.suites.segmentation.scoring import score_arrays

    ring = np.zeros((3, 7, 7), np.uint8)
    ring[1, 1:6, 1:6] = 1
    ring[1, 2:5, 2:5] = 0
    bars = np.zeros_like(ring)
    bars[1, 1, 1:6] = bars[1, 5, 1:6] = 1
    options = Options.from_phase(Phase(Path("."), "segmentation", {"classes": [1], "metrics": ["betti0_error", "betti1_error"]}))
    found = score_arrays(ring, bars, (1.0, 1.0, 1.0), options)["classes"]["1"]
    assert found == {"betti0_error": 1, "betti1_error": 1}
