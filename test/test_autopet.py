"""The autoPET presets through the command line, against the references' own values on the
cases of test/fixtures/segmentation/autopet (README.md there says how they were made):

* ``preset: autopet4``, ``autopet3``, ``autopet2``, ``autopet1``: every case's Dice,
  false-positive and false-negative volume, voxel counts and voxel volume, the means and their
  counts (``aggregates.autopet``) and the reference's CSV, under numpy 2's and numpy 1's float
  rounding;
* ``preset: autopet4-interactive``: every step's values, the areas and the last values, their
  means;
* a listed phase's ``fpv_ml`` and ``fnv_ml`` on the binary cases;
* what a participant reads when a file cannot be scored, and what a phase may not combine.

Counts are compared exactly, floats to 1e-9 relative; NaN is null in metrics.json.
"""

import csv
import functools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import FIXTURES, run_cli

KIT = FIXTURES / "segmentation" / "autopet"
EXPECTED = json.loads((KIT / "expected.json").read_text())
MANIFEST = json.loads((KIT / "cases" / "manifest.json").read_text())
CASES = sorted(EXPECTED["np2"]["autopet4"]["cases"])
INTERACTIVE = sorted(EXPECTED["np2"]["autopet4_interactive"]["cases"])
SECTION = {"numpy2": "np2", "numpy1": "np1"}
# preset -> (the expected block, its aggregate rule), and the numpy its edition ran with
PRESETS = {
    "autopet4": ("autopet4", None, "numpy2"),
    "autopet3": ("autopet3", None, "numpy2"),
    "autopet2": ("autopet12", "autopet2_rule", "numpy1"),
    "autopet1": ("autopet12", "autopet1_rule", "numpy1"),
}
PER_CASE = {"dice": "dice", "fpv": "fpv_ml", "fnv": "fnv_ml", "voxel_vol": "voxel_volume_ml"}
COUNTS = {"fp_voxels": "fp_voxels", "fn_voxels": "fn_voxels"}
MEANS = ("dice_sc", "false_pos_vol", "false_neg_vol")
INTERACTIVE_VALUES = ("dice_auc", "fpv_auc", "fnv_auc", "dice_final", "fpv_final", "fnv_final")


def ours(reference_key: str) -> str:
    """The suite's key of the reference's interactive value: fpv_auc -> fpv_ml_auc."""
    return reference_key.replace("fpv", "fpv_ml").replace("fnv", "fnv_ml")


def same(got, expected) -> bool:
    """Counts exactly, floats to 1e-9 relative; the reference's NaN is null."""
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        return got is None
    if isinstance(expected, int):
        return isinstance(got, int) and got == expected
    return got is not None and (got == expected or abs(got - expected) <= 1e-9 * max(abs(got), abs(expected)))


def phase(root: Path, config: str, truth: Path) -> Path:
    folder = root / "phase"
    shutil.copytree(truth, folder / "labels")
    (folder / "phase.yaml").write_text("suite: segmentation\n" + config)
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """run(preset, numpy) -> the output folder of the command line on the kit, computed once."""
    root = tmp_path_factory.mktemp("autopet_kit")

    @functools.cache
    def outputs(preset: str, numpy: str) -> Path:
        interactive = preset.endswith("interactive")
        folder = root / f"{preset}_{numpy}"
        kind = "int" if interactive else "ni"
        config = f"preset: {preset}\nautopet_numpy: {numpy}\n"
        done = run_cli(KIT / "cases" / kind / "pred", phase(folder, config, KIT / "cases" / kind / "gt"), folder / "out")
        assert done.code == 0, done.stderr[-3000:]
        return done.output

    return outputs


def generations(preset: str, *before):
    """(``before``, numpy) for both numpy generations, the edition's own in the fast tier."""
    own = PRESETS[preset][2] if preset in PRESETS else "numpy2"
    return [pytest.param(*before, g, marks=() if g == own else pytest.mark.slow) for g in ("numpy2", "numpy1")]


# --------------------------------------------------------------------------------------------
# Every value the references computed


