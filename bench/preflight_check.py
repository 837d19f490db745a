"""Benchmark: the preflight (``python -m evaluation check``) on the 1000^3 CellMap crop of
``cellmap_crop.py --workload nuclei1000`` (30 nuclei in a uint16 label and a 1000^3 uint8
semantic label, 128^3 chunks), against the time it takes to read the crop.

The check reads and decodes every stored chunk of the submission, as grading reads it, and
nothing of the ground truth; it must take no longer than reading the crop. Printed, each under
Grand-Challenge's per-process limit (``prlimit --data=7516192768``) where it is a command line:

- the floors: every stored array of the submission read once, chunk by chunk, with the
  grader's zarr reader, in this process; and of the submission and the truth together (what
  grading must at least read, ``cellmap_crop.decoding_floor``);
- ``python -m evaluation publish`` of the phase;
- ``check`` against the public phase and against the full phase (published on the fly): wall
  time of the command line (interpreter, imports, intake, plan, the tasks) and of its tasks,
  with the estimate it prints; and with one worker, its tasks one after the other against the
  submission's floor;
- for comparison, grading (``cellmap_crop.py --workload nuclei1000`` measures it too).

    python bench/preflight_check.py [--cache DIR] [--repeat 2]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cellmap_crop import GC_DATA_LIMIT, decoding_floor, load, read_arrays, write_large
from common import run_cli

PREFIX = ("prlimit", f"--data={GC_DATA_LIMIT}")


def command(*args: str) -> dict:
    """``python -m evaluation ARGS`` under the platform's limit: wall seconds, exit status, the
    tasks' seconds from the log and the last stderr line."""
    started = time.perf_counter()
    done = subprocess.run([*PREFIX, sys.executable, "-m", "evaluation", *args], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    tasks = [json.loads(line)["seconds"] for line in done.stdout.splitlines() if '"event": "task_finished"' in line]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return {"seconds": seconds, "exit": done.returncode, "tasks": tasks, "last_line": lines[-1] if lines else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="generate the crop into (and reuse it from) this folder")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measurement (the best is printed)")
    args = parser.parse_args()
    folder = args.cache / "nuclei1000" if args.cache else Path(tempfile.mkdtemp(prefix="preflight-bench-"))
    try:
        started = time.perf_counter()
        phase, submission = write_large(folder, "nuclei1000")
        print(f"nuclei1000: data ready in {time.perf_counter() - started:.1f} s")
        import compileall

        import evaluation

        compileall.compile_dir(Path(evaluation.__file__).parent, quiet=1)  # as the image does at build
        best = lambda runs: min(runs, key=lambda r: r["seconds"])  # noqa: E731
        floor_submission = min(read_arrays(submission / "submission.zarr" / "crop1") for _ in range(args.repeat))
        floor_both = min(decoding_floor(phase, submission) for _ in range(args.repeat))
        print(f"floor: reading the submission                 {floor_submission:8.2f} s   [{load()}]")
        print(f"floor: reading the submission and the truth   {floor_both:8.2f} s")

        public = folder / "public"
        shutil.rmtree(public, ignore_errors=True)
        published = command("publish", str(phase), "--output", str(public))
        print(f"publish                                       {published['seconds']:8.2f} s  exit {published['exit']}")
        for name, target in (("public", public), ("full", phase)):
            run = best([command("check", "--input", str(submission), "--phase", str(target)) for _ in range(args.repeat)])
            tasks = ", ".join(f"{s:.2f}" for s in run["tasks"])
            print(
                f"check, {name:6s} phase: command line          {run['seconds']:8.2f} s  exit {run['exit']}  "
                f"({run['seconds'] / floor_both:.2f}x the crop's floor, {run['seconds'] / floor_submission:.2f}x the "
                f"submission's); tasks {tasks} s   [{load()}]"
            )
        print(f"  {run['last_line']}")
        one = best(
            [command("check", "--input", str(submission), "--phase", str(public), "--workers", "1") for _ in range(args.repeat)]
        )
        print(
            f"check, public phase, one worker: tasks        {sum(one['tasks']):8.2f} s  "
            f"({sum(one['tasks']) / floor_submission:.2f}x reading the submission); command line {one['seconds']:.2f} s"
        )
        graded = run_cli(submission, phase, folder / "out", prefix=PREFIX)
        print(f"grading: command line                         {graded['seconds']:8.2f} s  exit {graded['exit']}   [{load()}]")
    finally:
        if args.cache is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
