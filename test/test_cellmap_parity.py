"""Parity with the official CellMap evaluator on all 14 conformance cases, through the public
command line, as the platforms run it: v2 = 0f50f70 (the default) and head = 6b9ad68
(``version: head``)."""

import json
import zipfile

import pytest
from helpers.grading import FIXTURES, differences, run_cli, validate_metrics

VERSIONS = ("v2", "head")
EXPECTED = {v: json.loads((FIXTURES / "cellmap" / f"expected-{v}.json").read_text())["cases"] for v in VERSIONS}
COUNTS = ("num_voxels", "total_evals", "num_evals_done", "tp", "fp", "fn", "n_hausdorff")
CASES = [(version, case) for version in VERSIONS for case in sorted(EXPECTED[version])]


def phase_yaml(version: str) -> str:
    return "suite: cellmap\n" + ("" if version == "v2" else f"version: {version}\n")


def _split(scores: dict) -> tuple[dict, dict]:
    """The reference's flat result dict as (per-crop entries, aggregates)."""
    crops = {k: v for k, v in scores.items() if k.startswith("crop")}
    rest = {k: v for k, v in scores.items() if not k.startswith("crop") and k != "git_version"}
    return crops, rest


@pytest.mark.parametrize(("version", "case"), CASES)
def test_case_matches_reference(version, case, cellmap_phase, tmp_path):
    phase, submission = cellmap_phase(case, phase_yaml(version))
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    assert metrics["reference"]["version"] == version

    crops, aggregates = _split(EXPECTED[version][case]["scores"])
    assert differences(metrics["case"], crops, "case", COUNTS) == []
    got_aggregates = {k: v for k, v in metrics["aggregates"].items() if k in aggregates}
    assert differences(got_aggregates, aggregates, "aggregates", COUNTS) == []

    # The reference's own result files, written beside metrics.json, match too.
    files = EXPECTED[version][case]["result_files"]
    for name, expected in files.items():
        written = json.loads((tmp_path / "out" / name).read_text())
        written.pop("git_version", None)
        expected = {k: v for k, v in expected.items() if k != "git_version"}
        assert differences(written, expected, name, COUNTS) == []


def test_zipped_submission_scores_like_the_folder(cellmap_phase, tmp_path):
    """The reference was run on the zipped zarr; the zip and the folder must give one result."""
    phase, submission = cellmap_phase("b_split_merge_jitter")
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    with zipfile.ZipFile(zipped / "submission.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted((submission / "submission.zarr").rglob("*")):
            archive.write(path, path.relative_to(submission / "submission.zarr").as_posix())
    from_zip = run_cli(zipped, phase, tmp_path / "out-zip")
    from_folder = run_cli(submission / "submission.zarr", phase, tmp_path / "out-folder")
    assert from_zip.code == from_folder.code == 0, from_zip.stderr + from_folder.stderr
    assert from_zip.metrics["case"] == from_folder.metrics["case"]
    assert from_zip.metrics["aggregates"] == from_folder.metrics["aggregates"]
