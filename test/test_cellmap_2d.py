"""2-D crops (the arrays of the reference's own 2-D tests and a larger 2-D instance crop,
test/fixtures/cellmap/cases/m_2d_crops) through the command line, against the reference run
unmodified at both versions: every value of its scores and result files. Until the instance
pass lifted a 2-D crop to one plane of a 3-D volume, every 2-D instance label was an internal
error."""

import json

import pytest
from helpers.grading import FIXTURES, differences, run_cli, validate_metrics
from test_cellmap_parity import COUNTS, _split, phase_yaml

CASE = "m_2d_crops"


@pytest.mark.parametrize("version", ["v2", pytest.param("head", marks=pytest.mark.slow)])
def test_2d_crops_score_as_the_reference_scores_them(version, cellmap_phase, tmp_path):
    expected = json.loads((FIXTURES / "cellmap" / "cases" / CASE / f"expected-{version}.json").read_text())
    phase, submission = cellmap_phase(CASE, phase_yaml(version))
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr[-3000:]
    metrics = run.metrics
    validate_metrics(metrics)
    assert not metrics["failures"]
    crops, aggregates = _split(expected["scores"])
    assert differences(metrics["case"], crops, "case", COUNTS) == []
    assert differences({k: v for k, v in metrics["aggregates"].items() if k in aggregates}, aggregates, "", COUNTS) == []
    for name, content in expected["result_files"].items():
        written = json.loads((tmp_path / "out" / name).read_text())
        written.pop("git_version", None)
        content = {k: v for k, v in content.items() if k != "git_version"}
        assert differences(written, content, name, COUNTS) == []


def test_2d_instance_arrays_of_the_reference_tests():
    """``score_instance`` on the arrays of the reference's tests/test_evaluate_metrics.py, with
    the values those tests assert (perfect match: 1, 0, 1, 1; a one-voxel shift: Hausdorff 1)."""
    import numpy as np

    from evaluation.suites.cellmap.options import Limits
    from evaluation.suites.cellmap.v2 import score_instance

    label = np.array([[0, 1, 1], [0, 2, 2]], dtype=np.int32)
    perfect = score_instance(label, label, (1.0, 1.0), Limits.reference())
    assert (perfect["mean_accuracy"], perfect["hausdorff_distance"]) == (1.0, 0.0)
    assert (perfect["normalized_hausdorff_distance"], perfect["combined_score"]) == (1.0, 1.0)
    truth = np.array([[1, 1, 0], [0, 0, 0]], dtype=np.int32)
    shifted = score_instance(np.array([[0, 2, 2], [0, 0, 0]], dtype=np.int32), truth, (1.0, 1.0), Limits.reference())
    assert 0.0 < shifted["mean_accuracy"] < 1.0 and shifted["hausdorff_distance"] == 1.0
