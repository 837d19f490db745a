"""Benchmark: FISBe samples scored through the fisbe suite, against a one-pass floor.

The official evaluator (Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d) needs about
250 s and 9 GB for one 128x512x512 volume with 20 neurons, and a real FISBe sample
(7 x 385 x 685 x 686) was killed at 17.9 GB: it makes several full-volume passes per instance
(masks, max projections, full-volume skeletons). This script generates seeded synthetic
samples of thin, branching, crossing tubes in the FISBe layout (ground truth: an
(instances, z, y, x) uint8 zarr, channel c holding c+1; prediction: an int32 HDF5 label image
with jittered, split, merged, missed and false-positive neurons plus small fragments) and
prints for each:

- the floor: one streamed pass over both files (read every chunk, count nonzero voxels);
- the suite's scoring of the sample (read, preprocessing, skeletons, every metric) in a fresh
  process: wall seconds, peak RSS, ratio to the floor;
- the whole command line (``python -m evaluation``) on the sample;
- with ``--verify``: the per-image result of a straightforward dense computation
  (``test/helpers/fisbe_dense.py``: full-volume masks and full-volume skeletons, as the reference
  computes them) and whether every value is identical.

    python bench/fisbe_volume.py                       # both samples, verify the first
    python bench/fisbe_volume.py --sample real --verify
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import in_fresh_process, peak_rss_mb, run_cli, score_first_task

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "test"))

SAMPLES = {
    # name: (shape, neurons, neuron length range, radius range, seed)
    "first": ((128, 512, 512), 20, (400, 900), (1, 3), 20240601),
    "real": ((385, 685, 686), 7, (1500, 3000), (2, 4), 20240602),
}


def generate(name: str, folder: Path) -> tuple[Path, Path, dict]:
    """Writes phase/<name>.zarr + phase.yaml and input/<name>.hdf; returns the two folders."""
    import h5py
    import zarr
    from helpers import fisbe_synthetic as syn

    shape, count, length, radius, seed = SAMPLES[name]
    rng = np.random.default_rng(seed)
    truth = syn.neurons(rng, shape, count, length=length, radius=radius)
    predicted = syn.prediction(rng, shape, truth, false_positives=3, fragments=5)
    phase, submission = folder / "phase", folder / "input"
    phase.mkdir(parents=True)
    submission.mkdir()
    group = zarr.open_group(str(phase / f"{name}.zarr"), mode="w", zarr_format=2)
    array = group.create_array("volumes/gt_instances", shape=(count,) + shape, dtype=np.uint8, chunks=(1, 64, 256, 256))
    array.attrs["dim_neurons"] = [2, 5]
    for c, voxels in enumerate(truth):
        channel = np.zeros(int(np.prod(shape)), np.uint8)
        channel[voxels] = c + 1
        array[c] = channel.reshape(shape)
        del channel
    (phase / "phase.yaml").write_text("suite: fisbe\nworkers: 1\n")
    labels = syn.label_image(shape, predicted)
    with h5py.File(submission / f"{name}.hdf", "w") as f:
        f.create_dataset("volumes/labels", data=labels, chunks=(32, 128, 128), compression="gzip", compression_opts=1)
    boxes = []
    for voxels in truth + predicted:
        coords = np.asarray(np.unravel_index(voxels, shape))
        boxes.append(np.prod(np.ptp(coords, axis=1) + 3) / np.prod(shape))
    info = {
        "gt_instances": count,
        "pred_labels": len(predicted),
        "gt_voxels": int(sum(v.size for v in truth)),
        "mean_box_share": float(np.mean(boxes)),
        "sum_box_share": float(np.sum(boxes)),
    }
    return phase, submission, info


def _generate(name: str, folder: Path, queue) -> None:
    queue.put(generate(name, folder))


def _floor(phase: Path, submission: Path, queue) -> None:
    """One streamed pass over both files: every chunk decoded once, nonzero voxels counted."""
    import h5py
    import zarr

    started = time.perf_counter()
    total = 0
    for path in phase.glob("*.zarr"):
        array = zarr.open_array(str(path / "volumes/gt_instances"), mode="r")
        for c in range(array.shape[0]):
            for z in range(0, array.shape[1], array.chunks[1]):
                total += int(np.count_nonzero(array[c, z : z + array.chunks[1]]))
    for path in submission.glob("*.hdf"):
        with h5py.File(path, "r") as f:
            data = f["volumes/labels"]
            for z in range(0, data.shape[0], data.chunks[0]):
                total += int(np.count_nonzero(data[z : z + data.chunks[0]]))
    queue.put((time.perf_counter() - started, peak_rss_mb(), total))


def _verify(phase: Path, submission: Path, name: str, result: dict, queue) -> None:
    queue.put(verify(phase, submission, name, result))


def verify(phase: Path, submission: Path, name: str, result: dict) -> tuple[bool, float]:
    import h5py
    import zarr
    from helpers import fisbe_dense

    from evaluation.report import sanitize as to_json

    array = zarr.open_array(str(phase / f"{name}.zarr" / "volumes/gt_instances"), mode="r")
    gt = np.asarray(array[...])
    with h5py.File(submission / f"{name}.hdf", "r") as f:
        pred = np.asarray(f["volumes/labels"][...])[None]
    started = time.perf_counter()
    dense = to_json(fisbe_dense.evaluate(gt, pred, dims=list(array.attrs["dim_neurons"]), partly=False))
    return dense == result, time.perf_counter() - started


def run(name: str, check: bool) -> None:
    shape, count = SAMPLES[name][0], SAMPLES[name][1]
    print(
        f"== sample '{name}': {count} neurons, GT {(count,) + shape} uint8, prediction {shape} int32   (load: {os.getloadavg()[0]:.2f})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        phase, submission, info = in_fresh_process(_generate, name, Path(tmp))
        print(f"generated in {time.perf_counter() - started:.1f} s: {json.dumps(info)}")
        floor, floor_rss, _ = in_fresh_process(_floor, phase, submission)
        print(f"floor (one streamed pass over both files)  {floor:8.2f} s  peak RSS {floor_rss:7.0f} MB")
        scored = score_first_task("fisbe", phase, submission)
        seconds, peak, result = scored["seconds"], scored["peak_mb"], scored["result"]
        print(
            f"suite scoring of the sample                {seconds:8.2f} s  peak RSS {peak:7.0f} MB  ({seconds / floor:.1f}x floor)"
        )
        general = result["general"]
        print(
            "  "
            + json.dumps(
                {
                    k: general[k]
                    for k in ("Num GT", "Num Pred", "avg_f1_cov_score", "avg_gt_skel_coverage", "TP_05", "FS", "FM", "GT_overlap")
                }
            )
        )
        cli = run_cli(submission, phase, Path(tmp) / "out")
        print(
            f"command line, end to end                   {cli['seconds']:8.2f} s  peak RSS {cli['peak_mb']:7.0f} MB (largest process)  exit {cli['exit']}"
        )
        if cli["exit"] != 0:
            print(cli["stderr"][-2000:])
            sys.exit(1)
        if check:
            same, dense_seconds = in_fresh_process(_verify, phase, submission, name, result)
            print(f"dense full-volume computation: {'identical' if same else 'DIFFERENT'} results ({dense_seconds:.1f} s)")
            if not same:
                sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", choices=["first", "real", "both"], default="both")
    parser.add_argument("--verify", action="store_true", help="also compare with the dense computation (every sample)")
    args = parser.parse_args()
    for name in ["first", "real"] if args.sample == "both" else [args.sample]:
        run(name, args.verify or (args.sample == "both" and name == "first"))


if __name__ == "__main__":
    main()
