"""The preflight participants run before they upload, and the public phase it runs on.

``python -m evaluation publish PHASE_DIR --output PUBLIC_DIR`` (organizers) writes the public
phase: ``phase.yaml`` and what planning needs, no ground truth (``evaluation.public``).

``python -m evaluation check --input SUBMISSION --phase PHASE_DIR`` (participants) runs what
grading runs up to scoring: the platform's intake (the upload's tree checked, platform files
and additional inputs set aside, an archive unpacked), the suite's plan (names, metadata,
refusals), then in worker processes, within the platform's memory budget, the suite's
``check`` of every task: each submitted array read and decoded as scoring reads it and
compared with the truth's header (shape, spacing, origin, direction). A full phase is published
to a temporary folder first, so a check gives the same answer against either. It ends as
grading ends: exit 2 with the same last stderr line, 1 with the same neutral line, or 0 with a
last line that starts "Would be scored:" and gives the tasks, the cases without a prediction
and the estimated time and memory on the platform's default machine. ``check --score``, with a
full phase, grades as the platform does (``cli.grade``).
"""

import argparse
import json
import tempfile
from pathlib import Path

from evaluation import __version__, errors, grading, log, machine, public, runner, suites
from evaluation import phase as phases
from evaluation.contract import MEMORY_HEADROOM, Outcome, Plan, Resources, verdict
from evaluation.errors import EXIT_INTERNAL, EXIT_OK, GraderError, PhaseError
from evaluation.phase import Phase
from evaluation.platforms import Platform, additional
from evaluation.progress import duration

_log = log.get("evaluation")

# Grand-Challenge's default evaluation machine (docs/platforms.md): 2 vCPUs and 8 GB, every
# process's data segment capped at 7168 MiB (the shim's RLIMIT_DATA).
PLATFORM_CPUS = 2
PLATFORM_MEMORY_MB = 7168
# What a run spends outside its tasks (interpreter, imports, intake, plan, report files):
# 1.5-2 s on the development machine (bench/README.md), rounded up.
STARTUP_SECONDS = 3.0
SUMMARY_FILE = "check.json"


def parse_check_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation check",
        description=(
            "Check a submission before uploading it: the platform's intake, archive unpacking, file reading, "
            "geometry and naming checks and planning, against a public phase (written by 'python -m evaluation "
            "publish') or a full one, stopping before scoring. Every submitted array is read and decoded."
        ),
        epilog=(
            "Exit status as grading: 0 would be scored (the last stderr line starts 'Would be scored:'), "
            "2 the platform would reject the submission (the same last line as the platform), 1 the phase or the "
            "grader failed. With --score and a full phase, grades as the platform does and writes metrics.json."
        ),
    )
    parser.add_argument("--input", type=Path, required=True, help="folder holding the submission, as uploaded")
    parser.add_argument(
        "--phase", "--ground-truth", dest="ground_truth", type=Path, required=True, help="public or full phase folder"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"receives {SUMMARY_FILE} (with --score: metrics.json; default: a new temporary folder)",
    )
    parser.add_argument("--score", action="store_true", help="grade against the full phase as the platform does")
    parser.add_argument(
        "--platform",
        choices=["auto", "local", "grand-challenge", "codabench"],
        default="auto",
        help="whose intake to run (default: detected from the input folder, as grading does)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help=f"worker processes (default: phase option, else {PLATFORM_CPUS})"
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=PLATFORM_MEMORY_MB,
        help=f"the platform machine's memory limit (default: {PLATFORM_MEMORY_MB}, Grand-Challenge's)",
    )
    parser.add_argument("--log-level", default=None, help="debug, info, warning or error (default: info)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser.parse_args(argv)


# --------------------------------------------------------------------------------------------
# publish


def publish_phase(phase: Phase, output: Path) -> None:
    """Write the public phase of ``phase`` into ``output`` (new or empty, outside the phase)."""
    if public.is_public(phase):
        raise PhaseError(f"{phases.PHASE_FILE} says 'public: true': this phase is already public")
    output = Path(output)
    root = phase.root.resolve()
    if output.resolve() == root or root in output.resolve().parents:
        raise PhaseError("the public phase must be written outside the phase folder")
    if output.exists() and any(output.iterdir()):
        raise PhaseError(f"{output} is not empty; the public phase is written into a new or empty folder")
    suite = suites.get(phase.suite)
    output.mkdir(parents=True, exist_ok=True)
    public.write_phase_file(phase, output)
    suite.publish(phase, output)


def publish_command(argv) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation publish",
        description=(
            "Write the public phase participants check their submissions against (python -m evaluation check): "
            "phase.yaml with 'public: true' and, per suite, only what intake and planning need (case names, shapes, "
            "voxel sizes, geometry, data types, the crop manifest), never a voxel of ground truth nor a value "
            "derived from one."
        ),
    )
    parser.add_argument("phase_dir", type=Path, help="the full phase folder (phase.yaml and ground truth)")
    parser.add_argument("--output", type=Path, required=True, help="new or empty folder that receives the public phase")
    parser.add_argument("--log-level", default=None)
    args = parser.parse_args(argv)
    log.configure(args.log_level)
    try:
        phase = phases.load(args.phase_dir)
        publish_phase(phase, args.output)
    except GraderError as exc:
        _log.error("publish_failed", message=str(exc))
        message = str(exc)
    except Exception as exc:
        _log.exception("internal_error", command="publish")
        message = f"internal error: {type(exc).__name__}: {exc}"
    else:
        files = sorted(p.relative_to(args.output).as_posix() for p in args.output.rglob("*") if p.is_file())
        _log.info("published", suite=phase.suite, output=str(args.output), files=len(files))
        return EXIT_OK
    errors.last_line(f"publish failed: {message}")
    return EXIT_INTERNAL


