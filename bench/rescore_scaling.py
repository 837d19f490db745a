"""Benchmark: how ``python -m evaluation rescore`` throughput scales from 1 to 2 Dask workers.

Generates a seeded CellMap phase (CROPS crops of SIZE^3 voxels, each with an instance label of
INSTANCES ellipsoids and a semantic label) and SUBMISSIONS perturbed predictions, then prints:

- the floor: every unit scored serially in this process by ``suite.score`` (no scheduling,
  no process start, no summaries) — the pure compute the cluster has to do;
- ``rescore`` on a LocalCluster of 1 worker and of 2 workers, each from an empty output
  folder, as a command (start-up, planning, scheduling and writing included): wall seconds,
  units per second, peak RSS of the largest process, ratio to the floor. The command runs
  from a fresh interpreter that does nothing else, and the peak is that interpreter's
  ``RUSAGE_CHILDREN`` (the command and the Dask processes it waited for): this bench's own
  children would carry its data generation's high-water mark, which Linux passes on across
  fork and exec;
- per run, the scoring span (first unit's start to last unit's end, from the stored unit
  records) and how many units ran at once on average (summed unit seconds / span): with 2
  workers this shows whether Dask kept both busy, apart from how fast the CPUs were;
- the 1 -> 2 worker speed-up, and a re-run of the 2-worker output folder (everything on disk:
  nothing is recomputed).

    python bench/rescore_scaling.py [--crops 4] [--size 128] [--instances 60] [--submissions 8]

On a shared machine the figures are pessimistic: the load average is printed beside them.
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
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cellmap_crop import make_crop  # noqa: E402  (the seeded crop generator of the crop bench)
from common import in_fresh_process  # noqa: E402

VOXEL_SIZE = [8.0, 8.0, 8.0]


def _write(root: Path, crop: str, label: str, data: np.ndarray) -> None:
    array = zarr.open_group(str(root), mode="a", zarr_format=2).create_array(
        f"{crop}/{label}", shape=data.shape, dtype=data.dtype, chunks=(64, 64, 64), overwrite=True
    )
    array[...] = data
    array.attrs.update({"voxel_size": VOXEL_SIZE, "translation": [0.0, 0.0, 0.0], "shape": list(data.shape)})


def make_phase(folder: Path, crops: int, size: int, instances: int, submissions: int) -> tuple[Path, Path]:
    phase, subs = folder / "phase", folder / "submissions"
    manifest = ["crop_name,dataset,class_label,voxel_size,translation,shape"]
    for number in range(1, crops + 1):
        truth, pred = make_crop(size, instances, seed=number)
        crop = f"crop{number}"
        _write(phase / "truth.zarr", crop, "mito", truth)
        _write(phase / "truth.zarr", crop, "er", (truth > 0).astype(np.uint8))
        for label in ("mito", "er"):
            manifest.append(f"{number},bench,{label},[8.0;8.0;8.0],[0.0;0.0;0.0],[{size};{size};{size}]")
        for s in range(submissions):  # each submission drops a different share of instances and is shifted
            mine = np.where(pred % (s + 3) == 0, 0, pred).astype(np.uint32)
            mine = np.roll(mine, s % 3, axis=2)
            _write(subs / f"team{s}" / "submission.zarr", crop, "mito", mine)
            _write(subs / f"team{s}" / "submission.zarr", crop, "er", (np.roll(truth, s, axis=1) > 0).astype(np.uint8))
    (phase / "manifest.csv").write_text("\n".join(manifest) + "\n")
    (phase / "phase.yaml").write_text("suite: cellmap\n")
    return phase, subs


def floor(phase: Path, subs: Path) -> tuple[float, int]:
    """Seconds to score every unit serially in this process, and the number of units."""
    from evaluation import phase as phases
    from evaluation.contract import Resources
    from evaluation.submission import Submission
    from evaluation.suites import get

    suite, loaded = get("cellmap"), phases.load(phase)
    total, units = 0.0, 0
    for team in sorted(subs.iterdir()):
        for task in suite.plan(Submission(team), loaded, Resources.detect()).tasks:
            started = time.perf_counter()
            suite.score(task.payload)
            total += time.perf_counter() - started
            units += 1
    return total, units


def scoring_span(out: Path) -> tuple[float, float]:
    """From the stored unit records: seconds from the first unit's start to the last unit's end
    (the cluster's scoring time, without interpreter and cluster start-up), and the summed
    seconds of the units themselves."""
    records = [json.loads(p.read_text()) for p in (out / ".rescore" / "units").rglob("*.json")]
    ends = [r["computed"]["at"] for r in records]
    starts = [r["computed"]["at"] - r["seconds"] for r in records]
    return max(ends) - min(starts), sum(r["seconds"] for r in records)


def _command(command: list[str], queue) -> None:
    """Runs in a fresh interpreter that generated nothing: its ``RUSAGE_CHILDREN`` peak is the
    largest of the command and of the processes the command waited for (the Dask workers)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    queue.put(
        {
            "seconds": time.perf_counter() - started,
            "exit": done.returncode,
            "stdout": done.stdout,
            "stderr": done.stderr,
            "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
    )


def run(phase: Path, subs: Path, out: Path, workers: int) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS (MB, largest process) and the summary of one rescore command."""
    done = in_fresh_process(
        _command,
        [
            sys.executable,
            "-m",
            "evaluation",
            "rescore",
            "--ground-truth",
            str(phase),
            "--submissions",
            str(subs),
            "--output",
            str(out),
            "--workers",
            str(workers),
        ],
    )
    if done["exit"] != 0:
        sys.exit(done["stderr"][-3000:])
    return done["seconds"], done["peak_mb"], json.loads(done["stdout"].strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crops", type=int, default=4)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--instances", type=int, default=60)
    parser.add_argument("--submissions", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        phase, subs = make_phase(Path(tmp), args.crops, args.size, args.instances, args.submissions)
        print(
            f"{args.submissions} submissions x {args.crops} crops x 2 labels, {args.size}^3 voxels, ~{args.instances} instances a crop; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
        )
        floor_s, units = floor(phase, subs)
        print(f"floor: {units} units scored serially in-process   {floor_s:7.2f} s   {units / floor_s:6.2f} units/s")
        walls, spans = {}, {}
        for workers in (1, 2):
            out = Path(tmp) / f"out{workers}"
            wall, peak, summary = run(phase, subs, out, workers)
            assert summary["units_computed"] == units, summary
            walls[workers] = wall
            spans[workers], busy = scoring_span(out)
            print(
                f"rescore, LocalCluster {workers} worker{'s' if workers > 1 else ' '}      {wall:7.2f} s   {units / wall:6.2f} units/s   "
                f"peak RSS {peak:6.0f} MB   {wall / floor_s:4.2f}x floor"
            )
            print(
                f"  of which scoring on the cluster  {spans[workers]:7.2f} s   {units / spans[workers]:6.2f} units/s   "
                f"(units busy {busy:.2f} s: {busy / spans[workers]:.2f} units running on average)"
            )
        print(
            f"speed-up 1 -> 2 workers: {walls[1] / walls[2]:.2f}x end to end, {spans[1] / spans[2]:.2f}x scoring   "
            f"(load average now {os.getloadavg()[0]:.2f})"
        )
        identical = all(
            (Path(tmp) / "out1" / team.name / "metrics.json").read_bytes()
            == (Path(tmp) / "out2" / team.name / "metrics.json").read_bytes()
            for team in subs.iterdir()
        )
        print(f"metrics.json identical between the 1- and 2-worker runs: {identical}")
        wall, _, summary = run(phase, subs, Path(tmp) / "out2", 2)
        print(
            f"re-run on the finished output: {wall:.2f} s, units computed {summary['units_computed']}, "
            f"submissions reused {summary['submissions_reused']}"
        )


if __name__ == "__main__":
    main()
