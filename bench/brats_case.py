"""Benchmark: one BraTS-sized case (240 x 240 x 155, 1 mm) through the command line with
``preset: brats-gli`` and ``preset: brats2023-gli``, against the reference packages' own time
on the same case, where they are installed.

The case: six glioma-like tumours (edema around enhancing tissue around necrosis, one with a
resection cavity) and a dozen small enhancing satellites, the prediction shifted by a voxel,
eroded here and there, missing two satellites and adding speckle false positives; written as
NIfTI by SimpleITK. The command line is timed as a whole process (interpreter, imports,
reading, scoring, writing every output); the reference as its own evaluation of the case in a
fresh process: ``evaluate_single_exam`` with the gli configuration and ``parse_seg_results``
(BraTS_evaluation 0.0.10, its Python given by ``--brats-python``), and
``get_LesionWiseResults(..., "BraTS-GLI")`` (the BraTS 2023 code at ``--brats2023-code``, its
Python by ``--brats2023-python``).

    python bench/brats_case.py [--brats-python PY] [--brats2023-python PY --brats2023-code DIR]
"""

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from common import run_cli

SHAPE = (155, 240, 240)  # z, y, x


def ball(shape, centre, radii) -> tuple[tuple[slice, ...], np.ndarray]:
    """A box and the ellipsoid mask inside it (never a full-volume grid)."""
    box = tuple(slice(max(int(c - r) - 1, 0), min(int(c + r) + 2, n)) for c, r, n in zip(centre, radii, shape))
    grid = np.ogrid[tuple(box)]
    return box, sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0


def paint(labels, centre, radii, value) -> None:
    box, mask = ball(labels.shape, centre, radii)
    labels[box][mask] = value


def make_case(seed: int = 2023) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.zeros(SHAPE, np.uint8)
    for k in range(6):
        centre = (30 + 18 * k, 60 + 25 * (k % 3), 70 + 30 * (k % 2))
        size = 8 + 3 * k
        paint(truth, centre, (size, size * 1.2, size * 1.1), 2)
        paint(truth, centre, (size * 0.6, size * 0.7, size * 0.65), 3)
        paint(truth, centre, (size * 0.3, size * 0.35, size * 0.3), 1)
        if k == 4:
            paint(truth, (centre[0], centre[1] + size, centre[2]), (4, 4, 4), 4)
    satellites = [(int(rng.integers(20, 135)), int(rng.integers(30, 210)), int(rng.integers(30, 210))) for _ in range(12)]
    for centre in satellites:
        paint(truth, centre, (1.5, 1.5, 1.5), 3)
    pred = np.roll(truth, 1, axis=2)
    for centre in satellites[:2]:
        paint(pred, (centre[0], centre[1], centre[2] + 1), (2, 2, 2), 0)
    speckle = rng.random(SHAPE) < 2e-5
    pred[speckle & (pred == 0)] = 3
    return truth, pred


def write(array: np.ndarray, path: Path) -> None:
    import SimpleITK as sitk

    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path), useCompression=True)


REFERENCE_0010 = """
import sys, time, json, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
from panoptica import Panoptica_Evaluator
from brats_evaluation import config_path, evaluate_single_exam, parse_seg_results
evaluator = Panoptica_Evaluator.load_from_config(str(config_path("gli")))
result = evaluate_single_exam(sys.argv[1], sys.argv[2], "case", evaluator)
json.dump({"metrics": [result], "missings": []}, open(sys.argv[3] + "/summary.json", "w"), default=float)
parse_seg_results(sys.argv[3] + "/summary.json", sys.argv[3] + "/table.csv")
print("SECONDS", time.perf_counter() - started)
"""

REFERENCE_2023 = """
import sys, time, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
sys.path.insert(0, sys.argv[4])
import metrics
metrics.get_LesionWiseResults(sys.argv[1], sys.argv[2], "BraTS-GLI")
print("SECONDS", time.perf_counter() - started)
"""


def reference_seconds(python: str, script: str, *args: str) -> tuple[float, float]:
    """(wall seconds of the whole process, the seconds the script measured itself)."""
    started = time.perf_counter()
    done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True, check=True)
    inner = float(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("SECONDS")))
    return time.perf_counter() - started, inner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brats-python", help="a Python with brats-evaluation 0.0.10 and panoptica installed")
    parser.add_argument("--brats2023-python", help="a Python with the BraTS 2023 code's pinned requirements")
    parser.add_argument("--brats2023-code", help="a checkout of rachitsaluja/BraTS-2023-Metrics")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        truth, pred = make_case()
        write(truth, root / "phase" / "labels" / "BraTS-GLI-00001-000.nii.gz")
        write(pred, root / "pred" / "BraTS-GLI-00001-000.nii.gz")
        print(f"case {SHAPE[2]}x{SHAPE[1]}x{SHAPE[0]}, {int((truth > 0).sum())} tumour voxels; load {os.getloadavg()[0]:.2f}")
        rows = []
        for preset in ("brats-gli", "brats2023-gli"):
            (root / "phase" / "phase.yaml").write_text(f"suite: segmentation\npreset: {preset}\n")
            found = run_cli(root / "pred", root / "phase", root / f"out-{preset}", "--workers", "1")
            assert found["exit"] == 0, found["stderr"][-2000:]
            task = next(json.loads(line)["seconds"] for line in found["stderr"].splitlines() if '"task_finished"' in line)
            rows.append((preset, found["seconds"], task, found["peak_mb"]))
        truth_file = str(root / "phase" / "labels" / "BraTS-GLI-00001-000.nii.gz")
        pred_file = str(root / "pred" / "BraTS-GLI-00001-000.nii.gz")
        reference = {}
        if args.brats_python:
            reference["brats-gli"] = reference_seconds(args.brats_python, REFERENCE_0010, pred_file, truth_file, scratch)
        if args.brats2023_python and args.brats2023_code:
            reference["brats2023-gli"] = reference_seconds(
                args.brats2023_python, REFERENCE_2023, pred_file, truth_file, scratch, args.brats2023_code
            )
        print(
            f"{'preset':<15}{'command line':>14}{'its task':>11}{'peak':>9}{'reference process':>20}{'its evaluation':>17}{'ratio':>8}"
        )
        for preset, seconds, task, peak in rows:
            wall, inner = reference.get(preset, (float("nan"), float("nan")))
            print(
                f"{preset:<15}{seconds:>12.2f} s{task:>9.2f} s{peak:>6.0f} MB{wall:>18.2f} s{inner:>15.2f} s{wall / seconds:>7.1f}x"
            )


if __name__ == "__main__":
    main()