# --------------------------------------------------------------------------------------------
# check


def platform_resources(phase: Phase, workers: int | None, memory_mb: int, local: bool = True) -> Resources:
    """What the platform's default machine gives a run of this phase: its CPUs (or the phase's
    ``workers``) and its memory limit lowered by the phase's ``memory_limit_mb``; with
    ``local``, also by this machine's own limits (the check runs here)."""
    limits = {"platform": memory_mb << 20}
    if phase.option("memory_limit_mb"):
        limits["phase"] = phase.option("memory_limit_mb") << 20
    if local:
        limits.update(machine.memory_limits())
    source = min(limits, key=limits.get)
    return Resources(
        workers=workers or phase.option("workers") or PLATFORM_CPUS,
        memory_bytes=int(limits[source] * MEMORY_HEADROOM),
        time_limit=phase.option("case_time_limit_s"),
        memory_limited_by=source,
    )


def check(platform: Platform, workers: int | None = None, memory_mb: int = PLATFORM_MEMORY_MB, output: Path | None = None) -> int:
    """The preflight of ``platform``'s submission against its phase (``platform.ground_truth``,
    public or full); returns the exit status grading would end with (0 would be scored)."""
    phase = phases.load(platform.ground_truth)
    if public.is_public(phase):
        return _check(platform, phase, workers, memory_mb, output)
    suites.get(phase.suite)  # an unknown suite fails as grading fails, before anything is published
    with tempfile.TemporaryDirectory(prefix="evaluation-public-") as folder:
        publish_phase(phase, Path(folder) / "phase")
        return _check(platform, phases.load(Path(folder) / "phase"), workers, memory_mb, output)


def _check(platform: Platform, phase: Phase, workers: int | None, memory_mb: int, output: Path | None) -> int:
    """``cli.grade`` up to scoring, in the same order, with ``Suite.check`` for ``Suite.score``."""
    suite = suites.get(phase.suite)
    additional.outputs(phase)
    _log.info("checking", suite=suite.name, platform=platform.name, version=__version__)
    with tempfile.TemporaryDirectory(prefix="evaluation-") as scratch:
        resources = platform_resources(phase, workers, memory_mb)
        submission, _ = grading.take_in(platform, phase, Path(scratch), resources)
        plan = grading.plan(suite, submission, phase, resources)
        outcomes = grading.execute(plan, grading.checking(suite), resources, "checking")
    code, line = verdict(plan.tasks, outcomes, organizer=platform.name == "local")
    summary = summarize(plan, outcomes, platform_resources(phase, workers, memory_mb, local=False))
    summary["estimate"]["run_time_limit_s"] = grading.run_time_limit(phase, platform)
    _log.info("check_summary", **summary)
    if output is not None:
        Path(output).mkdir(parents=True, exist_ok=True)
        (Path(output) / SUMMARY_FILE).write_text(json.dumps({"exit": code, **summary}, indent=2))
    for failure in summary["failures"]:  # every problem, where grading lists them in metrics.json
        errors.last_line(f"- {failure['message']}")
    errors.last_line(line or would_be_scored(summary))
    return code


def summarize(plan: Plan, outcomes: dict[str, Outcome], machine_resources: Resources) -> dict:
    """The tasks, the cases without a prediction, the failures, and the estimated scoring time
    (``STARTUP_SECONDS`` plus each task's ``Suite.check`` estimate, scheduled as the runner
    schedules them) and the workers' memory at its peak (their estimates and baselines) on the
    platform's machine."""
    seconds = {key: float((o.value or {}).get("seconds", 0.0)) for key, o in outcomes.items() if o.ok}
    wall, peak = runner.schedule(plan.tasks, seconds, machine_resources)
    return {
        "tasks": len(plan.tasks),
        "missing": list(plan.missing),
        "failures": [
            {"case": t.key, "kind": outcomes[t.key].kind, "message": outcomes[t.key].message}
            for t in plan.tasks
            if not outcomes[t.key].ok
        ],
        "estimate": {
            "seconds": round(STARTUP_SECONDS + wall, 1),
            "workers_peak_mb": peak >> 20,
            "machine": {"workers": machine_resources.workers, "memory_budget_mb": machine_resources.memory_bytes >> 20},
        },
    }


def would_be_scored(summary: dict) -> str:
    missing = summary["missing"]
    shown = f" ({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})" if missing else ""
    estimate = summary["estimate"]
    limit = estimate.get("run_time_limit_s")
    over = limit and estimate["seconds"] > limit
    return (
        f"Would be scored: {summary['tasks']} task(s), {len(missing)} case(s) without a prediction{shown}; "
        f"estimated scoring time {duration(estimate['seconds'])} and at most {estimate['workers_peak_mb']} MB for the "
        f"workers on the platform's default machine ({estimate['machine']['workers']} CPUs, "
        f"{estimate['machine']['memory_budget_mb']} MB for workers) - an estimate"
        + (f"; more than the run's time limit of {limit:g} s: scoring would stop before every case is scored" if over else "")
    )
    return (
        f"Would be scored: {summary['tasks']} task(s), {len(missing)} case(s) without a prediction{shown}; "
        f"estimated scoring time {duration(estimate['seconds'])}{over} and at most {estimate['workers_peak_mb']} MB for the "
        f"workers on the platform's default machine ({estimate['machine']['workers']} CPUs, "
        f"{estimate['machine']['memory_budget_mb']} MB for workers) - an estimate"
    )
