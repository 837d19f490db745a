"""Benchmark: a full-size TomoChallenge foam submission (1080 x 1280 x 1280 = 1.77 G voxels).

The reference (``foam_phantom_utils.compute_scores``) voxelises the phantom by testing every
voxel against the spheres of its slice, then holds the truth, a boundary mask, the unpacked
submission and several full-size boolean temporaries at once. This script:

1. rasterises the phantom's void list into a label volume (``.npy``) with the suite's build-time
   command (the real Foam-1 file with ``--spheres``, else a seeded synthetic list of 150 000
   voids with the same size classes); with ``--expected`` (the conformance kit's
   ``expected-foam.json``) the three recorded slices of the real phantom are checked;
2. writes a submission: the truth's foam map shifted by one voxel along x with 5 % of the
   voxels flipped, as the challenge's bit-packed HDF5 (and, with ``--plain``, as a uint8 .npy);
3. prints, each in a fresh process: the floor (one pass over the label volume: slab reads and
   one ``count_nonzero``), the suite's scoring of the phantom (plan + score: wall seconds, peak
   RSS, ratio to the floor) and the whole command line.

    python bench/tomo_foam_full.py [--spheres foam_phantom_1_ground_truth.h5] [--expected expected-foam.json]
                                   [--workdir DIR] [--plain] [--threads 2]
"""

import argparse
import contextlib
import hashlib
import io
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import in_fresh_process, peak_rss_mb, run_cli  # noqa: E402

from evaluation.readers.bitpack import pack  # noqa: E402
from evaluation.readers.slabs import open_slabs, slab_bounds  # noqa: E402

SHAPE = (1080, 1280, 1280)


def synthetic_void_list(seed: int = 1001) -> np.ndarray:
    """150 000 voids with the real Foam-1 class sizes (290 large, 5390 medium, 144 320 small),
    radii log-uniform within each class, centres inside the cylinder; they may overlap (the
    first sphere in list order wins, as in the reference), which costs the scorer nothing."""
    rng = np.random.default_rng(seed)
    parts = []
    for count, low, high in ((290, 0.1, 0.2), (5390, 0.025, 0.0999), (144320, 0.006, 0.0249)):
        r = np.exp(rng.uniform(np.log(low), np.log(high), count))
        rho = (1 - r) * np.sqrt(rng.uniform(0, 1, count))
        phi = rng.uniform(0, 2 * np.pi, count)
        z = rng.uniform(-1.5, 1.5, count)
        parts.append(np.stack([rho * np.cos(phi), rho * np.sin(phi), z, r, np.zeros(count)], axis=1))
    records = np.concatenate(parts)
    return records[np.argsort(-records[:, 3], kind="stable")].astype(np.float32).ravel()


def make_phase(folder: Path, spheres: Path | None) -> Path:
    phase = folder / "phase"
    phase.mkdir(parents=True, exist_ok=True)
    target = phase / "foam_phantom_1_ground_truth.h5"
    if not target.exists():
        with h5py.File(target, "w") as f:
            if spheres is not None:
                with h5py.File(spheres, "r") as source:
                    f["spheres"] = source["spheres"][()]
            else:
                f["spheres"] = synthetic_void_list()
    (phase / "phase.yaml").write_text(
        "suite: tomo_foam\nphantoms:\n  foam_phantom_1:\n    spheres: foam_phantom_1_ground_truth.h5\n"
        "    labels: foam_phantom_1_labels.npy\n"
    )
    return phase


def _rasterize(phase: str, threads: int, queue) -> None:
    """The suite's build-time command (``python -m evaluation rasterize``),
    run here so that its peak is this process's own ``VmHWM`` (its threads share it); its
    output is kept for a failure message."""
    from evaluation.organizer.commands import main

    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            code = main(["rasterize", phase, "--threads", str(threads)])
        except Exception:
            code = traceback.format_exc()
    queue.put((code, peak_rss_mb(), output.getvalue()))


def check_real_slices(labels: Path, expected: Path) -> None:
    recorded = json.loads(expected.read_text())["real_foam1_gt_slices"]["slices"]
    with open_slabs(labels) as volume:
        for z, entry in recorded.items():
            plane = volume.read(int(z), int(z) + 1)
            same = hashlib.sha256(plane.tobytes()).hexdigest() == entry["sha256_uint8_flipped"]
            counts = {str(k): int(v) for k, v in enumerate(np.bincount(plane.ravel(), minlength=5))}
            print(
                f"  real Foam-1 slice z={z}: sha256 {'matches' if same else 'DIFFERS'}, counts {'match' if counts == entry['label_counts'] else 'DIFFER'}"
            )


