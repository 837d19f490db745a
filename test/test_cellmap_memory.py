"""The planner's memory estimate of every CellMap task bounds the peak its worker measured
(``bench/cellmap_test_set.py`` checks the same on the whole synthetic test set): one crop with
each kind of pair (large and many small instances, native and resampled semantic labels, an
instance label at twice the voxel size, wide submitted dtypes), scored through the CLI."""

import json

import numpy as np
import pytest
import zarr
from helpers.grading import run_cli

from evaluation.runner import WORKER_BASELINE_BYTES

EDGE = 320
VOXEL = [8.0, 8.0, 8.0]


def _balls(rng, count, radius, dtype):
    volume = np.zeros((EDGE,) * 3, dtype)
    for label in range(1, count + 1):
        r = rng.uniform(*radius)
        centre = rng.uniform(r, EDGE - r, 3)
        box = tuple(slice(int(c - r), min(EDGE, int(c + r) + 2)) for c in centre)
        grid = np.ogrid[box]
        volume[box][sum((g - c) ** 2 for g, c in zip(grid, centre)) <= r * r] = label
    return volume


def _write(root, label, data, voxel_size):
    array = zarr.open_group(str(root), mode="a", zarr_format=2).create_array(
        f"crop1/{label}", shape=data.shape, dtype=data.dtype, chunks=(64, 64, 64)
    )
    array[...] = data
    array.attrs.update({"voxel_size": voxel_size, "translation": [0.0, 0.0, 0.0]})


@pytest.mark.slow
def test_every_task_peaks_below_its_estimate(tmp_path):
    rng = np.random.default_rng(0)
    phase, submission = tmp_path / "phase", tmp_path / "input" / "submission.zarr"
    coarse = [2 * v for v in VOXEL]
    pairs = {  # label: (truth, prediction, prediction's voxel size)
        "nuc": (_balls(rng, 6, (20, 40), np.uint64), None, VOXEL),
        "mito": (_balls(rng, 300, (3, 8), np.uint32), None, VOXEL),
        "ves": (_balls(rng, 200, (2, 5), np.uint32), None, coarse),
        "cyto": (_balls(rng, 5, (20, 50), np.uint8) > 0, None, VOXEL),
        "er": (_balls(rng, 40, (5, 15), np.uint8) > 0, None, coarse),
    }
    dtypes = {"nuc": np.uint16, "mito": np.uint64, "ves": np.uint32, "cyto": np.uint8, "er": bool}
    for label, (truth, _, voxel_size) in pairs.items():
        _write(phase / "truth.zarr", label, truth.astype(np.uint8) if truth.dtype == bool else truth, VOXEL)
        prediction = np.roll(truth, tuple(rng.integers(-2, 3, 3)), axis=(0, 1, 2)).astype(dtypes[label])
        _write(submission, label, prediction[::2, ::2, ::2] if voxel_size is coarse else prediction, voxel_size)
    rows = "".join(f"1,test,{label},[8.0;8.0;8.0],[0.0;0.0;0.0],[{EDGE};{EDGE};{EDGE}]\n" for label in pairs)
    (phase / "manifest.csv").write_text("crop_name,dataset,class_label,voxel_size,translation,shape\n" + rows)
    (phase / "phase.yaml").write_text("suite: cellmap\n")

    run = run_cli(
        submission.parent, phase, tmp_path / "out", "--workers", "2", cold=True
    )  # a worker forked from a fresh interpreter, as in the image
    assert run.code == 0, run.stdout[-2000:]
    finished = [event for event in map(_event, run.stdout.splitlines()) if event.get("event") == "task_finished"]
    assert sorted(e["task"] for e in finished) == sorted(f"crop1/{label}" for label in pairs)
    for event in finished:
        assert event["ok"], event
        bound = event["estimate_mb"] + WORKER_BASELINE_BYTES // 2**20
        assert event["peak_rss_mb"] <= bound, f"{event['task']}: peak {event['peak_rss_mb']} MB over {bound} MB"


def _event(line: str) -> dict:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return {}
    return event if isinstance(event, dict) else {}
