"""Benchmark: the segmentation suite against panoptica, MetricsReloaded, MONAI and DeepMind's
surface-distance on the conformance kit's benchmark volume, plus a 512^3 multi-class case.

The volume is the kit's ``gen_cases.gen_bench()`` (the conformance kit's generator, rewritten
here with the same random draws: ``bench_volume``): a 256^3 instance map with 400 ellipsoids
and a perturbed prediction (misses, splits, false positives, boundary jitter). The work is the kit's (README, "Speed reference"):

- panoptica: IoU-0.5 greedy matching + per-instance Dice, HD95 and ASSD (+ the global Dice);
- MetricsReloaded, MONAI, surface-distance: HD95 + ASSD + NSD (tau 1) of the binary pair
  (foreground of both maps).

Each is run in a fresh process that loads the arrays from .npy files, as the kit measured the
libraries: the table shows the scoring time (best of ``--repeat`` runs, after one warm-up
run that loads the compiled kernels), the process's wall time for one run including the
interpreter, the imports and loading the arrays, and its peak resident memory (VmHWM). A
library importable in this environment is run the same way (``library_*``); otherwise the
kit's reference figures are printed. The last line is a 512^3 map with 10 classes (seeded
organ-like ellipsoids, prediction shifted with boundary noise) with every distance metric.

The machine is shared: the load average is printed with the figures.

    python bench/segmentation_libraries.py [--repeat 3] [--skip-large]
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import in_fresh_process

# The kit's README: wall seconds of two runs and peak RSS, on a shared 2-core machine (load ~2).
REFERENCE = {
    "panoptica": ((5.11, 4.79), 718),
    "metricsreloaded": ((8.32, 9.15), 1237),
    "monai": ((6.73, 7.17), 841),
    "deepmind": ((7.90, 8.87), 1184),
}
WORK = {
    "panoptica": {
        "input": "instances",
        "definition": "panoptica",
        "metrics": ["dice"],
        "instance_metrics": ["detection", "dice", "hd_percentile", "assd"],
    },
    "metricsreloaded": {"input": "instances", "definition": "metricsreloaded", "metrics": ["hd_percentile", "assd", "nsd"]},
    "monai": {"input": "instances", "definition": "monai", "metrics": ["hd_percentile", "assd", "nsd"], "nsd_tolerances": [1.0]},
    "deepmind": {
        "input": "instances",
        "definition": "deepmind",
        "metrics": ["hd_percentile", "asd", "nsd"],
        "nsd_tolerances": [1.0],
    },
}
LARGE = {
    "classes": list(range(1, 11)),
    "definition": "metricsreloaded",
    "metrics": ["dice", "hd", "hd_percentile", "assd", "masd", "asd", "nsd", "surface_overlap"],
    "nsd_tolerances": [1.0, 2.0],
}
LIBRARY_MODULES = {
    "panoptica": "panoptica",
    "metricsreloaded": "MetricsReloaded",
    "monai": "monai",
    "deepmind": "surface_distance",
}


def _ellipsoid(rng, shape, low: float, spread: float):
    """A random axis-aligned ellipsoid in its padded box: (box, mask). The kit draws the radii,
    then the centre, from the generator in this order (gen_cases.py: ``ellipsoid``)."""
    radii = [low + spread * rng.random() for _ in shape]
    centre = [float(rng.integers(0, n)) for n in shape]
    lo = [max(0, int(c - r) - 1) for c, r in zip(centre, radii)]
    hi = [min(n, int(c + r) + 2) for c, r, n in zip(centre, radii, shape)]
    axes = np.indices([b - a for a, b in zip(lo, hi)], dtype=np.float64)
    total = np.zeros(axes.shape[1:])
    for axis, (c, r, a) in enumerate(zip(centre, radii, lo)):
        step = (axes[axis] - (c - a)) / r
        total += step * step
    return tuple(slice(a, b) for a, b in zip(lo, hi)), total <= 1.0


def _shifted(mask: np.ndarray, offset) -> np.ndarray:
    out = np.zeros_like(mask)
    source = tuple(slice(0, n - o) if o >= 0 else slice(-o, n) for o, n in zip(offset, mask.shape))
    target = tuple(slice(o, n) if o >= 0 else slice(0, n + o) for o, n in zip(offset, mask.shape))
    out[target] = mask[source]
    return out


def bench_volume(folder: Path, seed: int = 20260401, shape=(256, 256, 256), count: int = 400) -> tuple[Path, Path]:
    """The kit's benchmark pair (``gen_cases.gen_bench``, the same random draws in the same
    order, hence the same arrays): ``count`` ellipsoids; the prediction shifts each by up to
    one voxel, misses 5 %, splits 3 % in two halves, adds 10 false positives and removes 20 %
    of its boundary voxels."""
    from scipy import ndimage

    rng = np.random.Generator(np.random.PCG64(seed))
    truth, prediction = np.zeros(shape, np.uint16), np.zeros(shape, np.uint16)
    for k in range(1, count + 1):
        box, mask = _ellipsoid(rng, shape, 3.0, 9.0)
        truth[box][mask] = k
        fate = rng.random()
        if fate < 0.05:
            continue
        moved = _shifted(mask, [int(rng.integers(-1, 2)) for _ in shape])
        if fate < 0.08:
            half = np.indices(moved.shape)[0] < moved.shape[0] // 2
            prediction[box][moved & half], prediction[box][moved & ~half] = 2 * k, 2 * k + 1
        else:
            prediction[box][moved] = 2 * k
    for extra in range(10):
        box, mask = _ellipsoid(rng, shape, 3.0, 4.0)
        prediction[box][mask & (prediction[box] == 0)] = 60000 + extra
    foreground = prediction > 0
    inner = foreground & ~ndimage.binary_erosion(foreground, ndimage.generate_binary_structure(3, 1))
    prediction[inner & (rng.random(shape) < 0.2)] = 0
    np.save(folder / "truth.npy", truth)
    np.save(folder / "prediction.npy", prediction)
    return folder / "truth.npy", folder / "prediction.npy"


def large_volume(folder: Path, size: int = 512, classes: int = 10, seed: int = 20260402) -> tuple[Path, Path]:
    """Organ-like ellipsoids (radius 20-70 voxels) of ``classes`` labels, later ones drawn over
    earlier ones; the prediction is the truth shifted by up to two voxels with 10 % of each
    class's boundary voxels flipped to background."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    truth = np.zeros((size,) * 3, np.uint8)
    for label in range(1, classes + 1):
        centre, radius = rng.integers(80, size - 80, 3), rng.uniform(20, 70, 3)
        box = tuple(slice(max(int(c - r) - 1, 0), min(int(c + r) + 2, size)) for c, r in zip(centre, radius))
        axes = np.ogrid[box]
        inside = sum(((a - c) / r) ** 2 for a, c, r in zip(axes, centre, radius)) <= 1
        truth[box][inside] = label
    prediction = np.roll(truth, tuple(rng.integers(-2, 3, 3)), axis=(0, 1, 2))
    edge = (prediction != 0) & ~ndimage.binary_erosion(prediction != 0)
    prediction[edge & (rng.random(prediction.shape) < 0.1)] = 0
    np.save(folder / "large_truth.npy", truth)
    np.save(folder / "large_prediction.npy", prediction)
    return folder / "large_truth.npy", folder / "large_prediction.npy"


