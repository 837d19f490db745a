"""The annotators suite through the command line: layouts of phase and submission, missing and
broken files, options, and the reports people read (CSV, PNG, HTML) on the bundled example."""

import csv
import json
import re
import shutil
import zipfile

import numpy as np
import pytest
import tifffile
from helpers.annotators_files import EXPECTED, arrays, write_image, write_phase, write_predictions
from helpers.grading import ROOT, differences, run_cli, run_on_a_platform, validate_metrics

EXAMPLE = ROOT / "examples" / "annotators"
NO_REPORT = "suite: annotators\neval_class: 1\nreport: false\ndilation: false\n"
TWO = ["blob3", "empty_pred"]


def _row(run, image, model="submission"):
    row = dict(run.metrics["case"][image][model])
    row.pop("status")
    return row


def _rejected(run, phase, *words):
    assert run.code == 2, run.stderr
    assert run.last_line.startswith("Submission rejected: ")
    for word in words:
        assert word in run.last_line, run.last_line
    assert str(phase) not in run.last_line


# --------------------------------------------------------------------------------------------
# The bundled example and its reports


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    out = tmp_path_factory.mktemp("example") / "out"
    return run_cli(EXAMPLE / "submission", EXAMPLE / "phase", out)


def test_example_scores_both_models_and_ranks_them(example):
    assert example.code == 0, example.stderr
    metrics = example.metrics
    validate_metrics(metrics)
    aggregates = metrics["aggregates"]
    assert sorted(aggregates["models"]) == ["baseline", "unet"]
    assert aggregates["ranked_model"] == "unet" and aggregates["ranking_column"] == "Staple_dice"
    assert aggregates["mean"] == aggregates["models"]["unet"]["mean"]
    assert aggregates["models"]["baseline"]["mean"]["Staple_dice"] < aggregates["mean"]["Staple_dice"]
    assert set(metrics["case"]) == {f"vessels_0{i}" for i in range(1, 6)}
    assert metrics["reference"]["settings"]["dilation_radius"] == 3 and metrics["reference"]["settings"]["eval_class"] == 2


def test_example_writes_the_tables(example):
    out = example.output
    for name in (
        "model_evaluation_unet.csv",
        "model_evaluation_baseline.csv",
        "mean_summary.csv",
        "std_summary.csv",
        "variance_summary.csv",
        "min_max_summary.csv",
        "summary.csv",
    ):
        assert (out / name).is_file(), name
    with open(out / "mean_summary.csv", newline="") as f:
        means = {r["id"]: r for r in csv.DictReader(f)}
    unet = example.metrics["aggregates"]["models"]["unet"]["mean"]
    assert float(means["unet"]["Staple_dice"]) == unet["Staple_dice"]
    assert list(means["unet"])[:2] == ["id", "A_jaccard"]  # columns after 'Model', as the tool summarises
    with open(out / "min_max_summary.csv", newline="") as f:
        table = {r["Statistic"]: r for r in csv.DictReader(f)}
    assert table["max_mean"]["Staple_dice"] == "unet" and table["min_mean"]["Staple_dice"] == "baseline"
    # the annotators' own agreement does not depend on the model
    assert table["max_mean"]["annotators_agree_dice"] == "independent of model election"
    with open(out / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["statistic"]) for r in rows] == [
        (m, s) for m in ("baseline", "unet") for s in ("mean", "std", "min", "max")
    ]


def test_example_writes_plots_and_a_self_contained_report(example):
    out = example.output
    drawn = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.svg"))
    families = (
        "findings",
        "jaccard",
        "dice",
        "hausdorff",
        "msd",
        "agreement_overlap",
        "agreement_hausdorff",
        "agreement_msd",
        "staple_sensitivity",
        "staple_specificity",
    )
    for model in ("unet", "baseline"):
        for family in families:
            for kind in ("line", "box", "violin"):
                assert f"plots/{model}/{family}_{kind}.svg" in drawn
    assert {f"plots/models_{m}.svg" for m in ("jaccard", "dice", "hausdorff", "msd")} <= set(drawn)
    assert len(drawn) == 2 * 30 + 4 and not list(out.rglob("*.png"))
    for name in drawn:
        assert (out / name).read_text().startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    page = (out / "report.html").read_text()
    assert all((out / name).read_text() in page for name in drawn)  # every chart inline
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing loaded from elsewhere
    assert "Staple_dice" in page and "unet (ranked)" in page and "vessels_03" in page


