"""Platform adapters: Grand-Challenge job layout, CodaBench folders, detection."""

import json
import uuid
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from evaluation import platforms
from evaluation.contract import Result
from evaluation.errors import PhaseError, SubmissionError
from evaluation.phase import Phase
from evaluation.platforms.codabench import scores, summary_page


def _job(pk, image_name, key="interface", out_slug="segmentation", extra_output=False):
    def socket(slug, relative_path, super_kind="Image"):
        value = {"slug": slug, "kind": "Segmentation", "super_kind": super_kind, "relative_path": relative_path}
        if key == "socket":
            value["is_image_kind"] = super_kind == "Image"
        return value

    outputs = [
        {key: socket(out_slug, f"images/{out_slug}"), "image": {"pk": "x", "name": "out.mha"}, "file": None, "value": None}
    ]
    if extra_output:
        outputs.append({key: socket("metrics-json", "metrics.json", "Value"), "image": None, "file": None, "value": 3})
    return {
        "pk": pk,
        "status": "Succeeded",
        "inputs": [{key: socket("ct-image", "images/ct"), "image": {"pk": "i", "name": image_name}, "file": None, "value": None}],
        "outputs": outputs,
    }


def _grand_challenge_input(root, jobs, write_outputs=True):
    root.mkdir(parents=True, exist_ok=True)
    (root / "predictions.json").write_text(json.dumps(jobs))
    if write_outputs:
        for job in jobs:
            folder = root / job["pk"] / "output" / "images" / "segmentation"
            folder.mkdir(parents=True)
            sitk.WriteImage(sitk.GetImageFromArray(np.zeros((2, 3, 4), np.uint8)), str(folder / f"{uuid.uuid4()}.mha"))
    return root


PHASE = Phase(root=None, suite="x")


@pytest.mark.parametrize("key", ["interface", "socket"])
def test_jobs_are_matched_by_input_image_name(tmp_path, key):
    jobs = [_job("a1", "case_002.mha", key, extra_output=True), _job("b2", "case_001.nii.gz", key)]
    root = _grand_challenge_input(tmp_path / "input", jobs)
    platform = platforms.detect("auto", root, tmp_path / "gt", tmp_path / "out")
    assert platform.name == "grand-challenge"
    files = platform.submission(PHASE, tmp_path / "scratch").case_files()
    assert sorted(files) == ["case_001", "case_002"]
    assert files["case_002"].parent == root / "a1" / "output" / "images" / "segmentation"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda jobs: jobs[0].update(pk="../../etc"), "pk"),
        (lambda jobs: jobs[0]["outputs"][0]["interface"].update(relative_path="../../../secret"), "relative_path"),
        (lambda jobs: jobs[1]["inputs"][0]["image"].update(name="case_1.mha"), "same input image"),
        (lambda jobs: jobs[0].pop("outputs"), "outputs"),
        (lambda jobs: jobs[0]["inputs"][0].pop("interface"), "socket"),
    ],
)
def test_malformed_jobs_are_submission_errors(tmp_path, mutate, message):
    jobs = [_job("a1", "case_1.mha"), _job("b2", "case_2.mha")]
    root = _grand_challenge_input(tmp_path / "input", jobs)
    mutate(jobs)
    (root / "predictions.json").write_text(json.dumps(jobs))
    with pytest.raises(SubmissionError, match=message):
        platforms.detect("grand-challenge", root, None, tmp_path / "out").submission(PHASE, tmp_path / "s")


def test_missing_output_image_and_bad_json(tmp_path):
    root = _grand_challenge_input(tmp_path / "input", [_job("a1", "case_1.mha")], write_outputs=False)
    platform = platforms.detect("auto", root, None, tmp_path / "out")
    with pytest.raises(SubmissionError, match="expected one image"):
        platform.submission(PHASE, tmp_path / "s")
    (root / "predictions.json").write_text("{not json")
    with pytest.raises(SubmissionError, match="predictions.json: is not valid JSON"):
        platform.submission(PHASE, tmp_path / "s")


