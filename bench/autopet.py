"""Benchmark: one whole-body-PET-sized autoPET case (400 x 400 x 300 voxels, 2.04 x 2.04 x 3 mm)
through the command line with ``preset: autopet4`` and ``preset: autopet4-interactive`` (eleven
click steps), against autoPET IV's own evaluation of the same files in a fresh process.

The case: thirty ellipsoid lesions of radius 2 to 15 voxels, twenty-five of them found with a
dilation or erosion and a shift of up to two voxels, fifteen small false positives and one
bladder-sized one; uint8, written as compressed NIfTI by SimpleITK. The command line is timed as
a whole process (interpreter, imports, reading, scoring, every output) with one worker; the
scoring alone in a fresh process (``score_first_task``); the reference as
``compute_metrics(truth, prediction)`` and, with ``--interactive-reference`` (minutes),
``compute_interactive_metrics(truth, the eleven step files, 11)`` of
lab-midas/autoPETCTIV's ``evaluation_metrics/evaluation_metrics.py`` in the Python given by
``--reference-python`` (numpy, scipy, pandas, nibabel and connected-components-3d installed), from
the checkout given by ``--reference-code``. Both sides' values are printed: they agree to the
last bit.

    python bench/autopet.py [--reference-python PY --reference-code DIR [--interactive-reference]] [--keep DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from common import run_cli, score_first_task

SHAPE = (300, 400, 400)  # z, y, x
SPACING = (3.0, 2.0364201068878174, 2.0364201068878174)  # z, y, x, mm


def paint(labels: np.ndarray, centre, radii, value: int = 1) -> None:
    """An ellipsoid of ``value`` inside its own box (never a full-volume grid)."""
    box = tuple(slice(max(int(c - r) - 1, 0), min(int(c + r) + 2, n)) for c, r, n in zip(centre, radii, labels.shape))
    grid = np.ogrid[box]
    labels[box][sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0] = value


def make_case(seed: int = 30) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth, pred = np.zeros(SHAPE, np.uint8), np.zeros(SHAPE, np.uint8)
    for lesion in range(30):
        centre = [rng.uniform(40, n - 40) for n in SHAPE]
        radii = rng.uniform(2, 15, 3)
        paint(truth, centre, radii)
        if lesion < 25:  # found, with an error
            shift = rng.integers(-2, 3, 3)
            paint(pred, [c + s for c, s in zip(centre, shift)], np.maximum(radii + rng.uniform(-1, 1.5), 1.0))
    for _ in range(15):  # physiological uptake taken for lesions
        paint(pred, [rng.uniform(30, n - 30) for n in SHAPE], rng.uniform(2, 8, 3))
    paint(pred, (40, 200, 200), (20, 25, 30))  # a bladder
    return truth, pred


def write(array: np.ndarray, path: Path) -> None:
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(array)
    image.SetSpacing(SPACING[::-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path), useCompression=True)


REFERENCE = """
import importlib.util, json, sys, time, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
sys.argv, (truth, pred, code, interactive) = ["evaluation_metrics.py", "-g", "unused"], sys.argv[1:]
spec = importlib.util.spec_from_file_location("evaluation_metrics", code + "/evaluation_metrics/evaluation_metrics.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)  # it parses the command line when imported
if interactive == "1":
    values = module.compute_interactive_metrics(truth, [pred.replace("_pred0", f"_pred{i}") for i in range(11)], 11)
else:
    values = module.compute_metrics(truth, pred)
print("VALUES", json.dumps([float(v) for v in values]))
print("SECONDS", time.perf_counter() - started)
"""


def reference(python: str, code: str, truth: Path, pred: Path, interactive: bool) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-c", REFERENCE, str(truth), str(pred), code, "1" if interactive else "0"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in done.stdout.splitlines() if " " in line}
    return {"wall": time.perf_counter() - started, "inner": float(lines["SECONDS"]), "values": json.loads(lines["VALUES"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-python", help="a Python with numpy, scipy, pandas, nibabel, connected-components-3d")
    parser.add_argument("--reference-code", help="a checkout of lab-midas/autoPETCTIV (80af68d)")
    parser.add_argument("--interactive-reference", action="store_true", help="also time compute_interactive_metrics")
    parser.add_argument("--keep", help="write the case, its steps and the phase here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep or scratch)
        truth, pred = make_case()
        truth_file, pred_file = root / "phase" / "labels" / "case.nii.gz", root / "pred" / "case.nii.gz"
        write(truth, truth_file)
        write(pred, pred_file)
        steps = root / "steps"
        steps.mkdir()
        for step in range(11):  # the same prediction at every step: the cost does not depend on it
            shutil.copy(pred_file, steps / f"case_pred{step}.nii.gz")
        print(
            f"case {SHAPE[2]}x{SHAPE[1]}x{SHAPE[0]}, {int(truth.sum())} lesion voxels, {int(pred.sum())} predicted; "
            f"load {os.getloadavg()[0]:.2f}"
        )
        rows = []
        for preset, submission in (("autopet4", pred_file.parent), ("autopet4-interactive", steps)):
            (root / "phase" / "phase.yaml").write_text(f"suite: segmentation\npreset: {preset}\nreport: false\n")
            found = run_cli(submission, root / "phase", root / f"out-{preset}", "--workers", "1")
            assert found["exit"] == 0, found["stderr"][-2000:]
            task = next(json.loads(line)["seconds"] for line in found["log"].splitlines() if '"task_finished"' in line)
            scored = score_first_task("segmentation", root / "phase", submission)
            lesion = scored["result"]["classes"]["lesion"]
            keys = ("dice_auc", "fpv_ml_auc", "fnv_ml_auc", "dice_final", "fpv_ml_final", "fnv_ml_final")
            values = [lesion[k] for k in (keys if preset.endswith("interactive") else ("dice", "fpv_ml", "fnv_ml"))]
            rows.append((preset, found["seconds"], task, scored["seconds"], found["peak_mb"], values))
        print(f"{'preset':<22}{'command line':>14}{'its task':>11}{'scoring':>10}{'peak':>10}  values")
        for preset, seconds, task, scoring, peak, values in rows:
            print(f"{preset:<22}{seconds:>12.2f} s{task:>9.2f} s{scoring:>8.2f} s{peak:>7.0f} MB  {values}")
        if args.reference_python and args.reference_code:
            runs = [("compute_metrics", pred_file, False)]
            if args.interactive_reference:
                runs.append(("compute_interactive_metrics", steps / "case_pred0.nii.gz", True))
            for name, file, interactive in runs:
                found = reference(args.reference_python, args.reference_code, truth_file, file, interactive)
                print(
                    f"reference {name}: process {found['wall']:.2f} s, its evaluation {found['inner']:.2f} s, {found['values']}"
                )


if __name__ == "__main__":
    main()
