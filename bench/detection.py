"""Benchmark: PI-CAI-sized cases (default 100 cases of 24 x 384 x 384) through the detection
suite's command line, against picai_eval 1.4.13 on the same files where it is installed.

The cases (seeded): 0-2 ellipsoid lesions per case (about a third of the cases benign), a
candidate blob near about 80 % of the lesions, 0-3 false-positive blobs, blobs never touching,
confidences uniform in [0.05, 1) as float32; labels uint8. With ``--softmax N`` the first N
cases also get a softmax map (a Gaussian bump around every blob) for ``input: softmax``. All
written as compressed NIfTI by SimpleITK, as PI-CAI's files are.

It prints:

- the floor: every file pair read once with SimpleITK in one process (the grader cannot do
  less than decompress every voxel);
- the whole command line (``python -m evaluation``, all workers): wall seconds, peak RSS (the
  grader's own logged peaks), score, AP and AUROC;
- with ``--picai-python PY`` (a Python where the user installed picai_eval, and
  report_guided_annotation for softmax maps; nothing is installed here), the reference's
  ``evaluate_folder`` on the same folders in a fresh process (3 threads, its default), its wall
  seconds and peak RSS (``VmHWM``), and whether its AP and AUROC equal the grader's.

    python bench/detection.py [--cases 100] [--shape 24x384x384] [--softmax 0 --extraction dynamic-fast]
                              [--picai-python PY]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from common import run_cli
from scipy import ndimage


def ellipsoid(shape, centre, radii) -> tuple[tuple[slice, ...], np.ndarray]:
    """A box and the ellipsoid mask inside it (never a full-volume grid)."""
    box = tuple(slice(max(int(c - r) - 1, 0), min(int(c + r) + 2, n)) for c, r, n in zip(centre, radii, shape))
    grid = np.ogrid[tuple(box)]
    return box, sum(((g - c) / max(r, 0.5)) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0


def bump(softmax: np.ndarray, centre, radii, peak: float) -> None:
    """A Gaussian bump of ``peak`` around ``centre``, in a box of three radii."""
    box = tuple(slice(max(int(c - 3 * r), 0), min(int(c + 3 * r) + 1, n)) for c, r, n in zip(centre, radii, softmax.shape))
    grid = np.ogrid[tuple(box)]
    value = (peak * np.exp(-sum(((g - c) / max(r, 0.5)) ** 2 for g, c, r in zip(grid, centre, radii)))).astype(np.float32)
    np.maximum(softmax[box], value, out=softmax[box])


def make_case(rng, shape, with_softmax: bool):
    z, y, x = shape
    label = np.zeros(shape, np.uint8)
    detection = np.zeros(shape, np.float32)
    softmax = np.zeros(shape, np.float32) if with_softmax else None
    lesions = []
    for _ in range(int(rng.integers(0, 3))):
        centre = (int(rng.integers(4, z - 4)), int(rng.integers(y * 0.36, y * 0.64)), int(rng.integers(x * 0.36, x * 0.64)))
        radii = (rng.uniform(1.5, 3.5), rng.uniform(5, 14), rng.uniform(5, 14))
        box, mask = ellipsoid(shape, centre, radii)
        label[box][mask] = 1
        lesions.append((centre, radii))
    blobs = []
    for centre, radii in lesions:
        if rng.random() < 0.8:
            moved = (
                centre[0] + int(rng.integers(-1, 2)),
                centre[1] + int(rng.integers(-4, 5)),
                centre[2] + int(rng.integers(-4, 5)),
            )
            blobs.append((moved, (radii[0], radii[1] * rng.uniform(0.6, 1.3), radii[2] * rng.uniform(0.6, 1.3))))
    for _ in range(int(rng.integers(0, 4))):
        centre = (int(rng.integers(3, z - 3)), int(rng.integers(y * 0.26, y * 0.74)), int(rng.integers(x * 0.26, x * 0.74)))
        blobs.append((centre, (rng.uniform(1, 3), rng.uniform(3, 10), rng.uniform(3, 10))))
    for centre, radii in blobs:
        box, mask = ellipsoid(shape, centre, radii)
        if touches(detection, box, mask):
            continue  # blobs of different confidence must not touch (picai_eval refuses the map)
        detection[box][mask] = np.float32(rng.uniform(0.05, 1.0))
        if softmax is not None:
            bump(softmax, centre, radii, rng.uniform(0.2, 1.0))
    if softmax is not None:
        softmax[softmax < 1e-3] = 0
    return label, detection, softmax


def touches(detection: np.ndarray, box, mask) -> bool:
    """Whether the blob (``mask`` in ``box``) overlaps or 26-touches a blob already drawn."""
    grown = tuple(slice(max(s.start - 1, 0), min(s.stop + 1, n)) for s, n in zip(box, detection.shape))
    drawn = detection[grown] != 0
    if not drawn.any():
        return False
    placed = np.zeros(drawn.shape, bool)
    placed[tuple(slice(b.start - g.start, b.stop - g.start) for b, g in zip(box, grown))] = mask
    return bool((ndimage.binary_dilation(placed, structure=np.ones((3, 3, 3), bool)) & drawn).any())


def write(array: np.ndarray, path: Path) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing((0.5, 0.5, 3.0))
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path), True)


def make_dataset(root: Path, cases: int, shape, softmax: int, suffix: str = ".nii.gz", seed: int = 2022) -> None:
    """Labels as .nii.gz (PI-CAI's), maps as ``suffix`` (Grand-Challenge hands .mha to the
    evaluation)."""
    rng = np.random.default_rng(seed)
    for i in range(cases):
        label, detection, probabilities = make_case(rng, shape, i < softmax)
        write(label, root / "phase" / "labels" / f"c{i:03d}.nii.gz")
        write(detection, root / "input" / f"c{i:03d}{suffix}")
        if probabilities is not None:
            write(label, root / "softmax-phase" / "labels" / f"c{i:03d}.nii.gz")
            write(probabilities, root / "softmax-input" / f"c{i:03d}{suffix}")


def floor(phase: Path, submission: Path) -> float:
    started = time.perf_counter()
    maps = {p.name.partition(".")[0]: p for p in submission.iterdir()}
    for truth in sorted((phase / "labels").iterdir()):
        sitk.GetArrayFromImage(sitk.ReadImage(str(truth)))
        sitk.GetArrayFromImage(sitk.ReadImage(str(maps[truth.name.partition(".")[0]])))
    return time.perf_counter() - started


def children_cpu() -> float:
    """CPU seconds of the finished children so far (not inherited across fork and exec)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