def write_submissions(labels: Path, folder: Path, plain: bool, seed: int = 7) -> tuple[Path, Path | None]:
    """The truth's foam map shifted one voxel along x, 5 % of voxels flipped; slab by slab."""
    rng = np.random.default_rng(seed)
    packed_dir, plain_dir = folder / "input-packed", folder / "input-plain"
    packed_dir.mkdir(exist_ok=True)
    out_plain = None
    if plain:
        plain_dir.mkdir(exist_ok=True)
        out_plain = open(plain_dir / "foam_phantom_1.npy", "wb")
        np.lib.format.write_array_header_1_0(out_plain, {"descr": "|u1", "fortran_order": False, "shape": SHAPE})
    with h5py.File(packed_dir / "foam_phantom_1.h5", "w") as f, open_slabs(labels) as truth:
        dataset = f.create_dataset("vol", (540, 640, 640), dtype="u1", compression="gzip", compression_opts=1)
        dataset.attrs["description"] = "bench: shifted by one voxel, 5% noise"
        for z0, z1 in slab_bounds(SHAPE[0], 40, align=2):
            foam = np.roll(truth.read(z0, z1) == 1, 1, axis=2)
            foam ^= rng.random(foam.shape, dtype=np.float32) < 0.05
            dataset[z0 // 2 : z1 // 2] = pack(foam)
            if out_plain is not None:
                out_plain.write(foam.view(np.uint8).tobytes())
    if out_plain is not None:
        out_plain.close()
    return packed_dir, (plain_dir if plain else None)


def _floor(labels: str, queue) -> None:
    started = time.perf_counter()
    total = 0
    with open_slabs(Path(labels)) as volume:
        for z0, z1 in slab_bounds(volume.shape[0], 10):
            total += int(np.count_nonzero(volume.read(z0, z1) == 1))
    queue.put((time.perf_counter() - started, peak_rss_mb(), total))


def _score(phase: str, submission: str, queue) -> None:
    from evaluation import phase as phases
    from evaluation.contract import Resources
    from evaluation.submission import Submission
    from evaluation.suites import get

    suite = get("tomo_foam")
    started, cpu = time.perf_counter(), time.process_time()
    plan = suite.plan(Submission(Path(submission)), phases.load(Path(phase)), Resources.detect())
    result = suite.score(plan.tasks[0].payload)
    queue.put((time.perf_counter() - started, peak_rss_mb(), {**result, "cpu_seconds": time.process_time() - cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spheres", type=Path, help="the real foam_phantom_1_ground_truth.h5 (default: synthetic)")
    parser.add_argument("--expected", type=Path, help="expected-foam.json of the conformance kit (checks real slices)")
    parser.add_argument("--workdir", type=Path, help="keep the phase and submissions here (default: a temporary folder)")
    parser.add_argument("--plain", action="store_true", help="also score a plain uint8 .npy submission")
    parser.add_argument("--threads", type=int, default=2, help="rasterisation threads")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}  cpus: {len(os.sched_getaffinity(0))}")
    with tempfile.TemporaryDirectory(prefix="tomo-bench-") as scratch:
        folder = args.workdir or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        phase = make_phase(folder, args.spheres)
        labels = phase / "foam_phantom_1_labels.npy"
        if not labels.exists():
            started = time.perf_counter()
            code, peak, output = in_fresh_process(_rasterize, str(phase), args.threads)
            seconds = time.perf_counter() - started
            if code != 0:
                sys.exit(f"rasterise failed ({code})\n{output[-3000:]}")
            print(
                f"rasterise {'real Foam-1' if args.spheres else 'synthetic'} phantom (150 000 voids) -> .npy: {seconds:.1f} s, peak {peak:.0f} MB"
            )
        if args.expected:
            check_real_slices(labels, args.expected)
        packed, plain = write_submissions(labels, folder, args.plain)

        floor, floor_rss, _ = in_fresh_process(_floor, str(labels))
        print(f"floor: one pass over the label volume (slab reads + count_nonzero): {floor:.2f} s, peak {floor_rss:.0f} MB")
        for kind, submission in (("bit-packed HDF5", packed), ("plain uint8 .npy", plain)):
            if submission is None:
                continue
            seconds, rss, result = in_fresh_process(_score, str(phase), str(submission))
            print(
                f"suite scoring, {kind}: {seconds:.2f} s ({result['cpu_seconds']:.1f} s CPU, all threads), peak {rss:.0f} MB, {seconds / floor:.1f} x floor;"
                f" harm_mean {result['harm_mean']:.6f}, dice_edge {result['dice_edge']:.6f}"
            )
            out = folder / f"out-{submission.name}"
            cli = run_cli(submission, phase, out)
            if cli["exit"] != 0:
                sys.exit(f"command line failed ({cli['exit']}) on {submission}\n{cli['stderr'][-3000:]}")
            print(f"whole command line, {kind}: {cli['seconds']:.2f} s, peak {cli['peak_mb']:.0f} MB (largest process)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