def test_ambiguous_sockets_need_the_phase_option(tmp_path):
    job = _job("a1", "case_1.mha")
    job["outputs"].append(
        {
            "interface": {"slug": "probabilities", "super_kind": "Image", "relative_path": "images/p"},
            "image": {"pk": "y", "name": "p.mha"},
        }
    )
    root = _grand_challenge_input(tmp_path / "input", [job])
    platform = platforms.detect("auto", root, None, tmp_path / "out")
    with pytest.raises(PhaseError, match="several image outputs"):
        platform.submission(PHASE, tmp_path / "s")
    chosen = Phase(root=None, suite="x", options={"grand_challenge": {"output": "segmentation"}})
    assert list(platform.submission(chosen, tmp_path / "s").case_files()) == ["case_1"]


def test_codabench_layout_and_scores(tmp_path):
    root = tmp_path / "input"
    (root / "ref").mkdir(parents=True)
    (root / "res").mkdir()
    (root / "ref" / "phase.yaml").write_text("suite: cellmap\n")
    (root / "res" / "metadata").write_text("written by the worker")
    (root / "res" / "case_1.npy").write_bytes(b"")
    platform = platforms.detect("codabench", root, None, tmp_path / "out")
    assert platform.name == "codabench" and platform.ground_truth == root / "ref"
    assert platform.submission_folder() == root / "res"
    assert scores({"a": 0.5, "b": float("nan"), "c": 1e12, "d": 2}) == {"a": 0.5, "d": 2.0}
    platform.publish(
        Result(metrics={}, leaderboard={"overall": 0.25}), {"suite": "x", "case": {"c1": {"dice": 0.25}}, "failures": []}
    )
    assert json.loads((tmp_path / "out" / "scores.json").read_text()) == {"overall": 0.25}
    assert "<td>0.25</td>" in (tmp_path / "out" / "detailed_results.html").read_text()
    assert "<script" not in summary_page({"<script>": 1.0}, {"case": {}})


def test_local_is_the_fallback(tmp_path):
    assert platforms.detect("auto", tmp_path, tmp_path, tmp_path).name == "local"


def test_an_upload_holding_ref_and_res_does_not_choose_its_ground_truth(tmp_path):
    """Grand-Challenge extracts a prediction upload into /input: one holding ref/phase.yaml
    and res/ must not be taken for CodaBench's mount, whose ref/ is trusted ground truth."""
    root = tmp_path / "input"
    (root / "ref").mkdir(parents=True)
    (root / "res").mkdir()
    (root / "ref" / "phase.yaml").write_text("suite: cellmap\n")
    platform = platforms.detect("auto", root, None, tmp_path / "out")
    assert platform.name == "local" and root not in platform.ground_truth.parents


def test_codabench_run_through_the_command_line(cellmap_phase, tmp_path):
    """CodaBench runs the scoring program's command (examples/codabench): the phase comes
    from input/ref, the worker's metadata file is ignored, scores.json is flat."""
    import shlex
    import shutil
    import subprocess
    import sys

    import yaml
    from helpers.grading import ROOT, validate_metrics

    phase, submission = cellmap_phase("b_split_merge_jitter")
    app = tmp_path / "app"
    shutil.copytree(phase, app / "input" / "ref")
    shutil.copytree(submission, app / "input" / "res")
    (app / "input" / "res" / "metadata").write_text("submitted-by: someone\n")
    shipped = yaml.safe_load((ROOT / "examples" / "codabench" / "scoring_program" / "metadata.yaml").read_text())["command"]
    command = [str(app / a[len("/app/") :]) if a.startswith("/app/") else a for a in shlex.split(shipped)]
    assert command[:3] == ["python3", "-m", "evaluation"]
    done = subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    metrics = json.loads((app / "output" / "metrics.json").read_text())
    validate_metrics(metrics)
    board = json.loads((app / "output" / "scores.json").read_text())
    assert board["overall_score"] == metrics["aggregates"]["overall_score"]
    assert board["mito_combined_score"] == metrics["aggregates"]["label_scores"]["mito"]["combined_score"]
    assert all(isinstance(v, float) for v in board.values())
    assert (app / "output" / "detailed_results.html").is_file()
    assert not (app / "output" / "metadata").exists()


GRAND_CHALLENGE = Path(__file__).resolve().parent.parent / "container" / "scenarios" / "grand-challenge-jobs"


def _linked_input(tmp_path: Path, source: Path) -> Path:
    """``source`` seen through a symbolic link, as Grand-Challenge's runtime presents /input."""
    import shutil

    shutil.copytree(source, tmp_path / "job-input")
    (tmp_path / "input").symlink_to(tmp_path / "job-input")
    return tmp_path / "input"


