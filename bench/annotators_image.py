"""Benchmark: one large vessel image, three annotators, scored through the annotators suite.

The tool (MMV-Lab/string_vessel_project@c90f9ec) computes Hausdorff distances with scipy's
``directed_hausdorff`` and mean surface distances with one KD-tree query per direction, over
every foreground pixel, for 6 masks against the model plus 3 annotator pairs. This script
generates a seeded image of thin curved vessels (annotators: jittered, a missed piece, thicker
lines; prediction: a label map with class 2 = vessel), writes TIFFs, and prints:

- the floor: one ``np.bincount`` pass over the four images;
- the suite's scoring of the image (read, dilation, STAPLE, counts, overlap, distances) in a
  fresh process: wall seconds, peak RSS, ratio to the floor;
- the whole command line, without and with the plots and HTML report;
- the tool's distance algorithm (KD-tree and directed_hausdorff, written from the SPEC) on the
  same masks: its time, and whether every HD/MSD value is identical (``--no-reference`` skips).

    python bench/annotators_image.py [--size 2048] [--depth 1] [--vessels 120]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile
from common import run_cli, score_first_task
from scipy import ndimage
from skimage.draw import line

ANNOTATORS = ("annotator_A", "annotator_B", "annotator_C")


def vessels(rng, size: int, count: int) -> list[np.ndarray]:
    curves = []
    for _ in range(count):
        t = np.linspace(0, 1, 60)
        start, end = rng.uniform(0, size, 2), rng.uniform(0, size, 2)
        normal = np.array([-(end - start)[1], (end - start)[0]]) / max(np.linalg.norm(end - start), 1)
        bend = rng.uniform(-0.1, 0.1) * size * np.sin(np.pi * t * rng.uniform(1, 3))
        curves.append(np.clip(np.round(start + np.outer(t, end - start) + np.outer(bend, normal)), 0, size - 1).astype(int))
    return curves


def draw(curves, size, offset=(0, 0), skip_every=0, width=1) -> np.ndarray:
    mask = np.zeros((size, size), dtype=bool)
    for k, points in enumerate(curves):
        if skip_every and k % skip_every == 0:
            points = points[: len(points) // 2]
        for a, b in zip(points[:-1], points[1:]):
            (r0, c0), (r1, c1) = np.clip(a + offset, 0, size - 1), np.clip(b + offset, 0, size - 1)
            mask[line(r0, c0, r1, c1)] = True
    return ndimage.binary_dilation(mask, iterations=width)


def make_image(size: int, depth: int, count: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    slices = {name: [] for name in (*ANNOTATORS, "pred")}
    for _ in range(depth):
        curves = vessels(rng, size, count)
        slices["annotator_A"].append(draw(curves, size, offset=(1, 0)))
        slices["annotator_B"].append(draw(curves, size, skip_every=7))
        slices["annotator_C"].append(draw(curves, size, width=2))
        vessel = draw(curves[:-3], size, offset=tuple(rng.integers(-1, 2, 2)))
        tissue = ndimage.binary_dilation(vessel, iterations=6)
        slices["pred"].append(np.where(vessel, 2, np.where(tissue, 1, 0)))
    return {name: np.stack(s).astype(np.uint8) for name, s in slices.items()}


def write(folder: Path, data: dict, report: bool) -> tuple[Path, Path]:
    phase, submission = folder / "phase", folder / "input"
    for name in ANNOTATORS:
        (phase / "annotations" / name).mkdir(parents=True, exist_ok=True)
        tifffile.imwrite(phase / "annotations" / name / "image.tif", data[name] * 255, compression="zlib")
    submission.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(submission / "image_segPred.tif", data["pred"], compression="zlib")
    (phase / "phase.yaml").write_text(f"suite: annotators\nworkers: 1\nreport: {str(report).lower()}\n")
    return phase, submission


def tool_distances(data: dict, row: dict) -> tuple[float, bool]:
    """HD and MSD the tool's way (SPEC 3 and 5): directed_hausdorff and a KD-tree query over all
    foreground pixels of the dilated masks, for every reference mask against the model and
    for the annotator pairs. Returns the seconds and whether every value equals the suite's."""
    from scipy.spatial import KDTree
    from scipy.spatial.distance import directed_hausdorff

    from evaluation.metrics.staple import staple
    from evaluation.suites.annotators.masks import dilate, footprint

    element = footprint(3, "disk")
    masks = {name.rsplit("_", 1)[-1]: dilate((data[name] != 0).astype(np.uint8), element) for name in ANNOTATORS}
    model = dilate((data["pred"] == 2).astype(np.uint8), element)
    names = list(masks)
    stack = list(masks.values())
    masks["Union"], masks["Intersection"] = np.logical_or.reduce(stack), np.logical_and.reduce(stack)
    masks["Staple"] = staple(stack).probability > 0.5

    def symmetric(a, b):
        pa, pb = np.argwhere(a), np.argwhere(b)
        hd = max(directed_hausdorff(pa, pb)[0], directed_hausdorff(pb, pa)[0])
        msd = (np.mean(KDTree(pb).query(pa)[0]) + np.mean(KDTree(pa).query(pb)[0])) / 2
        return hd, msd

    started = time.perf_counter()
    same = True
    for name, mask in masks.items():
        hd, msd = symmetric(mask, model)
        same &= hd == row[f"{name}_hausdorff"] and msd == row[f"{name}_msd"]
    pairs = [symmetric(masks[a], masks[b]) for i, a in enumerate(names) for b in names[i + 1 :]]
    same &= np.mean([p[0] for p in pairs]) == row["annotators_agree_hausdorff"]
    same &= np.mean([p[1] for p in pairs]) == row["annotators_agree_msd"]
    return time.perf_counter() - started, bool(same)