REFERENCE = """
import contextlib, io, json, sys, time, warnings
warnings.filterwarnings("ignore")
started = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):  # both packages print a banner on import
    from picai_eval import evaluate_folder
    options = {}
    if sys.argv[3] != "-":
        from report_guided_annotation import extract_lesion_candidates
        mode = sys.argv[3]
        options["y_det_postprocess_func"] = lambda p: extract_lesion_candidates(p, threshold=mode)[0]
    metrics = evaluate_folder(y_det_dir=sys.argv[1], y_true_dir=sys.argv[2], verbose=0, **options)
    found = {"AP": metrics.AP, "auroc": metrics.auroc}
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({**found, "seconds": time.perf_counter() - started, "peak_mb": peak / 1024}))
"""


def reference(python: str, submission: Path, labels: Path, extraction: str | None) -> dict:
    started, cpu = time.perf_counter(), children_cpu()
    command = [python, "-c", REFERENCE, str(submission), str(labels), extraction or "-"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {**found, "wall": time.perf_counter() - started, "cpu": children_cpu() - cpu}


def grade(submission: Path, phase: Path, output: Path) -> dict:
    cpu = children_cpu()
    done = run_cli(submission, phase, output)
    if done["exit"] != 0:
        sys.exit(done["stderr"][-3000:])
    aggregates = json.loads((output / "metrics.json").read_text())["aggregates"]
    return {**done, "cpu": children_cpu() - cpu, **{k: aggregates[k] for k in ("score", "AP", "auroc")}}


def compare(name: str, ours: dict, python: str | None, submission: Path, labels: Path, extraction: str | None) -> None:
    print(
        f"{name}: command line {ours['seconds']:.2f} s (CPU {ours['cpu']:.2f} s), peak {ours['peak_mb']:.0f} MB; "
        f"score {ours['score']!r}, AP {ours['AP']!r}, AUROC {ours['auroc']!r}"
    )
    if python:
        found = reference(python, submission, labels, extraction)
        same = found["AP"] == ours["AP"] and found["auroc"] == ours["auroc"]
        print(
            f"{' ' * len(name)}  picai_eval: process {found['wall']:.2f} s (CPU {found['cpu']:.2f} s; evaluate_folder "
            f"{found['seconds']:.2f} s), peak {found['peak_mb']:.0f} MB; {found['wall'] / ours['seconds']:.1f}x the command "
            f"line's wall time, {found['cpu'] / ours['cpu']:.1f}x its CPU; AP and AUROC equal: {same}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--shape", default="24x384x384", help="z x y x x")
    parser.add_argument("--softmax", type=int, default=0, help="cases that also get a softmax map (input: softmax)")
    parser.add_argument(
        "--map-format", default=".nii.gz", help="the maps' format: .nii.gz (PI-CAI's files) or .mha (Grand-Challenge's)"
    )
    parser.add_argument("--extraction", default="dynamic-fast", help="the softmax phase's extraction mode")
    parser.add_argument("--picai-python", help="a Python with picai_eval 1.4.13 (and report_guided_annotation) installed")
    parser.add_argument("--keep", help="write the cases here and keep them")
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split("x"))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="bench-detection-") as scratch:
        root = Path(args.keep or scratch)
        started = time.perf_counter()
        make_dataset(root, args.cases, shape, args.softmax, args.map_format)
        print(f"{args.cases} cases {args.shape}, maps as {args.map_format} (generated in {time.perf_counter() - started:.1f} s)")
        print(f"floor, every file pair read once in one process: {floor(root / 'phase', root / 'input'):.2f} s")
        (root / "phase" / "phase.yaml").write_text("suite: detection\n")
        ours = grade(root / "input", root / "phase", root / "out")
        compare("detection maps", ours, args.picai_python, root / "input", root / "phase" / "labels", None)
        if args.softmax:
            (root / "softmax-phase" / "phase.yaml").write_text(
                f"suite: detection\ninput: softmax\nextraction: {args.extraction}\n"
            )
            ours = grade(root / "softmax-input", root / "softmax-phase", root / "softmax-out")
            name = f"{args.softmax} softmax maps, {args.extraction}"
            compare(name, ours, args.picai_python, root / "softmax-input", root / "softmax-phase" / "labels", args.extraction)


if __name__ == "__main__":
    main()