# --------------------------------------------------------------------------------------------
# Submission layouts


def test_predictions_at_the_root_zipped_or_in_a_wrapper_folder_score_alike(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO)
    flat = write_predictions(tmp_path / "flat", cases=TWO, suffix="")
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    with zipfile.ZipFile(zipped / "predictions.zip", "w") as archive:
        for path in sorted(flat.iterdir()):
            archive.write(path, f"my_predictions/{path.name}")  # a zipped folder: one wrapper level
    runs = [run_cli(flat, phase, tmp_path / "out-flat"), run_cli(zipped, phase, tmp_path / "out-zip")]
    assert [r.code for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert sorted(runs[0].metrics["case"]["blob3"]) == ["submission"]
    assert sorted(runs[1].metrics["case"]["blob3"]) == ["predictions"]  # the folder name after its last '_'
    for image in TWO:
        assert differences(_row(runs[0], image), EXPECTED[image]["tool_no_dilation"], image) == []
        assert _row(runs[1], image, "predictions") == _row(runs[0], image)


def test_missing_prediction_scores_as_empty_or_is_skipped(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO)
    submission = write_predictions(tmp_path / "input" / "run_m1", cases=["blob3"])
    (submission / "notes.tif").write_bytes(b"not an image of this phase")
    run = run_cli(submission.parent, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    missing = run.metrics["case"]["empty_pred"]["m1"]
    assert missing["status"] == "missing"
    assert missing["A0_jaccard"] == 0.0 and missing["A0_hausdorff"] == 100.0 and missing["Model_count"] == 0
    assert run.metrics["aggregates"]["ignored_files"] == {"m1": ["notes.tif"]}
    assert run.metrics["aggregates"]["scored_images"] == {"m1": 2}

    skip_phase = write_phase(tmp_path / "phase-skip", NO_REPORT + "missing_prediction: skip\n", cases=TWO)
    skipped = run_cli(submission.parent, skip_phase, tmp_path / "out-skip")
    assert skipped.code == 0, skipped.stderr
    assert "empty_pred" not in skipped.metrics["case"]
    assert skipped.metrics["aggregates"]["skipped_images"] == {"m1": ["empty_pred"]}
    assert skipped.metrics["aggregates"]["mean"]["Staple_dice"] == EXPECTED["blob3"]["tool_no_dilation"]["Staple_dice"]


def test_unusable_submissions_are_rejected_with_a_reason(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO)
    nothing = tmp_path / "nothing"
    write_image(nothing / "a_model" / "other_image.tif", np.zeros((96, 96), np.uint8))
    _rejected(run_cli(nothing, phase, tmp_path / "o1"), phase, "a_model", "none of its files is named after a test image")

    twins = tmp_path / "twins"
    write_predictions(twins / "run1_unet", cases=TWO)
    write_predictions(twins / "run2_unet", cases=TWO)
    _rejected(run_cli(twins, phase, tmp_path / "o2"), phase, "run1_unet", "run2_unet", "'unet'")

    double = write_predictions(tmp_path / "double", cases=TWO)
    write_image(double / "blob3.png", arrays("blob3")["pred"])
    _rejected(run_cli(double, phase, tmp_path / "o3"), phase, "blob3", "keep one")

    pair = tmp_path / "pair"
    write_predictions(pair / "run_a", cases=TWO)
    write_predictions(pair / "run_b", cases=TWO)
    limited = write_phase(tmp_path / "phase-one-model", NO_REPORT + "max_models: 1\n", cases=TWO)
    _rejected(run_cli(pair, limited, tmp_path / "o4"), phase, "2 models", "at most 1")


def test_a_broken_prediction_fails_alone(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO)
    submission = write_predictions(tmp_path / "input", cases=TWO)
    wrong = next(submission.glob("empty_pred*"))
    wrong.unlink()
    write_image(submission / "empty_pred.tif", np.zeros((90, 96), np.uint8))
    run = run_cli(submission, phase, tmp_path / "out")
    _rejected(run, phase, "empty_pred.tif", "shape (1, 90, 96)", "(1, 96, 96)")
    validate_metrics(run.metrics)
    assert run.metrics["failures"][0]["kind"] == "submission"
    assert run.metrics["case"]["empty_pred"]["submission"]["status"] == "failed"
    assert differences(_row(run, "blob3"), EXPECTED["blob3"]["tool_no_dilation"], "blob3") == []


# --------------------------------------------------------------------------------------------
# Ground-truth layout and options


def test_annotator_without_a_file_counts_as_empty(tmp_path):
    """SPEC 2.5: the tool writes an all-zero file; the suite reads the absence as empty."""
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=["one_empty_annotator", "blob3"])
    (phase / "annotations" / "annotator_A1" / "one_empty_annotator.png").unlink()
    run = run_cli(write_predictions(tmp_path / "input", cases=["one_empty_annotator", "blob3"]), phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    expected = EXPECTED["one_empty_annotator"]["tool_no_dilation"]
    assert differences(_row(run, "one_empty_annotator"), expected, "one_empty_annotator") == []


def test_eval_class_picks_the_label_of_a_label_map(tmp_path):
    """The tool's default class 2 on label maps (1 = other tissue) equals class 1 on binary masks."""
    phase = write_phase(tmp_path / "phase", "suite: annotators\nreport: false\ndilation: false\n", cases=TWO)

    def label_map(pred):
        labels = pred.astype(np.uint8) * 2
        labels[:5, :] = np.where(labels[:5, :] == 0, 1, labels[:5, :])  # tissue that is not vessel
        return labels

    run = run_cli(write_predictions(tmp_path / "input", cases=TWO, transform=label_map), phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    for image in TWO:
        assert differences(_row(run, image), EXPECTED[image]["tool_no_dilation"], image) == []


def test_one_annotator_keeps_the_tools_reduced_columns(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO, folders=("reader_A0",))
    run = run_cli(write_predictions(tmp_path / "input", cases=TWO), phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    expected = EXPECTED["blob3"]["tool_no_dilation"]
    row = _row(run, "blob3")
    assert row == {
        "counts": {"A0": 1},
        "Model_count": 1,
        **{f"A0_{m}": expected[f"A0_{m}"] for m in ("jaccard", "dice", "hausdorff", "msd")},
    }
    assert run.metrics["aggregates"]["ranking_column"] == "A0_dice"
    with open(run.output / "model_evaluation_submission.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header == ["image_id", "A0", "Model", "A0_jaccard", "A0_dice", "A0_hausdorff", "A0_msd"]
    assert (run.output / "single_summary.csv").read_text().splitlines()[0] == "Statistic,A0_jaccard,A0_dice,A0_hausdorff,A0_msd"


def test_annotator_order_and_selection_from_the_phase(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT + "annotators: [annotator_A2, annotator_A0]\n", cases=["blob3"])
    run = run_cli(write_predictions(tmp_path / "input", cases=["blob3"]), phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    row = _row(run, "blob3")
    assert list(row["counts"]) == ["A2", "A0", "Union", "Intersection", "Staple"]
    assert row["A0_jaccard"] == EXPECTED["blob3"]["tool_no_dilation"]["A0_jaccard"]
    assert "A1_jaccard" not in row


def test_3d_stacks_are_scored_in_3d(tmp_path):
    """A (Z, Y, X) TIFF stack of two copies of a case: overlap and distances as for one slice."""
    phase, submission = tmp_path / "phase", tmp_path / "input"
    data = arrays("blob3")
    for i in range(3):
        write_image(phase / "annotations" / f"annotator_A{i}" / "stack.tif", np.stack([data[f"ann{i}"]] * 2))
    write_image(submission / "stack_segPred.tif", np.stack([data["pred"]] * 2))
    (phase / "phase.yaml").write_text(NO_REPORT)
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    row, expected = _row(run, "stack"), EXPECTED["blob3"]["tool_no_dilation"]
    for key in ("A0_jaccard", "Staple_dice", "A1_hausdorff", "annotators_agree_msd", "Model_count"):
        assert row[key] == pytest.approx(expected[key], rel=1e-12), key
    assert row["staple_fg_pixels"] == 2 * expected["staple_fg_pixels"]


def test_broken_phases_are_internal_errors(tmp_path):
    submission = write_predictions(tmp_path / "input", cases=["blob3"])
    missing = tmp_path / "missing"
    missing.mkdir()
    (missing / "phase.yaml").write_text("suite: annotators\n")
    assert run_cli(submission, missing, tmp_path / "o1").code == 1

    bad_option = write_phase(tmp_path / "bad", "suite: annotators\ndilation: {radius: 0}\n", cases=["blob3"])
    run = run_cli(submission, bad_option, tmp_path / "o2")
    assert run.code == 1 and "dilation" in run.stdout

    dotted = write_phase(tmp_path / "dotted", NO_REPORT, cases=["blob3"])
    for folder in (dotted / "annotations").iterdir():
        for path in folder.iterdir():
            path.rename(path.with_name("blob.3" + path.suffix))
    assert run_cli(submission, dotted, tmp_path / "o3").code == 1


def test_an_unreadable_annotation_is_the_phases_fault(tmp_path):
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=["blob3"])
    (phase / "annotations" / "annotator_A0" / "blob3.tif").write_bytes(b"II*\x00garbage")
    run = run_on_a_platform(write_predictions(tmp_path / "input", cases=["blob3"]), phase, tmp_path / "out")
    assert run.code == 1
    assert run.metrics["failures"][0]["kind"] == "internal"
    assert "annotation" not in run.last_line  # participants see the neutral line only


def test_tiff_metadata_does_not_matter(tmp_path):
    """A prediction saved as ImageJ/OME-style TIFF with extra singleton axes still reads as Z, Y, X."""
    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=["blob3"])
    submission = tmp_path / "input"
    submission.mkdir()
    tifffile.imwrite(submission / "blob3_segPred.tif", arrays("blob3")["pred"][None, None], imagej=True)
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    assert differences(_row(run, "blob3"), EXPECTED["blob3"]["tool_no_dilation"], "blob3") == []
    shutil.rmtree(submission)
    assert json.loads((run.output / "metrics.json").read_text())["suite"] == "annotators"


def test_platform_named_outputs_are_matched_by_case_name(tmp_path):
    """Grand-Challenge names each job's output after its input image, whatever the file is called."""
    from evaluation import phase as phases
    from evaluation.contract import Resources
    from evaluation.submission import Submission
    from evaluation.suites import get

    phase = write_phase(tmp_path / "phase", NO_REPORT, cases=TWO)
    outputs = write_predictions(tmp_path / "jobs", cases=TWO, suffix="_output")
    named = {case: next(outputs.glob(f"{case}_output.*")) for case in TWO}
    named["unrelated"] = named["blob3"]
    plan = get("annotators").plan(
        Submission(outputs, named_files=named), phases.load(phase), Resources(workers=1, memory_bytes=1 << 30)
    )
    assert {t.key: t.payload.prediction for t in plan.tasks} == {f"submission/{c}": str(named[c]) for c in TWO}
    assert plan.context.ignored == {"submission": [named["blob3"].name]}
