"""Benchmark: 400 label maps of 512 x 512 with 70 classes, scored by the multiclass suite.

nnU-Net's ``compute_metrics`` builds two boolean masks and four full-image sums per class, so
its cost grows with the number of classes (70 classes: ~280 passes per image); the suite
builds one confusion matrix per image with a single ``np.bincount`` whatever the number of
classes. This script generates a seeded dataset (truth: blocks of random classes; prediction:
shifted boundaries, salt noise and a swapped class pair per image), writes it as NIfTI, and
prints:

- the floor: one pass over the data in one process (read every file pair, one bincount each);
- the whole command line (``python -m evaluation``): wall seconds, peak RSS (the grader's own
  logged peaks, ``VmHWM`` of it and of its largest worker), ratio to the floor;
- nnU-Net's per-class mask arithmetic on a sample of images, for the per-image cost, and a
  check that its counts equal the suite's.

    python bench/multiclass_images.py [--images 400] [--size 512] [--classes 70] [--format .nii.gz]
"""

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from common import run_cli


def make_pair(rng, size: int, classes: int, block: int = 16) -> tuple[np.ndarray, np.ndarray]:
    coarse = rng.integers(0, classes, size=(size // block, size // block))
    truth = np.repeat(np.repeat(coarse, block, axis=0), block, axis=1).astype(np.uint8)
    pred = np.roll(truth, tuple(rng.integers(-3, 4, size=2)), axis=(0, 1))
    noise = rng.random(truth.shape) < 0.02
    pred[noise] = rng.integers(0, classes, size=int(noise.sum()))
    a, b = rng.integers(1, classes, size=2)
    swapped = pred.copy()
    swapped[pred == a], swapped[pred == b] = b, a
    return truth, swapped


def write(path: Path, array: np.ndarray) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing((0.7, 0.7))
    sitk.WriteImage(image, str(path), True)


def make_dataset(folder: Path, images: int, size: int, classes: int, suffix: str, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    phase, submission = folder / "phase", folder / "input"
    (phase / "labels").mkdir(parents=True)
    submission.mkdir()
    for i in range(images):
        truth, pred = make_pair(rng, size, classes)
        write(phase / "labels" / f"case_{i:04d}{suffix}", truth)
        write(submission / f"case_{i:04d}{suffix}", pred)
    groups = f"groups:\n  first_half: ['1-{classes // 2}']\n  second_half: ['{classes // 2 + 1}-{classes - 1}']\n"
    (phase / "phase.yaml").write_text(f"suite: multiclass\nclasses: {classes}\n{groups}")
    return phase, submission


def floor(phase: Path, submission: Path, classes: int) -> tuple[float, float]:
    """(read seconds, bincount seconds): every file pair read once, one bincount per pair."""
    reading = counting = 0.0
    for truth_path in sorted((phase / "labels").iterdir()):
        started = time.perf_counter()
        truth = sitk.GetArrayFromImage(sitk.ReadImage(str(truth_path)))
        pred = sitk.GetArrayFromImage(sitk.ReadImage(str(submission / truth_path.name)))
        reading += time.perf_counter() - started
        started = time.perf_counter()
        np.bincount((truth.astype(np.intp) * classes + pred).ravel(), minlength=classes * classes)
        counting += time.perf_counter() - started
    return reading, counting


def nnunet_style(truth: np.ndarray, pred: np.ndarray, classes: int) -> np.ndarray:
    """nnU-Net's per-class masks and four sums (compute_tp_fp_fn_tn), for timing and checking."""
    rows = []
    for c in range(classes):
        ref, prd = truth == c, pred == c
        rows.append([np.sum(ref & prd), np.sum(~ref & prd), np.sum(ref & ~prd), np.sum(~ref & ~prd)])
    return np.array(rows).T


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--classes", type=int, default=70)
    parser.add_argument("--format", default=".nii.gz", help=".nii.gz, .nii, .mha, .nrrd")
    parser.add_argument("--sample", type=int, default=5, help="images scored the nnU-Net way for timing and checking")
    args = parser.parse_args()
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs "
        "(a busy machine stretches wall times; CPU seconds are steadier)"
    )

    with tempfile.TemporaryDirectory(prefix="bench-multiclass-") as scratch:
        started = time.perf_counter()
        phase, submission = make_dataset(Path(scratch), args.images, args.size, args.classes, args.format)
        print(
            f"{args.images} images {args.size}x{args.size} uint8 {args.format}, {args.classes} classes "
            f"(generated in {time.perf_counter() - started:.1f} s)"
        )

        cpu = time.process_time()
        reading, counting = floor(phase, submission, args.classes)
        one_pass, floor_cpu = reading + counting, time.process_time() - cpu
        print(
            f"floor, one pass in one process:  {one_pass:6.2f} s  (reading {reading:.2f} s, bincount {counting:.2f} s; CPU {floor_cpu:.2f} s)"
        )

        output = Path(scratch) / "out"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU seconds only: they are not inherited
        done = run_cli(submission, phase, output)
        wall, peak = done["seconds"], done["peak_mb"]
        if done["exit"] != 0:
            sys.exit(done["stderr"])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        metrics = json.loads((output / "metrics.json").read_text())
        print(
            f"command line (all workers):      {wall:6.2f} s  peak RSS {peak:.0f} MB  ratio to floor {wall / one_pass:.1f}x"
            f"  (CPU {cpu:.2f} s, {cpu / floor_cpu:.1f}x the floor's; includes interpreter start and metrics.json validation)"
        )
        print(
            f"  headline mean Dice {metrics['aggregates']['mean_dice_fg_nanmean']:.6f}, "
            f"metrics.json {(output / 'metrics.json').stat().st_size / 2**20:.1f} MB"
        )

        per_case = {
            e["reference_file"]: e["metrics"] for e in json.loads((output / "summary.json").read_text())["metric_per_case"]
        }
        labels = sorted((phase / "labels").iterdir())[: args.sample]
        started = time.perf_counter()
        agree = True
        for path in labels:
            truth = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
            pred = sitk.GetArrayFromImage(sitk.ReadImage(str(submission / path.name)))
            counts = nnunet_style(truth, pred, args.classes)
            entry = per_case[path.name[: -len(args.format)]]
            ours = np.array([[entry[str(c)][k] for c in range(args.classes)] for k in ("TP", "FP", "FN", "TN")])
            agree &= bool((ours == counts).all())
        per_image = (time.perf_counter() - started) / len(labels)
        print(
            f"nnU-Net-style masks: {per_image * 1000:.0f} ms per image (~{per_image * args.images:.0f} s for all, one process); "
            f"counts equal the suite's on {len(labels)} images: {agree}"
        )


if __name__ == "__main__":
    main()
