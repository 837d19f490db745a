"""Benchmark: a TopCoW-sized case through the command line with ``preset: topcow2024-task1``,
against the reference's own time on the same case where it is installed.

The case: a Circle of Willis of the 13 TopCoW labels (ICAs, MCAs, ACAs, A2, Acom, Pcoms, PCAs,
BA) painted as tubes around polylines, 0.3 mm isotropic, in a 200 x 250 x 250 ROI-sized volume
(``--workload roi``, the size of TopCoW's cropped evaluations) or embedded in a whole-head
300 x 512 x 512 volume at 0.45 x 0.45 x 0.5 mm (``--workload whole``); the prediction bends
every vessel by up to 2 voxels, thins or thickens it, breaks the BA, adds two stray
components and misses the R-Pcom. Truth written as NIfTI, prediction as MHA, by SimpleITK.

The command line is timed as a whole process (interpreter, imports, reading, scoring, every
output); the reference as its own ``TopCoWEvaluation(...).evaluate()`` of the case in a fresh
process (CoWBenchmark/TopCoW_Eval_Metrics at 25ca839, its Python given by ``--topcow-python``,
with ``topcow24_eval`` importable there), its docker detection turned off at run time as the
conformance kit's README says, and its own peak memory (``VmHWM``).

    python bench/topcow.py [--workload roi|whole] [--topcow-python PY] [--keep DIR]
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

# label, polyline in voxels (x, y, z) of a 64 x 64 x 40 design grid, radius in voxels; painted
# in this order, so that each connecting vessel touches the vessels it joins
TREE = (
    (15, ((32, 16, 23), (32, 11, 36)), 1.0),  # 3rd-A2
    (10, ((29.5, 16, 23), (34.5, 16, 23)), 1.0),  # Acom
    (8, ((20, 31, 16), (21, 47, 16)), 1.0),  # R-Pcom
    (9, ((44, 31, 16), (43, 47, 16)), 1.0),  # L-Pcom
    (2, ((32, 46, 15), (22, 48, 16), (10, 54, 18)), 1.5),  # R-PCA
    (3, ((32, 46, 15), (42, 48, 16), (54, 54, 18)), 1.5),  # L-PCA
    (1, ((32, 46, 2), (32, 46, 14)), 2.0),  # BA
    (5, ((20, 30, 19), (6, 28, 23)), 1.5),  # R-MCA
    (7, ((44, 30, 19), (58, 28, 23)), 1.5),  # L-MCA
    (11, ((20, 30, 19), (28, 16, 22), (28, 12, 34)), 1.5),  # R-ACA
    (12, ((44, 30, 19), (36, 16, 22), (36, 12, 34)), 1.5),  # L-ACA
    (4, ((20, 30, 2), (20, 30, 19)), 2.0),  # R-ICA
    (6, ((44, 30, 2), (44, 30, 19)), 2.0),  # L-ICA
)
ROI = (200, 250, 250)  # z, y, x
WHOLE, AT = (300, 512, 512), (60, 130, 131)  # the ROI's place in the whole volume


def capsule(labels: np.ndarray, a, b, radius: float, value: int) -> None:
    """Paint the voxels within ``radius`` of the segment a-b (x, y, z), inside its box only."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    low = np.maximum(np.floor(np.minimum(a, b) - radius - 1).astype(int), 0)
    high = np.minimum(np.ceil(np.maximum(a, b) + radius + 2).astype(int), labels.shape[::-1])
    if np.any(high <= low):
        return
    z, y, x = np.ogrid[low[2] : high[2], low[1] : high[1], low[0] : high[0]]
    d = b - a
    length = float(d @ d) or 1.0
    t = np.clip(((x - a[0]) * d[0] + (y - a[1]) * d[1] + (z - a[2]) * d[2]) / length, 0, 1)
    inside = (x - a[0] - t * d[0]) ** 2 + (y - a[1] - t * d[1]) ** 2 + (z - a[2] - t * d[2]) ** 2 <= radius**2
    labels[low[2] : high[2], low[1] : high[1], low[0] : high[0]][inside] = value


def tree(shape, scale: float, shift, rng=None, skip=()) -> np.ndarray:
    labels = np.zeros(shape, np.uint8)
    for value, points, radius in TREE:
        if value in skip:
            continue
        placed = [np.asarray(p) * scale + shift + (rng.uniform(-2, 2, 3) if rng is not None else 0) for p in points]
        width = radius * scale * 0.8 * (rng.uniform(0.8, 1.2) if rng is not None else 1)
        for a, b in zip(placed[:-1], placed[1:]):
            capsule(labels, a, b, width, value)
    return labels


