"""Command line: ``python -m evaluation --input DIR --ground-truth DIR --output DIR``.

Exit status: 0 scored; 2 the submission is unusable (the last stderr line says what to fix,
in the participant's terms, without revealing anything of the ground truth); 1 internal
error (the organizer's phase or the grader itself; details in the log above it).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from evaluation import __version__, log, machine, numba_cache, organizer, platforms, report, runner, suites
from evaluation import phase as phases
from evaluation.contract import Resources
from evaluation.errors import EXIT_INTERNAL, EXIT_OK, EXIT_SUBMISSION, GraderError, SubmissionError
from evaluation.platforms.base import BAKED_GROUND_TRUTH, PLATFORM_GROUND_TRUTH

_log = log.get("evaluation")

CONTAINER_INPUT = Path("/input")
CONTAINER_OUTPUT = Path("/output")
INTERNAL_ERROR_LINE = (
    "Evaluation failed because of an internal error of the grader, not because of your submission; "
    "please contact the challenge organizers."
)


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
            "Organizer subcommands: 'rescore' (many submissions, on Dask), 'rank' (ranking "
            "uncertainty) and 'rasterize' (tomo_foam label volumes); see 'python -m evaluation rescore --help'."
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
    phase = phases.load(platform.ground_truth)
    suite = suites.get(phase.suite)
    _log.info("grading", suite=suite.name, platform=platform.name, version=__version__)
    with tempfile.TemporaryDirectory(prefix="evaluation-") as scratch:
        resources = Resources.detect(
            workers or phase.option("workers"),
            (phase.option("memory_limit_mb") or 0) * 1024**2,
            phase.option("case_time_limit_s"),
        )
        try:  # the submission's intake: running out of memory on it is the upload's fault
            submission = platform.submission(phase, Path(scratch))
        except MemoryError:
            raise SubmissionError(
                f"reading the submission needed more than the {resources.memory_bytes >> 20} MB of memory available; "
                "upload smaller files"
            ) from None
        _log.info(
            "resources",
            workers=resources.workers,
            memory_budget_mb=resources.memory_bytes >> 20,
            limits_mb={name: value >> 20 for name, value in machine.memory_limits().items()},
        )
        plan = suite.plan(submission, phase, resources)
        outcomes = runner.run(plan.tasks, suite.score, resources)
        result = suite.summarize(phase, plan, outcomes)
    failures = [o for o in outcomes.values() if not o.ok]
    publish_cases = phase.option("publish_cases")
    document = report.metrics_document(suite.name, result, outcomes, publish_cases)
    written = report.write(platform.output, document, result.files if publish_cases else {})
    platform.publish(result, written)
    for failure in failures:
        _log.error("case_failed", case=failure.key, kind=failure.kind, message=failure.message)
    worker_peaks = [o.peak_rss_mb for o in outcomes.values() if o.peak_rss_mb is not None]
    _log.info(
        "written",
        output=str(platform.output / report.METRICS_FILE),
        cases=len(outcomes),
        failed=len(failures),
        peak_rss_mb=machine.peak_rss_mb(),
        worker_peak_rss_mb=max(worker_peaks, default=None),
    )
    if not failures:
        return EXIT_OK
    if any(f.kind != "submission" for f in failures):
        _last_line(INTERNAL_ERROR_LINE)
        return EXIT_INTERNAL
    more = f" (and {len(failures) - 1} more problem(s); every case is listed in metrics.json)" if len(failures) > 1 else ""
    _last_line(f"Submission rejected: {failures[0].message}{more}")
    return EXIT_SUBMISSION


def _last_line(text: str) -> None:
    """The line a participant sees: plain text, last on stderr."""
    sys.stderr.flush()
    print(" ".join(text.split()), file=sys.stderr, flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in organizer.COMMANDS:
        from evaluation.organizer.commands import main as organizer_command

        return organizer_command(argv)
    args = parse_args(argv)
    log.configure(args.log_level)
    numba_cache.use_install_cache(numba_cache.compiled_folders())  # before any kernel module is imported
    try:
        platform = platforms.detect(args.platform, args.input, args.ground_truth, args.output)
        log.hide_ground_truth(platform.ground_truth)
        return grade(platform, args.workers)
    except SubmissionError as exc:
        _log.error("submission_rejected", message=str(exc))
        _last_line(f"Submission rejected: {exc}")
        return EXIT_SUBMISSION
    except GraderError as exc:
        _log.error("phase_or_grader_error", message=str(exc))
    except Exception:
        _log.exception("internal_error")
    _last_line(INTERNAL_ERROR_LINE)
    return EXIT_INTERNAL
