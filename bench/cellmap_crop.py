"""Benchmark: one 256^3 CellMap crop with ~476 instances, scored through the cellmap suite; and
two crops of large objects (``--workload``).

The official evaluator needs 1249 s and 12 GB for such a crop (almost all of it per-instance
Hausdorff over ROIs padded by half the crop). This script generates a seeded crop (uint32
ellipsoids; the prediction is the truth perturbed with jitter, splits, bridged merges, drops
and false positives), writes both as zarr, and prints:

- the floor: one ``np.bincount`` pass over the volume;
- the suite's scoring of the pair (zarr read, alignment, cc3d, matching, Hausdorff, VoI) in a
  fresh process: wall seconds, peak RSS, ratio to the floor;
- the whole command line (``python -m evaluation``) on the same data (``--repeat N`` runs: their
  median and range), beside the interpreter importing the command line and the suite;
- a check against the slow path: the reference's padded-ROI Hausdorff algorithm on a sample
  of instances (``--verify all`` for every instance: about 20 minutes).

    python bench/cellmap_crop.py [--size 256] [--instances 476] [--verify 8]

Large objects (issue 14), generated chunk by chunk straight into zarr (nothing crop-sized is
held; empty chunks are not written) and scored through the command line under Grand-Challenge's
per-process limit (``prlimit --data=7516192768``), printing per task its time, peak and the
planner's estimate, the decoding floor (every stored array read once, chunk by chunk, with the
grader's zarr reader) and the load average:

    python bench/cellmap_crop.py --workload nuclei600    # 600^3 at 32 nm, 40 nuclei (radius 30-72
                                                         # voxels), uint64 truth, uint16 prediction
                                                         # (each nucleus shifted by up to 3 voxels)
    python bench/cellmap_crop.py --workload nuclei1000   # 1000^3, 30 nuclei + a 1000^3 semantic label
    python bench/cellmap_crop.py --workload shifted1000  # 1000^3, 30 nuclei shifted, split and merged
                                                         # + a 1000^3 semantic label (the anchor)
    python bench/cellmap_crop.py --workload shifted600   # 600^3, 40 nuclei shifted, split and merged
    [--cache DIR]   keep the generated crop there and reuse it
    [--repeat N]    run the command line N times (median and spread printed)

The ``shifted`` crops perturb the prediction the way a model errs on large objects: every
nucleus shifted by up to 3 voxels per axis and scaled by up to 3 %; a third of them cut into 2-4
touching pieces with ids of their own (along random planes); pairs of nuclei placed a few voxels
apart are merged into one id through a bridge; one nucleus dropped; small false positives.
"""

import argparse
import json
import os
import shutil
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

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))  # the reference algorithm is test code
    from helpers.hausdorff_reference import capped_hausdorff_padded_roi
    from helpers.whole_array import capped_hausdorff

    from evaluation.metrics.overlap import contingency
    from evaluation.suites.cellmap.instances import match_instances, max_distance, relabel_table
    from evaluation.suites.cellmap.options import Limits

    components, n_pred = cc3d.connected_components(pred, return_N=True)
    table = contingency(truth, components, where=truth > 0)
    sizes = np.bincount(components.ravel(), minlength=int(n_pred) + 1)
    mapping = match_instances(int(truth.max()), sizes, int(n_pred), table, Limits.reference())
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


# --------------------------------------------------------------------------------------------
# Large objects, chunk by chunk

LARGE = {
    # name: (edge, nuclei, with a semantic label of the crop's size, prediction perturbed beyond shifts)
    "nuclei600": (600, 40, False, False),
    "nuclei1000": (1000, 30, True, False),
    "shifted600": (600, 40, False, True),
    "shifted1000": (1000, 30, True, True),
}
LARGE_VOXEL_SIZE = (32.0, 32.0, 32.0)
LARGE_CHUNK = 128
GC_DATA_LIMIT = 7516192768  # Grand-Challenge's RLIMIT_DATA on its default 8 GB machine