def _ours(options: dict, truth: str, prediction: str, repeat: int, queue) -> None:
    started = time.perf_counter()
    from evaluation import phase as phases
    from evaluation.machine import peak_rss_mb
    from evaluation.suites.segmentation.options import Options
    from evaluation.suites.segmentation.scoring import score_arrays

    truth_array, prediction_array = np.load(truth), np.load(prediction)
    chosen = Options.from_phase(phases.Phase(Path("."), "segmentation", options))
    spacing = (1.0,) * truth_array.ndim
    score_arrays(truth_array, prediction_array, spacing, chosen)  # compiles or loads the kernels
    first = time.perf_counter() - started
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        score_arrays(truth_array, prediction_array, spacing, chosen)
        times.append(time.perf_counter() - began)
    queue.put({"seconds": min(times), "process_seconds": first, "peak_mb": peak_rss_mb()})


def _library(name: str, truth: str, prediction: str, queue) -> None:
    """The library's own call on the same work (only where it is installed)."""
    started = time.perf_counter()
    from evaluation.machine import peak_rss_mb

    gt, pred = np.load(truth), np.load(prediction)
    if name == "panoptica":
        from panoptica import InputType, NaiveThresholdMatching, Panoptica_Evaluator
        from panoptica.metrics import Metric

        evaluator = Panoptica_Evaluator(
            expected_input=InputType.UNMATCHED_INSTANCE,
            instance_matcher=NaiveThresholdMatching(),
            instance_metrics=[Metric.DSC, Metric.HD95, Metric.ASSD],
            global_metrics=[Metric.DSC],
        )
        evaluator.evaluate(pred, gt)
    elif name == "metricsreloaded":
        from MetricsReloaded.metrics.pairwise_measures import BinaryPairwiseMeasures

        measures = BinaryPairwiseMeasures(
            (pred != 0).astype(np.uint8),
            (gt != 0).astype(np.uint8),
            measures=["hd_perc", "assd", "nsd"],
            dict_args={"hd_perc": 95, "nsd": 1},
        )
        measures.to_dict_meas()
    elif name == "monai":
        import torch
        from monai.metrics import HausdorffDistanceMetric, SurfaceDiceMetric, SurfaceDistanceMetric

        torch.set_num_threads(1)
        y_pred, y = (torch.as_tensor((a != 0)[None, None].astype(np.float32)) for a in (pred, gt))
        HausdorffDistanceMetric(include_background=True, percentile=95)(y_pred, y)
        SurfaceDistanceMetric(include_background=True, symmetric=True)(y_pred, y)
        SurfaceDiceMetric(class_thresholds=[1.0], include_background=True)(y_pred, y)
    else:
        import surface_distance

        distances = surface_distance.compute_surface_distances(gt != 0, pred != 0, (1.0, 1.0, 1.0))
        surface_distance.compute_robust_hausdorff(distances, 95)
        surface_distance.compute_average_surface_distance(distances)
        surface_distance.compute_surface_dice_at_tolerance(distances, 1.0)
    queue.put({"process_seconds": time.perf_counter() - started, "peak_mb": peak_rss_mb()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-large", action="store_true")
    arguments = parser.parse_args()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        truth, prediction = bench_volume(Path(scratch))
        header = f"{'work':<16} {'ours s':>7} {'ours proc s':>11} {'ours MB':>8} | {'library proc s':>16} {'lib MB':>7} {'source':<14} {'speed-up':>9}"
        print(header)
        print("-" * len(header))
        for name, options in WORK.items():
            ours = in_fresh_process(_ours, options, str(truth), str(prediction), arguments.repeat)
            if importlib.util.find_spec(LIBRARY_MODULES[name]) is not None:
                theirs = in_fresh_process(_library, name, str(truth), str(prediction))
                library, memory, source = theirs["process_seconds"], theirs["peak_mb"], "measured"
            else:
                runs, memory = REFERENCE[name]
                library, source = min(runs), "kit README"
            print(
                f"{name:<16} {ours['seconds']:7.3f} {ours['process_seconds']:11.2f} {ours['peak_mb']:8.0f} | "
                f"{library:16.2f} {memory:7.0f} {source:<14} {library / ours['seconds']:8.1f}x"
            )
        if not arguments.skip_large:
            large = large_volume(Path(scratch))
            ours = in_fresh_process(_ours, LARGE, str(large[0]), str(large[1]), 1)
            print(
                f"{'512^3, 10 cls':<16} {ours['seconds']:7.3f} {ours['process_seconds']:11.2f} {ours['peak_mb']:8.0f} | "
                f"every distance metric (hd, hd95, assd, masd, asd, nsd at 1 and 2, surface overlap) + dice, target <= 5 s"
            )
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(
        json.dumps(
            {
                "note": "ours s: scoring from arrays in memory, best of the repeats; proc s: fresh process incl. "
                "interpreter, imports, loading the .npy files and one run (the kit's measure)"
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
