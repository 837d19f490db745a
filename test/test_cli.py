"""The command line as participants and organizers meet it: exit codes, the last stderr
line, nothing of the ground truth in any message, every metrics.json schema-valid."""

import json
import shutil
import zipfile

import pytest
from helpers.grading import ROOT, differences, run_cli, validate_metrics


def _assert_rejected(run, phase, *words):
    assert run.code == 2, run.stderr
    assert run.last_line.startswith("Submission rejected: ")
    for word in words:
        assert word in run.last_line
    assert not run.last_line.startswith("Traceback")
    assert str(phase) not in run.stderr + run.stdout  # no ground-truth path leaks
    assert "truth.zarr" not in run.last_line


def test_empty_folder_is_rejected(cellmap_phase, tmp_path):
    phase, _ = cellmap_phase("a_perfect_instance")
    empty = tmp_path / "empty"
    empty.mkdir()
    run = run_cli(empty, phase, tmp_path / "out")
    _assert_rejected(run, phase, "empty")
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_zip_with_path_traversal_is_rejected(cellmap_phase, tmp_path):
    phase, _ = cellmap_phase("a_perfect_instance")
    folder = tmp_path / "sub"
    folder.mkdir()
    with zipfile.ZipFile(folder / "submission.zip", "w") as archive:
        archive.writestr("crop101/.zgroup", "{}")
        archive.writestr("../../escaped.txt", "x")
    run = run_cli(folder, phase, tmp_path / "out")
    _assert_rejected(run, phase, "../../escaped.txt", "outside")
    assert not list(tmp_path.rglob("escaped.txt"))


def test_zip_without_a_zarr_is_rejected(cellmap_phase, tmp_path):
    phase, _ = cellmap_phase("a_perfect_instance")
    folder = tmp_path / "sub"
    folder.mkdir()
    with zipfile.ZipFile(folder / "predictions.zip", "w") as archive:
        archive.writestr("readme.txt", "my predictions")
    _assert_rejected(run_cli(folder, phase, tmp_path / "out"), phase, "holds no zarr")


