"""The fisbe suite through the command line: file formats, keys, layouts, missing and broken
predictions, phase options."""

import shutil

import h5py
import numpy as np
import pytest
import tifffile
import zarr
from helpers.grading import differences, run_cli, run_on_a_platform, validate_metrics
from test_fisbe_parity import CASES, COUNTS, make_phase

KEY = "volumes/labels"


def read_pred(submission, sample="s0"):
    with h5py.File(submission / f"{sample}.hdf", "r") as f:
        return f[KEY][()]


def scores(run):
    assert run.code == 0, run.stderr[-2000:]
    validate_metrics(run.metrics)
    return {
        name: {k: entry[k] for k in ("general", "confusion_matrix")} for name, entry in run.metrics["case"].items()
    }, run.metrics["aggregates"]


def reference_scores(case):
    return {name: sample["metrics"] for name, sample in CASES[case]["samples"].items()}


def assert_reference(run, case):
    per_sample, _ = scores(run)
    assert differences(per_sample, reference_scores(case), case, COUNTS) == []


@pytest.fixture
def h_case(tmp_path):
    phase, submission = make_phase(tmp_path, "h_perturbed")
    return phase, submission, "h_perturbed"


def replace_prediction(submission, name, writer):
    data = read_pred(submission)
    (submission / "s0.hdf").unlink()
    writer(submission / name, data)


@pytest.mark.parametrize(
    "name,writer",
    [
        ("s0.h5", lambda p, d: h5py.File(p, "w").create_dataset(KEY, data=d).file.close()),
        ("s0.tif", lambda p, d: tifffile.imwrite(p, d)),
        ("s0.zarr", lambda p, d: zarr.open_group(str(p), mode="w", zarr_format=2).create_array(KEY, data=d, chunks=(16, 64, 64))),
        ("s0.hdf", lambda p, d: h5py.File(p, "w").create_dataset("other/name", data=d[None], chunks=(1, 8, 32, 32)).file.close()),
    ],
)
def test_formats_and_layouts_score_alike(h_case, tmp_path, name, writer):
    """.h5, .tif, chunked .zarr, and an .hdf whose only dataset has another name and a leading
    size-1 axis (squeezed away) all give the .hdf result."""
    phase, submission, reference = h_case
    replace_prediction(submission, name, writer)
    assert_reference(run_cli(submission, phase, tmp_path / "out"), reference)


def test_larger_prediction_is_centre_cropped(h_case, tmp_path):
    phase, submission, reference = h_case
    data = read_pred(submission)
    padded = np.pad(data, ((2, 3), (4, 4), (0, 1)), constant_values=0)
    padded[0, 0, 0] = 77  # outside the crop: ignored
    with h5py.File(submission / "s0.hdf", "w") as f:
        f[KEY] = padded
    assert_reference(run_cli(submission, phase, tmp_path / "out"), reference)


def test_label_image_truth_equals_stack_without_overlaps(tmp_path):
    """A plain label image as ground truth scores like the FISBe stack it flattens."""
    phase, submission = make_phase(tmp_path, "a3_perfect_nooverlap")
    array = zarr.open_array(str(phase / "s0.zarr" / "volumes/gt_instances"), mode="r")
    stack, dims = array[...], list(array.attrs["dim_neurons"])
    shutil.rmtree(phase / "s0.zarr")
    group = zarr.open_group(str(phase / "s0.zarr"), mode="w", zarr_format=2)
    flat = group.create_array("volumes/gt_instances", data=stack.max(axis=0), chunks=(32, 64, 64))
    flat.attrs["dim_neurons"] = dims
    assert_reference(run_cli(submission, phase, tmp_path / "out"), "a3_perfect_nooverlap")


def test_prediction_key_option(h_case, tmp_path):
    phase, submission, reference = h_case
    data = read_pred(submission)
    with h5py.File(submission / "s0.hdf", "w") as f:
        f["mine/seg"] = data
        f["mine/other"] = np.zeros(3)
    run = run_cli(submission, phase, tmp_path / "bad")
    assert run.code == 2 and "s0.hdf" in run.last_line and "2 datasets" in run.last_line
    (phase / "phase.yaml").write_text("suite: fisbe\nprediction_key: mine/seg\n")
    assert_reference(run_cli(submission, phase, tmp_path / "out"), reference)


def test_missing_prediction_scores_as_empty(tmp_path):
    phase, submission = make_phase(tmp_path, "g_multi")
    (submission / "img1.hdf").unlink()
    run = run_cli(submission, phase, tmp_path / "out")
    per_sample, aggregates = scores(run)
    entry = run.metrics["case"]["img1"]
    assert entry["prediction"] == "missing" and entry["general"]["Num Pred"] == 0
    assert entry["general"]["avg_f1_cov_score"] == 0.0
    assert entry["confusion_matrix"]["th_0_5"]["AP_FN"] == entry["general"]["Num GT"] == 5
    assert aggregates["samples"] == {"total": 3, "scored": 3, "missing_predictions": 1}
    expected = CASES["g_multi"]["samples"]["img0"]["metrics"]["general"]["avg_f1_cov_score"]
    assert per_sample["img0"]["general"]["avg_f1_cov_score"] == expected


def test_unmatched_submission_is_rejected(tmp_path):
    phase, submission = make_phase(tmp_path, "a_perfect")
    (submission / "s0.hdf").rename(submission / "sample-7.hdf")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2 and "no prediction matches a test sample" in run.last_line


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d - 5, "negative ids"),
        (lambda d: np.pad(d, ((0, 2), (0, 0), (0, 0)))[:, :-3], "larger than the image in some axes"),
        (lambda d: d[0], "expected a (z, y, x) label image"),
    ],
)
def test_unusable_prediction_is_a_submission_error(h_case, tmp_path, change, message):
    phase, submission, _ = h_case
    data = change(read_pred(submission).astype(np.int32))
    with h5py.File(submission / "s0.hdf", "w") as f:
        f[KEY] = data
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2 and message in run.last_line and "s0.hdf" in run.last_line
    assert run.metrics["case"]["s0"]["status"] == "failed"


def test_split_file_and_partly_true(tmp_path):
    phase, submission = make_phase(tmp_path, "g2_mixed_partly", partly=[])
    (phase / "splits.txt").write_text(
        "(1) samples for FlyLight completely:\ntest:\nm0\nm1\n(2) samples for FlyLight partly:\ntest:\nm2\nm3\n"
    )
    (phase / "phase.yaml").write_text("suite: fisbe\nsplit_file: splits.txt\n")
    _, aggregates = scores(run_cli(submission, phase, tmp_path / "split"))
    assert aggregates["S"] == CASES["g2_mixed_partly"]["aggregate"]["combined"]["S"]
    (phase / "phase.yaml").write_text("suite: fisbe\npartly: true\n")
    run = run_cli(submission, phase, tmp_path / "all")
    assert all(entry["partly"] for entry in run.metrics["case"].values()) and "complete" not in run.metrics["aggregates"]


def test_phase_errors(tmp_path):
    phase, submission = make_phase(tmp_path, "a_perfect")
    (phase / "phase.yaml").write_text("suite: fisbe\npartly: [s9]\n")
    run = run_on_a_platform(submission, phase, tmp_path / "a")
    assert run.code == 1 and "s9" not in run.last_line  # organizer's error, neutral last line
    assert "s9" in run_cli(submission, phase, tmp_path / "local").last_line  # but named to the organizer
    (phase / "phase.yaml").write_text("suite: fisbe\nremove_small: 3\n")
    assert run_cli(submission, phase, tmp_path / "b").code == 1