@pytest.mark.parametrize(("preset", "numpy"), [p for preset in PRESETS for p in generations(preset, preset)])
def test_every_case_value_and_mean(run, preset, numpy):
    block, rule, _ = PRESETS[preset]
    expected = EXPECTED[SECTION[numpy]][block]
    metrics = json.loads((run(preset, numpy) / "metrics.json").read_text())
    problems, compared = [], 0
    for case in CASES:
        found = metrics["case"][case]["classes"]["lesion"]
        for theirs, key in {**PER_CASE, **COUNTS}.items():
            compared += 1
            if not same(found[key], expected["cases"][case][theirs]):
                problems.append(f"{case}.{key}: {found[key]!r}, reference {expected['cases'][case][theirs]!r}")
    means = expected["aggregate"][rule] if rule else expected["aggregate"]
    found = metrics["aggregates"]["autopet"]
    for column in MEANS:
        compared += 1
        if not same(found[column], means[column]):
            problems.append(f"mean {column}: {found[column]!r}, reference {means[column]!r}")
        if f"n_{column}" in means:
            assert found[f"n_{column}"] == means[f"n_{column}"]
    assert not problems, problems
    assert compared == len(CASES) * 6 + 3
    assert metrics["reference"]["evaluation"] == preset


@pytest.mark.parametrize("numpy", generations("autopet4-interactive"))
def test_every_interactive_value_and_mean(run, numpy):
    expected = EXPECTED[SECTION[numpy]]["autopet4_interactive"]
    metrics = json.loads((run("autopet4-interactive", numpy) / "metrics.json").read_text())
    problems, compared = [], 0
    for case in INTERACTIVE:
        found = metrics["case"][case]["classes"]["lesion"]
        steps = expected["cases"][case]["steps"]
        for theirs, key in {**PER_CASE, **COUNTS}.items():
            for step, value in enumerate(steps[theirs]):
                compared += 1
                if not same(found[f"{key}_step{step}"], value):
                    problems.append(f"{case}.{key}_step{step}: {found[f'{key}_step{step}']!r}, reference {value!r}")
        for theirs in INTERACTIVE_VALUES:
            compared += 1
            if not same(found[ours(theirs)], expected["cases"][case][theirs]):
                problems.append(f"{case}.{ours(theirs)}: {found[ours(theirs)]!r}, reference {expected['cases'][case][theirs]!r}")
    means = metrics["aggregates"]["autopet"]
    for theirs in INTERACTIVE_VALUES:
        compared += 1
        assert same(means[theirs], expected["aggregate"][theirs]), theirs
        assert means[f"n_{theirs}"] == expected["aggregate"][f"n_{theirs}"]
    assert not problems, problems
    assert compared == len(INTERACTIVE) * (11 * 6 + 6) + 6
    assert metrics["case"]["I1_progress"]["prediction_file"] == [f"I1_progress_pred{i}.nii.gz" for i in range(11)]


def read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_references_csv(run):
    """``metrics.csv`` as ``get_metrics`` writes it: gt_name, dice_sc, false_pos_vol,
    false_neg_vol, a float by its repr (NaN as nan), one row per case."""
    rows = read_csv(run("autopet4", "numpy2") / "metrics.csv")
    expected = EXPECTED["np2"]["autopet4"]["cases"]
    assert [r["gt_name"] for r in rows] == [f"{case}.nii.gz" for case in CASES]
    for row in rows:
        want = expected[row["gt_name"].removesuffix(".nii.gz")]
        for column, theirs in zip(MEANS, ("dice", "fpv", "fnv")):
            assert row[column] == repr(float(want[theirs])), (row["gt_name"], column)
    rows = read_csv(run("autopet4-interactive", "numpy2") / "metrics_interactive.csv")
    assert list(rows[0]) == ["gt_name", *INTERACTIVE_VALUES]
    for row in rows:
        want = EXPECTED["np2"]["autopet4_interactive"]["cases"][row["gt_name"].removesuffix(".nii.gz")]
        assert [row[c] for c in INTERACTIVE_VALUES] == [repr(float(want[c])) for c in INTERACTIVE_VALUES]


def test_statistics_and_ranking(run):
    """The suite's statistics are the reference's means (autoPET I: lesion-free cases left out
    of the Dice and false-negative means); the ranking is the Dice, or its area."""
    for preset in ("autopet4", "autopet1"):
        metrics = json.loads((run(preset, PRESETS[preset][2]) / "metrics.json").read_text())
        statistics, means = metrics["aggregates"]["classes"]["lesion"], metrics["aggregates"]["autopet"]
        for key, column in zip(("dice", "fpv_ml", "fnv_ml"), MEANS):
            assert statistics[key]["mean"] == means[column] and statistics[key]["n"] == means[f"n_{column}"]
        assert metrics["aggregates"]["ranking"]["key"] == "dice"
        assert metrics["aggregates"]["score"] == means["dice_sc"]
    interactive = json.loads((run("autopet4-interactive", "numpy2") / "metrics.json").read_text())
    assert interactive["aggregates"]["ranking"]["key"] == "dice_auc"
    assert interactive["aggregates"]["ranking"]["higher_is_better"] is True


