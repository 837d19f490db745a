"""Parity with the TomoChallenge foam scorer (tomochallenge/tomochallenge_utils@fab535f
``foam_phantom_utils.metrics`` with ground truth from foam_ct_phantom ``genvol``): all 42
conformance submissions of the three phantoms, through the public command line.

Every submission is written in a different native format (the challenge's bit-packed HDF5,
plain HDF5, TIFF, NumPy, zarr, MetaImage, as booleans, uint8 and float), and is scored against
a phase that rasterises the void lists, or one that reads precomputed label volumes.
"""

import pytest
from helpers.grading import differences, run_cli, validate_metrics
from helpers.tomo import EXPECTED, PHANTOMS, SUBMISSIONS, case, foam_phase, write_volume

SCORES = EXPECTED["metric_order"]
COUNTS = tuple(EXPECTED["phantoms"]["foamA"]["submissions"]["perfect"]["spec_counts"])
FORMATS = [  # (suffix, dtype) per submission index, rotating through the intake paths
    (".packed.h5", "uint8"),
    (".tif", "uint8"),
    (".npy", "bool"),
    (".zarr", "uint8"),
    (".h5", "float32"),
    (".mha", "uint8"),
    (".npy", "float64"),
]


@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    """Each phantom twice (cases <phantom>-0 and <phantom>-1), so one run scores two submissions."""
    root = tmp_path_factory.mktemp("tomo_phases")
    return {
        "spheres": foam_phase(root / "spheres", copies=2),
        "labels": foam_phase(root / "labels", labels_format=".npy", copies=2),
        "labels_zarr": foam_phase(root / "labels_zarr", labels_format=".zarr", copies=2),
    }


PAIRS = [(i, SUBMISSIONS[i], SUBMISSIONS[i + 1]) for i in range(0, len(SUBMISSIONS), 2)]


@pytest.mark.parametrize("index,first,second", PAIRS, ids=[f"{a}+{b}" for _, a, b in PAIRS])
def test_submissions_match_reference(index, first, second, phases, tmp_path):
    phase = phases[("spheres", "labels", "labels_zarr")[(index // 2) % 3]]
    folder = tmp_path / "input"
    folder.mkdir()
    for copy, submission in enumerate((first, second)):
        suffix, dtype = FORMATS[(index + copy) % len(FORMATS)]
        for name in PHANTOMS:
            values = case(name)[f"sub__{submission}"].astype(dtype)
            if dtype == "uint8" and suffix not in (".packed.h5", ".mha"):
                values = values * 255  # any value > 0.5 is foam, as the reference binarises
            write_volume(folder / f"{name}-{copy}{suffix}", values)

    run = run_cli(folder, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    for copy, submission in enumerate((first, second)):
        for name in PHANTOMS:
            expected = EXPECTED["phantoms"][name]["submissions"][submission]
            got = metrics["case"][f"{name}-{copy}"]
            assert differences({k: got[k] for k in SCORES}, expected["values"], f"{name}/{submission}") == []
            assert differences(got["counts"], expected["spec_counts"], f"{name}/{submission}/counts", COUNTS) == []
    # the leaderboard is each score's mean over the phase's cases: foamC_nosmall's undefined
    # harmonic mean makes the mean harmonic mean null, the mean foam Dice is a number
    dice = [EXPECTED["phantoms"][n]["submissions"][s]["values"]["dice_foam"] for n in PHANTOMS for s in (first, second)]
    assert metrics["aggregates"]["dice_foam"] == pytest.approx(sum(dice) / len(dice), rel=1e-12)
    assert metrics["aggregates"]["harm_mean"] is None