def test_groups_that_name_no_test_crop_are_rejected(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    (submission / "submission.zarr" / "crop101").rename(submission / "submission.zarr" / "volume_a")
    _assert_rejected(run_cli(submission, phase, tmp_path / "out"), phase, "no test crop")


def test_unsafe_codec_is_refused_before_decoding(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    meta = submission / "submission.zarr" / "crop101" / "mito" / ".zarray"
    spec = json.loads(meta.read_text())
    spec["filters"] = [{"id": "pickle"}]
    meta.write_text(json.dumps(spec))
    run = run_cli(submission, phase, tmp_path / "out")
    _assert_rejected(run, phase, "crop101/mito", "pickle")


def test_one_corrupt_label_keeps_every_other_result(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("b_split_merge_jitter")
    chunk = next((submission / "submission.zarr" / "crop102" / "mito").rglob("0/0/0"))
    chunk.write_bytes(b"garbage" * 10)
    run = run_cli(submission, phase, tmp_path / "out")
    _assert_rejected(run, phase, "crop102/mito", "cannot be read")
    metrics = run.metrics
    validate_metrics(metrics)
    assert [f["case"] for f in metrics["failures"]] == ["crop102/mito"]
    assert metrics["failures"][0]["kind"] == "submission"
    assert metrics["case"]["crop102"]["mito"]["status"] == "failed"
    assert metrics["case"]["crop114"]["mito"]["status"] == "scored"
    assert metrics["case"]["crop102"]["mito_mem"]["iou"] == pytest.approx(0.4522978475858057, rel=1e-12)


def test_invalid_phase_is_an_internal_error_named_only_to_the_organizer(cellmap_phase, tmp_path):
    """Run locally (the organizer's machine), the last line names what is wrong with the phase;
    on a platform, where participants read the last line, it stays neutral, the cause in the log."""
    phase, submission = cellmap_phase("a_perfect_instance", "suite: cellmap\nratio_cutof: 3\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 1
    assert run.last_line.startswith("Phase or grader error: phase.yaml is invalid") and "ratio_cutof" in run.last_line
    codabench = tmp_path / "codabench"
    shutil.copytree(phase, codabench / "input" / "ref")
    shutil.copytree(submission, codabench / "input" / "res")
    run = run_cli(codabench / "input", codabench / "input" / "ref", tmp_path / "out2", "--platform", "codabench")
    assert run.code == 1
    assert "internal error" in run.last_line and "ratio_cutof" not in run.last_line
    assert "ratio_cutof" in run.stdout  # the organizer finds the cause in the log (on stdout)


def test_phase_options_change_the_scoring(cellmap_phase, tmp_path):
    """h / crop115 ves is scored normally by default; with a ratio cutoff of 0 every crop
    that has predictions becomes pathological."""
    phase, submission = cellmap_phase(
        "h_too_many_instances",
        "suite: cellmap\nfinal_instance_ratio_cutoff: 0\ninitial_instance_ratio_cutoff: 0\nworkers: 1\n",
    )
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    assert run.metrics["case"]["crop115"]["ves"]["status"] == "skipped_too_many_instances"


def test_bundled_example_grades_as_the_readme_says(tmp_path):
    run = run_cli(ROOT / "examples" / "cellmap" / "submission", ROOT / "ground-truth", tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    assert 0 < metrics["aggregates"]["overall_score"] < 1
    for name in ("results.json", "results_submitted_only.json"):
        assert (tmp_path / "out" / name).is_file()


def test_help_explains_the_contract():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "evaluation", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0
    for word in ("--input", "--ground-truth", "--output", "phase.yaml", "Exit status", "cellmap"):
        assert word in done.stdout


def test_output_folder_holds_only_what_we_write(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    out = tmp_path / "out"
    assert run_cli(submission, phase, out).code == 0
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "results.json", "results_submitted_only.json"]
    shutil.rmtree(out)


def test_container_expectations_are_what_the_grader_writes(tmp_path):
    """test.sh compares the image's outputs with committed files; they must be exactly what the
    command line writes for the same inputs (and the baked example is conformance case b)."""
    baked = run_cli(ROOT / "examples" / "cellmap" / "submission", ROOT / "ground-truth", tmp_path / "out")
    assert baked.code == 0
    expected = json.loads((ROOT / "container" / "scenarios" / "baked" / "expected" / "metrics.json").read_text())
    produced = {key: value for key, value in baked.metrics.items() if key != "provenance"}  # names the build
    assert differences(produced, expected) == []
    reference = json.loads((ROOT / "test" / "fixtures" / "cellmap" / "expected-v2.json").read_text())
    assert expected["aggregates"]["overall_score"] == pytest.approx(
        reference["cases"]["b_split_merge_jitter"]["scores"]["overall_score"], rel=1e-12
    )


def test_every_suite_named_by_the_schema_is_a_registered_module():
    from evaluation import suites

    for name in suites.names():
        suite = suites.get(name)
        assert suite.name == name and suite.ranking, name


def test_a_case_too_large_for_the_phases_memory_is_the_organizers_fault(tmp_path):
    """The prediction has exactly the truth's shape and the smallest type: the phase's memory
    setting, not the upload, is what does not fit (exit 1, the cause named to the organizer)."""
    import numpy as np

    phase, upload = tmp_path / "phase", tmp_path / "upload"
    (phase / "labels").mkdir(parents=True)
    upload.mkdir()
    labels = np.zeros((200, 200, 200), np.uint8)
    labels[80:120, 80:120, 80:120] = 1
    np.save(phase / "labels" / "case_0.npy", labels)
    np.save(upload / "case_0.npy", labels)
    (phase / "phase.yaml").write_text("suite: segmentation\nclasses: {lesion: 1}\nmetrics: [dice]\nmemory_limit_mb: 256\n")
    run = run_cli(upload, phase, tmp_path / "out")
    assert run.code == 1
    assert run.last_line.startswith("Case case_0 failed (internal): case_0: the phase's case needs about")
    assert run.metrics["failures"][0]["kind"] == "internal"


def test_an_infinite_distance_reads_apart_from_an_undefined_one(tmp_path):
    """MONAI's HD of an empty prediction is infinite; of a class absent from both, NaN:
    both are null in metrics.json (strict JSON, a number or null where platforms read), and
    only the infinite one is listed under ``infinities``."""
    import numpy as np

    phase, upload = tmp_path / "phase", tmp_path / "upload"
    (phase / "labels").mkdir(parents=True)
    upload.mkdir()
    truth = np.zeros((8, 16, 16), np.uint8)
    truth[2:6, 4:10, 4:10] = 1
    np.save(phase / "labels" / "case_0.npy", truth)
    np.save(upload / "case_0.npy", np.zeros_like(truth))
    (phase / "phase.yaml").write_text("suite: segmentation\nclasses: {lesion: 1, absent: 2}\nmetrics: [hd]\ndefinition: monai\n")
    run = run_cli(upload, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    classes = run.metrics["case"]["case_0"]["classes"]
    assert classes["lesion"]["hd"] is None and classes["absent"]["hd"] is None
    assert run.metrics["infinities"]["case"]["case_0"]["classes"] == {"lesion": {"hd": "+inf"}}
    validate_metrics(run.metrics)


@pytest.mark.parametrize("partial", [False, True])
def test_a_run_past_its_time_limit_ends_before_it_with_one_line(tmp_path, partial):
    """A run time limit the work does not fit (1 s, less the time kept for writing: nothing can
    start): the run ends at once with the line saying what was scored and the limit; no score
    unless the phase asks for partial results."""
    import sys

    sys.path.insert(0, str(ROOT / "examples" / "toy"))
    from make_toy_phase import main as make_toy

    make_toy(tmp_path / "toy")
    phase = tmp_path / "toy" / "phase"
    extra = "run_time_limit_s: 1\n" + ("partial_results: true\n" if partial else "")
    (phase / "phase.yaml").write_text((phase / "phase.yaml").read_text() + extra)
    run = run_cli(tmp_path / "toy" / "uploads" / "team-a", phase, tmp_path / "out")
    assert run.last_line.startswith("Evaluation stopped at the run's time limit of 1 s: 0 of 3 cases were scored")
    if partial:
        assert run.code == 0 and run.metrics["partial"] is True and run.metrics["case"] == {}
        assert [f["kind"] for f in run.metrics["failures"]] == ["deadline"] * 3
        validate_metrics(run.metrics)
    else:
        assert run.code == 1 and not (tmp_path / "out" / "metrics.json").exists()
