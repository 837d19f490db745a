"""Parity with the TomoChallenge foam scorer (tomochallenge/tomochallenge_utils@fab535f
``foam_phantom_utils.metrics`` with ground truth from foam_ct_phantom ``genvol``): all 42
conformance submissions of the three phantoms, through the public command line.

Every submission is written in a different native format (the challenge's bit-packed HDF5,
plain HDF5, TIFF, NumPy, zarr, MetaImage, as booleans, uint8 and float), and is scored against
a phase that rasterises the void lists, or one that reads precomputed label volumes.
"""

import pytest

from conftest import differences, run_cli, validate_metrics
from tomo_helpers import EXPECTED, PHANTOMS, SUBMISSIONS, case, foam_phase, write_volume

SCORES = EXPECTED["metric_order"]
COUNTS = tuple(EXPECTED["phantoms"]["foamA"]["submissions"]["perfect"]["spec_counts"])
FORMATS = [  # (suffix, dtype) per submission index, rotating through the intake paths
    (".packed.h5", "uint8"), (".tif", "uint8"), (".npy", "bool"), (".zarr", "uint8"), (".h5", "float32"),
    (".mha", "uint8"), (".npy", "float64"),
]


@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    root = tmp_path_factory.mktemp("tomo_phases")
    return {
        "spheres": foam_phase(root / "spheres"),
        "labels": foam_phase(root / "labels", labels_format=".npy"),
        "labels_zarr": foam_phase(root / "labels_zarr", labels_format=".zarr"),
    }


@pytest.mark.parametrize("index,submission", list(enumerate(SUBMISSIONS)))
def test_submission_matches_reference(index, submission, phases, tmp_path):
    suffix, dtype = FORMATS[index % len(FORMATS)]
    phase = phases[("spheres", "labels", "labels_zarr")[index % 3]]
    folder = tmp_path / "input"
    folder.mkdir()
    for name in PHANTOMS:
        volume = case(name)[f"sub__{submission}"]
        values = volume.astype(dtype)
        if dtype == "uint8" and suffix not in (".packed.h5", ".mha"):
            values = values * 255  # any value > 0.5 is foam, as the reference binarises
        write_volume(folder / f"{name}{suffix}", values)

    run = run_cli(folder, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    for name in PHANTOMS:
        expected = EXPECTED["phantoms"][name]["submissions"][submission]
        got = metrics["case"][name]
        assert differences({k: got[k] for k in SCORES}, expected["values"], name) == []
        assert differences(got["counts"], expected["spec_counts"], f"{name}/counts", COUNTS) == []
    # One phase, three phantoms: the leaderboard is each score's mean over them.
    if any(EXPECTED["phantoms"][n]["submissions"][submission]["values"]["harm_mean"] is None for n in PHANTOMS):
        assert metrics["aggregates"]["harm_mean"] is None
