"""Command line: ``python -m evaluation --input DIR --ground-truth DIR --output DIR``.

Exit status: 0 scored; 2 the submission is unusable (the last stderr line says what to fix,
in the participant's terms, without revealing anything of the ground truth); 1 internal
error (the organizer's phase or the grader itself; details in the log above it).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from evaluation import (
    __version__,
    grading,
    log,
    machine,
    numba_cache,
    organizer,
    platforms,
    preflight,
    provenance,
    public,
    report,
    sealed,
    suites,
)
from evaluation import phase as phases
from evaluation.contract import Resources, verdict
from evaluation.errors import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_SUBMISSION,
    INTERNAL_ERROR_LINE,
    GraderError,
    SubmissionError,
    last_line,
)
from evaluation.platforms import additional, invoke
from evaluation.platforms.base import BAKED_GROUND_TRUTH, PLATFORM_GROUND_TRUTH

_log = log.get("evaluation")

CONTAINER_INPUT = Path("/input")
CONTAINER_OUTPUT = Path("/output")
# Set by the commands after which the process may end without the interpreter's teardown
# (``__main__``): grading and the preflight close what they open; the organizer's commands
# (Dask clusters) and the server do not qualify.
FAST_EXIT: dict = {}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation",
        description=(
            "Score a segmentation submission against a phase's ground truth and write metrics.json. "
            "The phase folder holds phase.yaml (the metric suite and its options, see "
            "schemas/phase.schema.json) and the suite's ground truth. Suites: " + ", ".join(suites.names()) + "."
        ),
        epilog=(
            "Exit status: 0 scored; 2 the submission is unusable (the last stderr line says why); "
            "1 internal error. With no arguments the container's paths are used. "
            "Before uploading: 'python -m evaluation check --input DIR --phase PHASE_DIR' runs the platform's checks "
            "without the ground truth; 'publish' writes the public phase it runs on. "
            "Organizer subcommands: 'rescore' (many submissions, on Dask), 'rank' (the final ranking "
            "and its uncertainty), 'sensitivity' (ranks under each metric definition), 'compare' (what a "
            "re-score changed, and why), 'fingerprint' (hash a phase's files once) and 'rasterize' "
            "(tomo_foam label volumes); see 'python -m evaluation rescore --help'. "
            "'python -m evaluation serve [--port N] [arguments above]' answers Grand-Challenge's invoke API "
            "(GET /health, POST /invoke grades once per call; port 4743)."
        ),
    )
    parser.add_argument(
        "--input",
        type=Path,
        default=CONTAINER_INPUT,
        help="folder holding the submission: a .zip, a .zarr folder, or the files themselves (default: /input)",
    )
    parser.add_argument(
        "--ground-truth",
        type=Path,
        default=None,
        help=f"phase folder with phase.yaml and ground truth (default: INPUT/ref on CodaBench, else "
        f"{PLATFORM_GROUND_TRUTH} if present, else the baked {BAKED_GROUND_TRUTH})",
    )
    parser.add_argument(
        "--output", type=Path, default=CONTAINER_OUTPUT, help="folder that receives metrics.json (default: /output)"
    )
    parser.add_argument(
        "--platform",
        choices=["auto", *platforms.PLATFORMS],
        default="auto",
        help="where the inputs come from: grand-challenge (INPUT/predictions.json lists algorithm jobs), "
        "codabench (INPUT/ref and INPUT/res; also writes scores.json), local; "
        "default: detected from the input folder",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: phase option, else the CPUs available)"
    )
    parser.add_argument("--log-level", default=None, help="debug, info, warning or error (default: info)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser.parse_args(argv)


def grade(platform: platforms.Platform, workers: int | None = None) -> int:
    """Score the platform's submission against its phase and write every output; the exit
    status, and the participant's last line, follow from the cases' outcomes."""
    phase = phases.load(platform.ground_truth)
    public.refuse_grading(phase)
    suite = suites.get(phase.suite)
    declared_outputs = additional.outputs(phase)  # checked before anything is scored
    _log.info("grading", suite=suite.name, platform=platform.name, version=__version__)
    graded = grading.grade(platform, phase, suite, workers)
    _log.info("resources", **_resources(graded.resources))
    if grading.stopped_at_deadline(graded):
        return _stopped(platform, phase, suite, graded, declared_outputs)
    _write(platform, phase, suite, graded, declared_outputs)
    tasks, outcomes = graded.plan.tasks, graded.outcomes
    failures = [outcome for outcome in outcomes.values() if not outcome.ok]
    for failure in failures:
        _log.error("case_failed", case=failure.key, kind=failure.kind, message=failure.message)
    worker_peaks = [o.peak_rss_mb for o in outcomes.values() if o.peak_rss_mb is not None]
    _log.info(  # the last line repeats the first ones: a platform may keep only the end of a long log
        "written",
        output=str(platform.output / report.METRICS_FILE),
        leaderboard={suite.ranking: graded.summaries.public.leaderboard.get(suite.ranking)},
        cases=len(outcomes),
        failed=len(failures),
        peak_rss_mb=machine.peak_rss_mb(),
        worker_peak_rss_mb=max(worker_peaks, default=None),
        suite=suite.name,
        platform=platform.name,
        version=__version__,
        **_resources(graded.resources),
    )
    code, line = verdict(tasks, outcomes, organizer=platform.name == "local")
    if line:
        last_line(line)
    return code


def _stopped(
    platform: platforms.Platform, phase: phases.Phase, suite: suites.Suite, graded: grading.Graded, declared_outputs: dict
) -> int:
    """The run's time limit stopped scoring: the cases scored in time go to the log (and, when
    the phase asks for partial results, to metrics.json, marked partial); the last line says
    how many were scored, the slowest, and the limit."""
    limit = grading.run_time_limit(phase, platform)
    scored = sorted((o for o in graded.outcomes.values() if o.ok), key=lambda o: o.seconds, reverse=True)
    partial = grading.in_time(suite, phase, graded)
    _log.warning(
        "run_time_limit_reached",
        limit_s=limit,
        scored=[o.key for o in scored],
        stopped=[o.key for o in grading.stopped_at_deadline(graded)],
        leaderboard_of_scored=partial.summaries.public.leaderboard,
    )
    slowest = ", ".join(f"{o.key} {o.seconds:.0f} s" for o in scored[:3]) or "none"
    written = phase.option("partial_results")
    if written:
        _write(platform, phase, suite, partial, declared_outputs, partial=True)
    last_line(
        f"Evaluation stopped at the run's time limit of {limit:g} s: {len(scored)} of {len(graded.outcomes)} cases were "
        f"scored (slowest: {slowest}); " + ("the score covers those cases only" if written else "no score was written")
    )
    return EXIT_OK if written else EXIT_INTERNAL


def _write(
    platform: platforms.Platform,
    phase: phases.Phase,
    suite: suites.Suite,
    graded: grading.Graded,
    declared_outputs: dict,
    partial: bool = False,
) -> None:
    """metrics.json with its provenance, the suite's files (when cases are published), the
    phase's additional outputs, the private cases' document where the platform keeps one, and
    whatever the platform itself needs."""
    summaries = graded.summaries
    result = summaries.public
    publish_cases = phase.option("publish_cases")
    made_by = grading.provenance_of(phase, suite, summaries, provenance.phase_fingerprint(phase.root))
    document = grading.metrics_document(suite, graded.outcomes, summaries, made_by, publish_cases, graded.given_inputs)
    if partial:
        document["partial"] = True
    files = {
        **(result.files if publish_cases else {}),
        **{path: additional.render(source, result, result.files) for path, source in declared_outputs.items()},
    }
    written = report.write(platform.output, document, files)
    private = grading.private_document(suite, summaries, made_by)
    if private is not None:
        where = sealed.write_private(platform.private_output(), private)
        _log.info("private_results", written=str(where) if where else None, cases=len(summaries.private_cases))
    platform.publish(result, written)


def _resources(resources: Resources) -> dict:
    """What the run may use, and which limit sized its memory budget."""
    return {
        "workers": resources.workers,
        "memory_budget_mb": resources.memory_bytes >> 20,
        "memory_limited_by": resources.memory_limited_by,
        "limits_mb": {name: value >> 20 for name, value in machine.memory_limits().items()},
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in organizer.COMMANDS:
        from evaluation.organizer.commands import main as organizer_command

        return organizer_command(argv)
    if argv and argv[0] == "serve":
        log.configure()
        return invoke.serve(argv[1:])
    if argv and argv[0] == "publish":
        return preflight.publish_command(argv[1:])
    FAST_EXIT["allowed"] = True
    if argv and argv[0] == "check":
        args = preflight.parse_check_args(argv[1:])
        if args.score:
            args.output = args.output or Path(tempfile.mkdtemp(prefix="evaluation-check-"))
            return run(args, lambda platform: grade(platform, args.workers))
        return run(args, lambda platform: preflight.check(platform, args.workers, args.memory_mb, args.output))
    args = parse_args(argv)
    return run(args, lambda platform: grade(platform, args.workers))


def run(args: argparse.Namespace, action) -> int:
    """``action(platform)`` for the command line's arguments, with the exit status and last
    line every failure ends in: 2 and the participant's line for a submission error, 1 and the
    neutral line for anything else (its cause in the log)."""
    log.configure(args.log_level)
    provenance.start()  # the source checkout's git state, asked for now and read when the results are written
    numba_cache.use_install_cache(numba_cache.compiled_folders())  # before any kernel module is imported
    try:
        platform = platforms.detect(args.platform, args.input, args.ground_truth, args.output)
        log.hide_ground_truth(platform.ground_truth)
        return action(platform)
    except SubmissionError as exc:
        _log.error("submission_rejected", message=str(exc))
        last_line(f"Submission rejected: {exc}")
        return EXIT_SUBMISSION
    except GraderError as exc:
        _log.error("phase_or_grader_error", message=str(exc))
        if platforms.recognise(args.platform, args.input) == "local":  # the organizer's own run: the cause
            last_line(f"Phase or grader error: {exc}")
            return EXIT_INTERNAL
    except Exception:
        _log.exception("internal_error")
    last_line(INTERNAL_ERROR_LINE)
    return EXIT_INTERNAL
