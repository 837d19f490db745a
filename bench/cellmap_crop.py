"""Benchmark: one 256^3 CellMap crop with ~476 instances, scored through the cellmap suite.

The official evaluator needs 1249 s and 12 GB for such a crop (almost all of it per-instance
Hausdorff over ROIs padded by half the crop). This script generates a seeded crop (uint32
ellipsoids; the prediction is the truth perturbed with jitter, splits, bridged merges, drops
and false positives), writes both as zarr, and prints:

- the floor: one ``np.bincount`` pass over the volume;
- the suite's scoring of the pair (zarr read, alignment, cc3d, matching, Hausdorff, VoI) in a
  fresh process: wall seconds, peak RSS, ratio to the floor;
- the whole command line (``python -m evaluation``) on the same data;
- a check against the slow path: the reference's padded-ROI Hausdorff algorithm on a sample
  of instances (``--verify all`` for every instance: about 20 minutes).

    python bench/cellmap_crop.py [--size 256] [--instances 476] [--verify 8]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr
from common import run_cli, score_first_task

VOXEL_SIZE = (8.0, 8.0, 8.0)


def ellipsoid(rng, shape, radius_range):
    """Centre, radii and the boolean mask of a random ellipsoid on its own bounding box."""
    radii = rng.uniform(*radius_range, size=3)
    centre = np.array([rng.uniform(r, s - r) for r, s in zip(radii, shape)])
    low = np.maximum(np.floor(centre - radii).astype(int), 0)
    high = np.minimum(np.ceil(centre + radii).astype(int) + 1, shape)
    grid = np.ogrid[tuple(slice(a, b) for a, b in zip(low, high))]
    inside = sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1
    return centre, tuple(slice(a, b) for a, b in zip(low, high)), inside


def make_crop(size: int, instances: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    shape = (size,) * 3
    truth = np.zeros(shape, np.uint32)
    centres = []
    for label in range(1, instances + 1):
        centre, box, inside = ellipsoid(rng, shape, (5, 15))
        truth[box][inside] = label
        centres.append(centre)
    pred = np.zeros(shape, np.uint32)
    next_id = instances + 1
    for label, centre in enumerate(centres, start=1):
        roll = rng.random()
        box = tuple(slice(max(0, int(c) - 17), min(size, int(c) + 18)) for c in centre)
        region = truth[box] == label
        if roll < 0.07:  # dropped
            continue
        if roll < 0.75:  # jitter: shifted by up to two voxels
            region = np.roll(region, tuple(rng.integers(-2, 3, size=3)), axis=(0, 1, 2))
            pred[box][region] = label
        elif roll < 0.85:  # split by a plane through the centre
            grid = np.indices(region.shape)[rng.integers(0, 3)]
            half = grid < grid.mean()
            pred[box][region & half] = label
            pred[box][region & ~half] = next_id
            next_id += 1
        else:  # merged with the nearest other instance through a bridge
            other = int(np.argmin([np.inf if i == label - 1 else np.sum((c - centre) ** 2) for i, c in enumerate(centres)]))
            pred[box][region] = other + 1
            steps = np.linspace(centre, centres[other], 40).astype(int)
            for z, y, x in steps:
                pred[max(z - 1, 0) : z + 2, max(y - 1, 0) : y + 2, max(x - 1, 0) : x + 2] = other + 1
    for _ in range(instances // 20):  # false positives
        _, box, inside = ellipsoid(rng, shape, (3, 6))
        pred[box][inside] = next_id
        next_id += 1
    return truth, pred


def write_phase(folder: Path, truth, pred) -> tuple[Path, Path]:
    phase, submission = folder / "phase", folder / "input" / "submission.zarr"
    attrs = {"voxel_size": list(VOXEL_SIZE), "translation": [0.0, 0.0, 0.0]}
    for root, data in ((phase / "truth.zarr", truth), (submission, pred)):
        group = zarr.open_group(str(root), mode="w", zarr_format=2)
        array = group.create_array("crop1/mito", shape=data.shape, dtype=data.dtype, chunks=(64, 64, 64))
        array[...] = data
        array.attrs.update({**attrs, "shape": list(data.shape)})
    size = truth.shape[0]
    (phase / "manifest.csv").write_text(
        "crop_name,dataset,class_label,voxel_size,translation,shape\n"
        f"1,bench,mito,[8.0;8.0;8.0],[0.0;0.0;0.0],[{size};{size};{size}]\n"
    )
    (phase / "phase.yaml").write_text("suite: cellmap\nworkers: 1\n")
    return phase, submission.parent


def verify_against_slow_path(truth, pred, sample, seed=1):
    """Per-GT Hausdorff of the fast path vs the reference's padded-ROI algorithm."""
    import cc3d

    from evaluation.metrics.hausdorff import capped_hausdorff, capped_hausdorff_padded_roi
    from evaluation.metrics.overlap import contingency
    from evaluation.suites.cellmap.instances import match_instances, max_distance, relabel_table
    from evaluation.suites.cellmap.options import Limits

    components, n_pred = cc3d.connected_components(pred, return_N=True)
    table = contingency(truth, components, where=truth > 0)
    mapping = match_instances(truth, components, int(n_pred), table, Limits.reference())
    lut = relabel_table({0: 0, **mapping}, int(n_pred))
    ids = np.unique(table.a)
    if sample != "all":
        ids = np.sort(np.random.default_rng(seed).choice(ids, size=min(int(sample), ids.size), replace=False))
    cap = max_distance(VOXEL_SIZE, truth.shape)
    started = time.perf_counter()
    fast = capped_hausdorff(truth, components, lut, ids, VOXEL_SIZE, cap)
    fast_s = time.perf_counter() - started
    started = time.perf_counter()
    slow = capped_hausdorff_padded_roi(truth, lut[components], ids, VOXEL_SIZE, cap)
    slow_s = time.perf_counter() - started
    return ids.size, fast.tobytes() == slow.tobytes(), fast_s, slow_s


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--instances", type=int, default=476)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify", default="8", help="instances to check against the slow path, or 'all'")
    parser.add_argument(
        "--write", type=Path, help="only write the phase and submission into this folder (e.g. to run the image on them)"
    )
    args = parser.parse_args()

    truth, pred = make_crop(args.size, args.instances, args.seed)
    if args.write:
        phase, submission = write_phase(args.write, truth, pred)
        print(f"wrote {phase} and {submission}")
        return
    print(f"crop {truth.shape} uint32: {len(np.unique(truth)) - 1} truth instances, {len(np.unique(pred)) - 1} predicted ids")
    started = time.perf_counter()
    np.bincount(truth.ravel())
    floor = time.perf_counter() - started
    print(f"floor (one np.bincount pass)   {floor:8.3f} s")

    with tempfile.TemporaryDirectory() as tmp:
        phase, submission = write_phase(Path(tmp), truth, pred)
        scored = score_first_task("cellmap", phase, submission)
        seconds, result = scored["seconds"], scored["result"]
        print(
            f"suite scoring of the pair      {seconds:8.3f} s  peak RSS {scored['peak_mb']:7.0f} MB  ({seconds / floor:,.0f}x floor; "
            f"scheduler estimate {scored['estimate_bytes'] / 2**20:.0f} MB)"
        )
        print(
            "  "
            + json.dumps(
                {
                    k: result[k]
                    for k in ("combined_score", "mean_accuracy", "hausdorff_distance", "normalized_hausdorff_distance", "status")
                }
            )
        )
        cli = run_cli(submission, phase, Path(tmp) / "out")
        print(
            f"command line, end to end       {cli['seconds']:8.3f} s  peak RSS {cli['peak_mb']:7.0f} MB (largest process)  exit {cli['exit']}"
        )
        if cli["exit"] != 0:
            print(cli["stderr"][-2000:])

    if args.verify != "0":
        n, same, fast_s, slow_s = verify_against_slow_path(truth, pred, args.verify)
        print(
            f"slow-path check on {n} instances: {'identical' if same else 'DIFFERENT'} float32 values "
            f"(fast {fast_s:.3f} s, reference algorithm {slow_s:.1f} s = {slow_s / n:.2f} s per instance)"
        )
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