def nuclei(rng, edge: int, count: int):
    """Non-overlapping ellipsoids of radius 30-72 voxels: (id, centre, radii) of the truth, and
    the prediction's: each shifted by up to 3 voxels per axis."""
    placed = []
    while len(placed) < count:
        radius = rng.uniform(30, 72)
        radii = radius * rng.uniform(0.85, 1.15, size=3)
        centre = rng.uniform(radii + 1, edge - radii - 1)
        if all(np.linalg.norm(centre - c) > r.max() + radii.max() + 4 for _, c, r in placed):
            placed.append((len(placed) + 1, centre, radii))
    shifted = [(i, c + rng.integers(-3, 4, size=3), r) for i, c, r in placed]
    return placed, shifted


def shifted_nuclei(rng, edge: int, count: int):
    """Nuclei as ``nuclei`` places them, a fifth of them in close pairs (2-5 voxels apart), and a
    prediction a model could give: every nucleus shifted by up to 3 voxels per axis and scaled
    by 0.97-1.03; a third cut into 2-4 touching pieces along random parallel planes, each piece
    an id of its own; each close pair merged into one id through a bridge (a capsule of radius
    4-8 voxels between the centres); one nucleus dropped; a few small false positives. Shapes
    are (id, centre, radii, cut) ellipsoids, ``cut`` None or (normal, low, high): only the
    voxels with ``low <= (p - centre) . normal < high``; and (id, a, b, radius, "capsule")."""
    placed, pairs = [], []
    while len(placed) < count:
        radius = rng.uniform(30, 72)
        radii = radius * rng.uniform(0.85, 1.15, size=3)
        if placed and len(pairs) < count // 10 and len(placed) % 5 == 1 and len(placed) + 1 < count:
            # beside the last nucleus, 2-5 voxels from its surface along the line of the centres
            _, other, other_radii = placed[-1]
            direction = rng.normal(size=3)
            direction /= np.linalg.norm(direction)
            gap = rng.uniform(2, 5)
            centre = other + direction * (other_radii.max() + radii.max() + gap)
            pair = True
        else:
            centre = rng.uniform(radii + 1, edge - radii - 1)
            pair = False
        if np.any(centre - radii < 1) or np.any(centre + radii > edge - 1):
            continue
        others = placed[:-1] if pair else placed
        if all(np.linalg.norm(centre - c) > r.max() + radii.max() + 4 for _, c, r in others):
            placed.append((len(placed) + 1, centre, radii))
            if pair:
                pairs.append((len(placed) - 1, len(placed)))
    truth = [(i, c, r, None) for i, c, r in placed]
    merged = {b: a for a, b in pairs}
    dropped = int(rng.choice([i for i, _, _ in placed if i not in merged and all(i != a for a, _ in pairs)]))
    pred, next_id = [], count + 1
    moved = {}
    for i, c, r in placed:
        c, r = c + rng.integers(-3, 4, size=3), r * rng.uniform(0.97, 1.03)
        moved[i] = c
        if i == dropped:
            continue
        if i in merged:  # takes the id of its partner, and a bridge of it joins them
            pred.append((merged[i], c, r, None))
            pred.append((merged[i], moved[merged[i]], c, rng.uniform(4, 8), "capsule"))
            continue
        if rng.random() < 1 / 3 and i not in (a for a, _ in pairs):
            normal = rng.normal(size=3)
            normal /= np.linalg.norm(normal)
            extent = float(np.abs(normal * r).sum())
            cuts = np.sort(rng.uniform(-0.6 * extent, 0.6 * extent, size=int(rng.integers(1, 4))))
            bounds = [-np.inf, *cuts, np.inf]
            for k, (low, high) in enumerate(zip(bounds[:-1], bounds[1:])):
                label = i if k == 0 else next_id
                next_id += k > 0
                pred.append((label, c, r, (normal, low, high)))
            continue
        pred.append((i, c, r, None))
    for _ in range(count // 5):  # false positives in free space (or on a nucleus: a wrong piece)
        radii = rng.uniform(3, 8, size=3)
        pred.append((next_id, rng.uniform(radii + 1, edge - radii - 1), radii, None))
        next_id += 1
    return truth, pred


def _shape_box(shape):
    if len(shape) == 5:  # capsule (id, a, b, radius, "capsule")
        _, a, b, radius, _ = shape
        return np.minimum(a, b) - radius, np.maximum(a, b) + radius
    _, centre, radii = shape[:3]
    return centre - radii, centre + radii


def render(objects, origin, shape, dtype):
    """The shapes of ``objects`` (ellipsoids (id, centre, radii) or (id, centre, radii, cut),
    capsules (id, a, b, radius, "capsule"); later ones over earlier ones) on the block at ``origin``
    (nothing else is computed)."""
    block = np.zeros(shape, dtype)
    low_block, high_block = np.asarray(origin), np.asarray(origin) + np.asarray(shape)
    for item in objects:
        label = item[0]
        lo, hi = _shape_box(item)
        low = np.maximum(np.floor(lo).astype(int), low_block)
        high = np.minimum(np.ceil(hi).astype(int) + 1, high_block)
        if np.any(high <= low):
            continue
        grid = np.ogrid[tuple(slice(a, b) for a, b in zip(low, high))]
        if len(item) == 5:
            _, a, b, radius, _ = item
            axis = b - a
            t = sum((g - s) * d for g, s, d in zip(grid, a, axis)) / max(float(axis @ axis), 1e-9)
            t = np.clip(t, 0.0, 1.0)
            inside = sum((g - s - t * d) ** 2 for g, s, d in zip(grid, a, axis)) <= radius**2
        else:
            centre, radii = item[1], item[2]
            inside = sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1
            if len(item) == 4 and item[3] is not None:
                normal, cut_low, cut_high = item[3]
                along = sum((g - c) * n for g, c, n in zip(grid, centre, normal))
                inside = inside & (along >= cut_low) & (along < cut_high)
        block[tuple(slice(a - o, b - o) for a, b, o in zip(low, high, origin))][inside] = label
    return block


def semantic_block(origin, shape, shift):
    """A smooth membrane-like semantic label: a thresholded sum of waves (the prediction: shifted)."""
    z, y, x = (
        np.arange(o, o + n, dtype=np.float32)[tuple(slice(None) if a == b else None for b in range(3))] + s
        for a, (o, n, s) in enumerate(zip(origin, shape, shift))
    )
    field = np.sin(z / 37.0) + np.sin(y / 53.0 + 1.0) + np.sin(x / 41.0 + 2.0) + 0.5 * np.sin((x + y + z) / 29.0)
    return (field > 1.2).astype(np.uint8)


def write_large(folder: Path, name: str, seed: int = 0, store_empty: bool = False) -> tuple[Path, Path]:
    """The phase (truth.zarr, manifest, phase.yaml) and submission of a large workload, chunk by
    chunk; reused when ``folder`` already holds it. Chunks holding only zeros are not written,
    unless ``store_empty`` (as zarr-python 2 wrote them by default)."""
    edge, count, with_semantic, perturbed = LARGE[name]
    phase, submission = folder / "phase", folder / "input" / "submission.zarr"
    if (folder / "complete").exists():
        return phase, submission.parent
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(seed)
    truth_objects, pred_objects = (shifted_nuclei if perturbed else nuclei)(rng, edge, count)
    shape = (edge,) * 3
    attrs = {"voxel_size": list(LARGE_VOXEL_SIZE), "translation": [0.0, 0.0, 0.0]}
    labels = [("nuc", np.uint64, np.uint16)] + ([("cyto", np.uint8, np.uint8)] if with_semantic else [])
    arrays = {}
    for label, truth_dtype, pred_dtype in labels:
        for root, dtype in ((phase / "truth.zarr", truth_dtype), (submission, pred_dtype)):
            group = zarr.open_group(str(root), mode="a", zarr_format=2)
            array = group.create_array(
                f"crop1/{label}", shape=shape, dtype=dtype, chunks=(LARGE_CHUNK,) * 3, config={"write_empty_chunks": store_empty}
            )
            array.attrs.update({**attrs, "shape": list(shape)})
            arrays[(root.name, label)] = array
    for origin in np.ndindex(*[-(-edge // LARGE_CHUNK)] * 3):
        origin = tuple(o * LARGE_CHUNK for o in origin)
        extent = tuple(min(LARGE_CHUNK, edge - o) for o in origin)
        region = tuple(slice(o, o + n) for o, n in zip(origin, extent))
        for label, truth_dtype, pred_dtype in labels:
            if label == "nuc":
                blocks = (render(truth_objects, origin, extent, truth_dtype), render(pred_objects, origin, extent, pred_dtype))
            else:
                blocks = (semantic_block(origin, extent, (0, 0, 0)), semantic_block(origin, extent, (1, -1, 2)))
            for root_name, block in zip(("truth.zarr", "submission.zarr"), blocks):
                if store_empty or block.any():
                    arrays[(root_name, label)][region] = block
    rows = "".join(f"1,bench,{label},[32.0;32.0;32.0],[0.0;0.0;0.0],[{edge};{edge};{edge}]\n" for label, _, _ in labels)
    (phase / "manifest.csv").write_text("crop_name,dataset,class_label,voxel_size,translation,shape\n" + rows)
    (phase / "phase.yaml").write_text("suite: cellmap\n")
    (folder / "complete").write_text("")
    return phase, submission.parent


def decoding_floor(phase: Path, submission: Path) -> float:
    """Seconds to read every stored array of the crop once (truth and submission), chunk by
    chunk, with the grader's own zarr reader: what any scoring must at least do."""
    return read_arrays(phase / "truth.zarr" / "crop1", submission / "submission.zarr" / "crop1")


def read_arrays(*groups: Path) -> float:
    """Seconds to read every array of the zarr ``groups`` once, chunk by chunk."""
    from evaluation.readers import zarr_store
    from evaluation.suites.cellmap import volumes

    started = time.perf_counter()
    for root in groups:
        for name in zarr_store.array_names(root):
            array = zarr_store.open_array(root / name, name)
            for box in volumes.tiles(array.shape, array.chunks, 16 << 20):
                zarr_store.read_array(array, name, region=box)
    return time.perf_counter() - started


def import_floor(repeat: int) -> list[float]:
    """Seconds of a fresh interpreter importing what grading a CellMap phase imports before it
    reads anything (the command line and the suite), ``repeat`` times (byte-compiled first)."""
    import compileall
    import subprocess

    import evaluation

    compileall.compile_dir(Path(evaluation.__file__).parent, quiet=1)
    seconds = []
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import evaluation.cli, evaluation.suites.cellmap"], check=True)
        seconds.append(time.perf_counter() - started)
    return seconds


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def spread(values) -> str:
    """The median of ``values`` and their range, as the tables quote them."""
    values = sorted(values)
    median = float(np.median(values))
    return f"{median:.2f} s" + (f" ({values[0]:.2f}-{values[-1]:.2f}, {len(values)} runs)" if len(values) > 1 else "")


def run_large(name: str, cache: Path | None, store_empty: bool = False, repeat: int = 1) -> None:
    edge, count, with_semantic, _ = LARGE[name]
    stem = name + ("-every-chunk" if store_empty else "")
    folder = cache / stem if cache else Path(tempfile.mkdtemp(prefix=f"cellmap-{stem}-"))
    try:
        started = time.perf_counter()
        phase, submission = write_large(folder, name, store_empty=store_empty)
        print(
            f"{name}: {edge}^3 at 32 nm, {count} nuclei (uint64 truth, uint16 prediction)"
            + (f" and a {edge}^3 semantic label" if with_semantic else "")
            + (", every chunk stored" if store_empty else "")
            + f"; data ready in {time.perf_counter() - started:.1f} s"
        )
        print(f"floor (decoding every array once)      {decoding_floor(phase, submission):8.2f} s   [{load()}]")
        runs, tasks, peaks = [], {}, {}
        for _ in range(repeat):
            done = run_cli(submission, phase, folder / "out", prefix=("prlimit", f"--data={GC_DATA_LIMIT}"))
            runs.append(done["seconds"])
            print(
                f"command line under prlimit --data={GC_DATA_LIMIT}: {done['seconds']:8.2f} s  exit {done['exit']}   [{load()}]"
            )
            if done["exit"] != 0:
                print((done["log"] + done["stderr"])[-3000:])
            for line in done["log"].splitlines():
                if "task_finished" in line and "{" in line:
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    tasks.setdefault(event["task"], []).append(event["seconds"])
                    peaks.setdefault(event["task"], []).append((event["peak_rss_mb"], event["estimate_mb"], event["ok"]))
        print(f"command line: {spread(runs)}")
        for task, seconds in tasks.items():
            peak, estimate, ok = max(peaks[task])
            print(f"  task {task:14s} {spread(seconds)}  peak {peak} MB  estimate {estimate} MB  {'ok' if ok else 'FAILED'}")
        metrics = folder / "out" / "metrics.json"
        if metrics.exists():
            case = json.loads(metrics.read_text())["case"]["crop1"]
            for label, entry in case.items():
                keys = ("combined_score", "hausdorff_distance", "iou", "status")
                print(f"  {label}: " + json.dumps({k: entry[k] for k in keys if k in entry}))
    finally:
        if cache is None:
            shutil.rmtree(folder, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--instances", type=int, default=476)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify", default="8", help="instances to check against the slow path, or 'all'")
    parser.add_argument(
        "--write", type=Path, help="only write the phase and submission into this folder (e.g. to run the image on them)"
    )
    parser.add_argument(
        "--workload",
        choices=["crop256", *LARGE],
        default="crop256",
        help="crop256: the crop of --size with --instances; or one of the large-object crops",
    )
    parser.add_argument("--cache", type=Path, help="large workloads: generate into (and reuse from) this folder")
    parser.add_argument(
        "--store-empty-chunks", action="store_true", help="large workloads: write chunks of zeros too (zarr-python 2's default)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="command-line runs (median and range printed)")
    args = parser.parse_args()
    if args.workload in LARGE:
        if args.write:
            print("wrote", *write_large(args.write, args.workload, store_empty=args.store_empty_chunks))
        else:
            run_large(args.workload, args.cache, args.store_empty_chunks, args.repeat)
        return

    truth, pred = make_crop(args.size, args.instances, args.seed)
    if args.write:
        phase, submission = write_phase(args.write, truth, pred)
        print(f"wrote {phase} and {submission}")
        return
    print(f"crop {truth.shape} uint32: {len(np.unique(truth)) - 1} truth instances, {len(np.unique(pred)) - 1} predicted ids")
    floors = []
    for _ in range(max(3, args.repeat)):
        started = time.perf_counter()
        np.bincount(truth.ravel())
        floors.append(time.perf_counter() - started)
    floor = float(np.median(floors))
    print(f"floor (one np.bincount pass)   {floor:8.3f} s")
    print(f"floor (the interpreter importing the grader's command line and the suite) {spread(import_floor(args.repeat))}")

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
        runs = []
        for _ in range(args.repeat):
            cli = run_cli(submission, phase, Path(tmp) / "out")
            runs.append(cli["seconds"])
            print(
                f"command line, end to end       {cli['seconds']:8.3f} s  peak RSS {cli['peak_mb']:7.0f} MB (largest process)  "
                f"exit {cli['exit']}   [{load()}]"
            )
            if cli["exit"] != 0:
                print(cli["stderr"][-2000:])
        if args.repeat > 1:
            print(f"command line: {spread(runs)}")

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