# --------------------------------------------------------------------------------------------
# A listed phase's fpv_ml and fnv_ml


def test_lesion_volumes_of_a_listed_phase(tmp_path):
    """``metrics: [dice, fpv_ml, fnv_ml]`` on the kit's binary cases on their truth's grid: autoPET
    IV's volumes (numpy 2), null false-negative volume for a lesion-free truth; the source named."""
    binary = [
        c
        for c in CASES
        if not c.startswith(("09_", "10_", "11_", "12_", "18_"))  # another pixdim, floats, label 2, scaled
    ]
    truth, submission = tmp_path / "truth", tmp_path / "submission"
    for folder, kind in ((truth, "gt"), (submission, "pred")):
        folder.mkdir()
        for case in binary:
            shutil.copy(KIT / "cases" / "ni" / kind / f"{case}.nii.gz", folder)
    root = phase(tmp_path, "classes: {lesion: 1}\nmetrics: [dice, fpv_ml, fnv_ml]\n", truth)
    done = run_cli(submission, root, tmp_path / "out")
    assert done.code == 0, done.stderr[-3000:]
    expected = EXPECTED["np2"]["autopet4"]["cases"]
    for case in binary:
        found = done.metrics["case"][case]["classes"]["lesion"]
        assert same(found["fpv_ml"], expected[case]["fpv"]) and same(found["fnv_ml"], expected[case]["fnv"]), case
    assert done.metrics["reference"]["definitions"]["fpv_ml"] == "autopet"
    assert done.metrics["reference"]["libraries"]["autopet"].startswith("lab-midas/autoPETCTIV@80af68d")


# --------------------------------------------------------------------------------------------
# Choices and corrections


def one_case(tmp_path: Path, case: str, config: str, prediction: Path | None = None, interactive: bool = False):
    """The command line on one kit case (its own prediction, or ``prediction``)."""
    kind = "int" if interactive else "ni"
    truth, submission = tmp_path / "truth", tmp_path / "submission"
    truth.mkdir()
    submission.mkdir()
    shutil.copy(KIT / "cases" / kind / "gt" / f"{case}.nii.gz", truth)
    if prediction is not None:
        shutil.copy(prediction, submission)
    elif interactive:
        for step in range(11):
            shutil.copy(KIT / "cases" / kind / "pred" / f"{case}_pred{step}.nii.gz", submission)
    else:
        shutil.copy(KIT / "cases" / kind / "pred" / f"{case}.nii.gz", submission)
    return run_cli(submission, phase(tmp_path, config, truth), tmp_path / "out")


def test_truth_spacing_correction(tmp_path):
    """autoPET IV takes the prediction's pixdim (4 x 4 x 5 mm in 09_header_mismatch); the
    correction takes the truth's, in IV's arithmetic (the count times the float32 volume)."""
    done = one_case(tmp_path, "09_header_mismatch", "preset: autopet4\ncorrections: [autopet_truth_spacing]\n")
    assert done.code == 0, done.stderr[-3000:]
    found = done.metrics["case"]["09_header_mismatch"]["classes"]["lesion"]
    truth_volume = EXPECTED["np2"]["autopet3"]["cases"]["09_header_mismatch"]["voxel_vol"]
    assert found["voxel_volume_ml"] == truth_volume
    assert found["fpv_ml"] == found["fp_voxels"] * truth_volume and found["fp_voxels"] == 78
    assert found["fnv_ml"] == 335 * truth_volume


def test_missing_cases(tmp_path):
    """The reference skips a case without prediction (the preset's default); reject refuses the
    submission, empty scores it as an empty prediction."""
    truth, submission = tmp_path / "truth", tmp_path / "submission"
    shutil.copytree(KIT / "cases" / "ni" / "gt", truth)
    submission.mkdir()
    for case in ("01_multi", "02_perfect"):
        shutil.copy(KIT / "cases" / "ni" / "pred" / f"{case}.nii.gz", submission)
    skipped = run_cli(submission, phase(tmp_path / "skip", "preset: autopet4\n", truth), tmp_path / "skip" / "out")
    assert skipped.code == 0 and skipped.metrics["aggregates"]["n_missing"] == len(CASES) - 2
    assert skipped.metrics["aggregates"]["autopet"]["n_dice_sc"] == 2
    rejected = run_cli(
        submission, phase(tmp_path / "reject", "preset: autopet4\nmissing_cases: reject\n", truth), tmp_path / "reject" / "out"
    )
    assert rejected.code == 2 and f"{len(CASES) - 2} of {len(CASES)} test cases have no prediction" in rejected.last_line
    empty = run_cli(
        submission, phase(tmp_path / "empty", "preset: autopet4\nmissing_cases: empty\n", truth), tmp_path / "empty" / "out"
    )
    assert empty.code == 0
    missed = empty.metrics["case"]["03_empty_pred"]["classes"]["lesion"]  # its own prediction is empty too
    assert missed["fnv_ml"] == EXPECTED["np2"]["autopet4"]["cases"]["03_empty_pred"]["fnv"] and missed["dice"] == 0.0