def cli(phase: Path, submission: Path, out: Path) -> dict:
    """``run_cli`` on the inputs; prints the end of stderr if the command failed."""
    done = run_cli(submission, phase, out)
    if done["exit"] != 0:
        print(done["stderr"][-2000:])
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--vessels", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-reference", action="store_true", help="skip the tool's KD-tree / directed_hausdorff timing")
    args = parser.parse_args()

    data = make_image(args.size, args.depth, args.vessels, args.seed)
    fg = {k: int(np.count_nonzero(v)) for k, v in data.items()}
    print(f"image {data['pred'].shape} uint8, foreground pixels {fg}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    started = time.perf_counter()
    packed = sum((data[name] != 0).astype(np.uint8) << i for i, name in enumerate(ANNOTATORS)) | (
        (data["pred"] == 2).astype(np.uint8) << 3
    )
    np.bincount(packed.ravel(), minlength=16)
    floor = time.perf_counter() - started
    print(f"floor (one np.bincount pass over the 4 images)  {floor:8.3f} s")

    with tempfile.TemporaryDirectory() as tmp:
        phase, submission = write(Path(tmp), data, report=False)
        scored = score_first_task("annotators", phase, submission)
        seconds, peak_mb, row, estimate = scored["seconds"], scored["peak_mb"], scored["result"], scored["estimate_bytes"]
        print(
            f"suite scoring of the image      {seconds:8.3f} s  peak RSS {peak_mb:7.0f} MB  ({seconds / floor:,.0f}x floor); "
            f"scheduler estimate {estimate / 2**20:.0f} MB"
        )
        print(
            f"  Staple_dice {row['Staple_dice']:.6f}  Staple_hausdorff {row['Staple_hausdorff']:.4f}  "
            f"Staple_msd {row['Staple_msd']:.6f}  STAPLE iterations {row['staple_elapsed_iterations']}"
        )
        done = cli(phase, submission, Path(tmp) / "out")
        print(f"command line, tables only       {done['seconds']:8.3f} s  exit {done['exit']}")
        phase_report, _ = write(Path(tmp) / "with-report", data, report=True)
        done = cli(phase_report, submission, Path(tmp) / "out-report")
        print(
            f"command line, plots + HTML      {done['seconds']:8.3f} s  exit {done['exit']}  peak RSS "
            f"{done['peak_mb']:7.0f} MB (largest process)"
        )

    if not args.no_reference:
        seconds_ref, same = tool_distances(data, row)
        print(
            f"the tool's distance algorithm   {seconds_ref:8.3f} s  (distances only; "
            f"{'identical' if same else 'DIFFERENT'} HD/MSD values)"
        )
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