def _flattened_upload(tmp_path: Path) -> Path:
    """The jobs' predictions uploaded as prediction files, as the runtime extracts them:
    the case files at the top of /input (wrapping folder stripped) beside inputs.json."""
    import shutil

    folder = tmp_path / "upload"
    folder.mkdir()
    for job in json.loads((GRAND_CHALLENGE / "input" / "predictions.json").read_text()):
        case = next(i["image"]["name"] for i in job["inputs"] if i.get("image"))
        shutil.copy(next((GRAND_CHALLENGE / "input" / job["pk"] / "output").rglob("*.mha")), folder / case)
    (folder / "inputs.json").write_text("[]")
    return folder


@pytest.mark.parametrize("scenario", ["grand-challenge-jobs", "grand-challenge-upload"])
def test_grand_challenge_scenarios_match_their_expected_files(tmp_path, scenario):
    """The scenarios test.sh runs in the container, on the host, with /input a symlink: jobs
    listed in reverse case order with UUID-named outputs, or the same predictions uploaded as
    files; geometry carried by the .mha files."""
    from helpers.grading import differences, run_cli, validate_metrics

    source = GRAND_CHALLENGE / "input" if scenario.endswith("jobs") else _flattened_upload(tmp_path)
    run = run_cli(_linked_input(tmp_path, source), GRAND_CHALLENGE / "ground-truth", tmp_path / "out")
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    expected = json.loads((GRAND_CHALLENGE.parent / scenario / "expected" / "metrics.json").read_text())
    produced = {key: value for key, value in run.metrics.items() if key != "provenance"}  # names the build
    assert differences(produced, expected) == []


def test_grand_challenge_geometry_mismatch_is_a_submission_error(tmp_path):
    import shutil

    from helpers.grading import run_cli

    shutil.copytree(GRAND_CHALLENGE / "input", tmp_path / "input")
    output = next((tmp_path / "input").rglob("*.mha"))
    moved = sitk.ReadImage(str(output))
    moved.SetOrigin((0.0, 0.0, 0.0))
    sitk.WriteImage(moved, str(output))
    run = run_cli(tmp_path / "input", GRAND_CHALLENGE / "ground-truth", tmp_path / "out")
    assert run.code == 2
    assert "origin" in run.last_line and run.last_line.startswith("Submission rejected: ")
    assert run.metrics["failures"][0]["kind"] == "submission"


def test_a_platform_ground_truth_folder_is_found_or_refused_loudly(tmp_path):
    """Grand-Challenge extracts the phase tarball as it is (and creates the folder even when
    no tarball was uploaded): phase.yaml at the top, or in the one folder a wrapping folder
    gives; anything else is the organizer's error, never a silent fall back to the baked phase."""
    from evaluation.errors import PhaseError
    from evaluation.platforms.base import phase_folder

    folder = tmp_path / "ground_truth"
    assert phase_folder(folder, "x") is None
    folder.mkdir()
    assert phase_folder(folder, "x") is None
    (folder / "phase" / "labels").mkdir(parents=True)
    (folder / "phase" / "phase.yaml").write_text("suite: multiclass\n")
    (folder / "__MACOSX").mkdir()
    assert phase_folder(folder, "x") == folder / "phase"
    (folder / "second").mkdir()
    with pytest.raises(PhaseError, match="no phase.yaml at its top"):
        phase_folder(folder, "the ground-truth tarball")
    (folder / "phase.yaml").write_text("suite: multiclass\n")
    assert phase_folder(folder, "x") == folder


def test_scores_keys_fit_codabench_columns():
    """Column.key holds at most 36 characters: longer leaderboard keys are shortened by a
    stable, documented mapping, and two keys never share a column."""
    from evaluation.platforms.codabench import column_key

    board = {
        "overall_score": 0.5,
        "instance_normalized_hausdorff_distance": 0.25,
        "endoplasmic_reticulum_membrane_normalized_hausdorff_distance": 0.75,
        "instance_norm_hausdorff_distance": 0.125,
    }
    stored = scores(board)
    assert all(len(k) <= 36 for k in stored) and sorted(stored.values()) == sorted(board.values())
    assert stored["overall_score"] == 0.5 and stored["instance_norm_hausdorff_distance"] in (0.25, 0.125)
    assert column_key("instance_normalized_hausdorff_distance") == "instance_norm_hausdorff_distance"
    assert column_key("x" * 50) == column_key("x" * 50) and len(column_key("x" * 50)) == 36