def make_case(seed: int = 2024) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = tree(ROI, 3.5, (30, 13, 13))
    pred = tree(ROI, 3.5, (30, 13, 13), rng, skip=(8,))
    pred[40:44][pred[40:44] == 1] = 0  # a gap through the BA
    capsule(pred, (40, 40, 150), (40, 40, 150), 3.0, 5)  # stray components
    capsule(pred, (200, 200, 30), (200, 200, 30), 2.0, 10)
    return truth, pred


def write(array: np.ndarray, path: Path, spacing) -> None:
    import SimpleITK as sitk

    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    sitk.WriteImage(image, str(path), useCompression=True)


REFERENCE = """
import contextlib, io, sys, time
from pathlib import Path
import topcow24_eval.base_algorithm as base
from topcow24_eval.constants import TASK, TRACK
from topcow24_eval.evaluation import TopCoWEvaluation
base.is_docker = lambda: False  # the folders given, not the container's
started = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    TopCoWEvaluation(TRACK.CT, TASK.MULTICLASS_SEGMENTATION, 1, False, predictions_path=Path(sys.argv[1]),
                     ground_truth_path=Path(sys.argv[2]), output_path=Path(sys.argv[3])).evaluate()
peak = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))
print("SECONDS", time.perf_counter() - started, "PEAK_MB", int(peak) / 1024)
"""


def reference(python: str, pred: Path, truth: Path, output: Path) -> tuple[float, float, float]:
    """(wall seconds of the whole process, the seconds of its evaluate(), its peak MB)."""
    started = time.perf_counter()
    done = subprocess.run([python, "-c", REFERENCE, str(pred), str(truth), str(output)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the reference failed:\n{done.stderr[-3000:]}")
    words = next(line for line in done.stdout.splitlines() if line.startswith("SECONDS")).split()
    return wall, float(words[1]), float(words[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("roi", "whole"), default="roi")
    parser.add_argument("--topcow-python", help="a Python where topcow24_eval (TopCoW_Eval_Metrics@25ca839) is installed")
    parser.add_argument("--keep", help="write the case and phase here and keep them (e.g. to time both sides again)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        truth, pred = make_case()
        spacing = (0.3, 0.3, 0.3)
        if args.workload == "whole":
            window = tuple(slice(a, a + n) for a, n in zip(AT, ROI))
            whole_truth, whole_pred = np.zeros(WHOLE, np.uint8), np.zeros(WHOLE, np.uint8)
            whole_truth[window], whole_pred[window] = truth, pred
            truth, pred, spacing = whole_truth, whole_pred, (0.45, 0.45, 0.5)
        write(truth, root / "phase" / "labels" / "topcow_ct_001.nii.gz", spacing)
        write(pred, root / "pred" / "topcow_ct_001.mha", spacing)
        (root / "phase" / "phase.yaml").write_text("suite: segmentation\npreset: topcow2024-task1\n")
        shape = "x".join(str(n) for n in truth.shape[::-1])
        print(f"case {shape}, {int((truth > 0).sum())} vessel voxels; load {os.getloadavg()[0]:.2f}")
        found = run_cli(root / "pred", root / "phase", root / "out", "--workers", "1")
        assert found["exit"] == 0, found["stderr"][-2000:]
        task = next(json.loads(line)["seconds"] for line in found["log"].splitlines() if '"task_finished"' in line)
        wall = inner = peak = float("nan")
        if args.topcow_python:
            (root / "ref-out").mkdir()
            wall, inner, peak = reference(args.topcow_python, root / "pred", root / "phase" / "labels", root / "ref-out")
            mine = json.loads((root / "out" / "topcow_metrics.json").read_text())
            theirs = json.loads((root / "ref-out" / "metrics.json").read_text())
            mine["case"]["pred_fname"] = theirs["case"]["pred_fname"]
            same = json.dumps(mine, sort_keys=True) == json.dumps(theirs, sort_keys=True)
            print(f"topcow_metrics.json equals the reference's metrics.json: {same}")
        print(f"{'':<12}{'wall':>10}{'scoring':>10}{'peak':>10}")
        print(f"{'grader':<12}{found['seconds']:>8.2f} s{task:>8.2f} s{found['peak_mb']:>7.0f} MB")
        print(f"{'reference':<12}{wall:>8.2f} s{inner:>8.2f} s{peak:>7.0f} MB")
        if args.topcow_python:
            print(f"ratio: {wall / found['seconds']:.1f}x wall, {peak / found['peak_mb']:.1f}x memory")


if __name__ == "__main__":
    main()