def test_interactive_steps_missing_or_unknown(tmp_path):
    (tmp_path / "a").mkdir()
    submission = tmp_path / "a" / "submission"
    shutil.copytree(KIT / "cases" / "int" / "pred", submission)
    (submission / "I1_progress_pred7.nii.gz").unlink()
    truth = KIT / "cases" / "int" / "gt"
    config = "preset: autopet4-interactive\nmissing_cases: reject\n"
    done = run_cli(submission, phase(tmp_path / "a", config, truth), tmp_path / "a" / "out")
    assert done.code == 2
    assert "case I1_progress: no prediction for 1 of its 11 click steps (I1_progress_pred7)" in done.last_line
    skipped = run_cli(submission, phase(tmp_path / "b", "preset: autopet4-interactive\n", truth), tmp_path / "b" / "out")
    assert skipped.code == 0 and "I1_progress" not in skipped.metrics["case"]
    shutil.copy(KIT / "cases" / "int" / "pred" / "I1_progress_pred7.nii.gz", submission / "I1_progress_pred11.nii.gz")
    unknown = run_cli(submission, phase(tmp_path / "c", "preset: autopet4-interactive\n", truth), tmp_path / "c" / "out")
    assert unknown.code == 2
    assert "1 file(s) are no click step of a test case (I1_progress_pred11.nii.gz)" in unknown.last_line


# --------------------------------------------------------------------------------------------
# What a participant reads


def write(array: np.ndarray, path: Path, spacing=(3.0, 2.0364201, 2.0364201)) -> Path:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(tuple(float(s) for s in spacing[::-1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))
    return path


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((32, 64, 63), np.uint8), "has shape (32, 64, 63), but the image it predicts has shape (32, 64, 64)"),
        (np.full((32, 64, 64), np.nan, np.float32), "holds NaN or infinite values"),
        (np.full((32, 64, 64), -1, np.int16), "holds negative values (e.g. -1)"),
        (np.zeros((64, 64), np.uint8), "has 2 dimensions; the autoPET metrics are defined on 3-D images"),
    ],
    ids=["shape", "nan", "negative", "2-D"],
)
def test_unusable_predictions(tmp_path, array, message):
    prediction = write(array, tmp_path / "made" / "01_multi.nii.gz")
    done = one_case(tmp_path, "01_multi", "preset: autopet4\n", prediction)
    assert done.code == 2, done.stderr[-2000:]
    assert "01_multi.nii.gz" in done.last_line and message in done.last_line


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("preset: autopet4\nclasses: [1]\n", "autopet4 defines its own classes and metrics; remove classes"),
        ("preset: autopet3\nmissing_cases: penalty\n", "missing_cases: penalty is BraTS_evaluation's"),
    ],
)
def test_phases_refused(tmp_path, config, message):
    done = one_case(tmp_path, "01_multi", config)
    assert done.code == 1
    assert message in done.stdout + done.stderr


def test_the_preflight_reads_the_steps_as_grading_does(tmp_path, capsys):
    """``check`` against the public phase: the interactive kit (float probability maps
    included) would be scored; a step holding NaN ends as grading ends, on the same line."""
    from helpers import preflight

    root = phase(tmp_path, "preset: autopet4-interactive\n", KIT / "cases" / "int" / "gt")
    public = preflight.publish(root, tmp_path / "public")
    ending = preflight.in_process(preflight.check_args(KIT / "cases" / "int" / "pred", public), capsys)
    assert ending.code == 0 and ending.last_line.startswith("Would be scored: 4 task(s)"), ending.output
    submission = tmp_path / "submission"
    shutil.copytree(KIT / "cases" / "int" / "pred", submission)
    write(np.full((32, 64, 64), np.nan, np.float32), submission / "I4_prob_pred3.nii.gz")
    checked = preflight.in_process(preflight.check_args(submission, public), capsys)
    graded = preflight.in_process(preflight.grade_args(submission, root, tmp_path / "out"), capsys)
    assert graded.code == 2 and "I4_prob_pred3.nii.gz: holds NaN or infinite values" in graded.last_line
    assert checked.same_as(graded), (checked, graded)
