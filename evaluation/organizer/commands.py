"""Organizer subcommands: ``python -m evaluation rescore|rank|sensitivity|rasterize ...``.

They are for running a leaderboard, not for the platforms: ``rescore`` scores many submissions
against one phase on a Dask cluster (``organizer.rescore``), ``rank`` computes the final
ranking as challengeR does and how certain it is (``organizer.ranking``), ``sensitivity``
re-scores and re-ranks a segmentation phase under every library's metric definitions; they
need the ``ops`` extra (``pip install 'evaluation[ops]'``: Dask distributed, matplotlib).
``compare`` explains what changed between two re-scores (``organizer.compare``).
``rasterize`` precomputes a tomo_foam phase's label volumes and ``fingerprint`` hashes a
phase's files once, when the image is built. Exit status: 0 done, 1 an error (the
last stderr line says which), or for ``rescore`` some unit that a re-run would try again (an
internal error or a worker that kept dying).
"""

import argparse
import json
import sys
from pathlib import Path

from evaluation import log
from evaluation.errors import EXIT_INTERNAL, EXIT_OK, GraderError

_log = log.get("evaluation")


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    rescore = commands.add_parser("rescore", help="score every submission of a folder against one phase, on Dask")
    rescore.add_argument("--ground-truth", type=Path, required=True, help="phase folder (phase.yaml + ground truth)")
    rescore.add_argument(
        "--submissions", type=Path, required=True, help="folder with one subfolder or archive (.zip, .tar.gz, ...) per submission"
    )
    rescore.add_argument(
        "--output",
        type=Path,
        required=True,
        help="receives <submission>/metrics.json, leaderboard.csv/.json and the resumable state (.rescore/)",
    )
    rescore.add_argument(
        "--scheduler",
        default=None,
        help="address of a running Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a LocalCluster)",
    )
    rescore.add_argument("--workers", type=int, default=None, help="LocalCluster worker processes (default: the CPUs available)")
    rescore.add_argument(
        "--worker-timeout",
        type=float,
        default=300.0,
        help="give up (keeping every unit done) after this many seconds without any Dask worker (default 300)",
    )
    rescore.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="OLD",
        help="an earlier rescore output: write OUT/changelog.* (see 'compare')",
    )
    rescore.add_argument("--tolerance", type=float, default=0.0, help="with --compare: smallest move reported (default 0: any)")
    rescore.add_argument("--log-level", default=None)

    compare = commands.add_parser(
        "compare", help="what changed between two rescore outputs (or two metrics.json files), and why: changelog.json/.csv/.html"
    )
    compare.add_argument("old", type=Path, help="the earlier rescore output folder or metrics.json")
    compare.add_argument("new", type=Path, help="the later one")
    compare.add_argument("--output", type=Path, required=True, help="receives changelog.json, changelog.csv, changelog.html")
    compare.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="smallest absolute move reported (default 0: every value that is not identical)",
    )
    compare.add_argument("--log-level", default=None)

    rank = commands.add_parser("rank", help="the final ranking (challengeR's methods) and how certain it is")
    rank.add_argument(
        "inputs",
        nargs="*",
        type=Path,
        help="a rescore output folder, submission result folders, case_scores.json or metrics.json files",
    )
    rank.add_argument(
        "--table",
        type=Path,
        default=None,
        help="challengeR's long table as CSV (as.challenge: a row per task, algorithm, case with its value; NA, NaN, Inf "
        "as R reads them) instead of rescore outputs",
    )
    rank.add_argument(
        "--columns",
        default=None,
        metavar="ROLE=HEADER,...",
        help="the table's column for each role: task, algorithm, case, value (default: those names; no task column: one task)",
    )
    rank.add_argument(
        "--smaller-better", action="store_true", help="with --table: smaller values are better (challengeR's smallBetter)"
    )
    rank.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="one task of a multi-task challenge (repeatable): its name and its rescore output folder",
    )
    rank.add_argument(
        "--phase", type=Path, default=None, help="phase folder whose final_ranking applies (default: the one rescore recorded)"
    )
    rank.add_argument(
        "--output",
        type=Path,
        required=True,
        help="receives final_ranking.json/.html, leaderboard.csv, the figures, and ranking.json/.png/.html, pairwise.png",
    )
    rank.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default: the phase's, 1000)")
    rank.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: the phase's, 0)")
    rank.add_argument("--confidence", type=float, default=None, help="level of the intervals (default: the phase's, 0.95)")
    rank.add_argument(
        "--null-as",
        type=float,
        default=None,
        help="leaderboard uncertainty only: value for a null case score (default: leave that part out)",
    )
    rank.add_argument(
        "--private", action="store_true", help="rank by the private cases' scores (a rescore of a phase with private_cases)"
    )
    rank.add_argument("--log-level", default=None)

    sensitivity = commands.add_parser(
        "sensitivity", help="segmentation: re-score under every library's metric definitions and show which places flip"
    )
    sensitivity.add_argument("--ground-truth", type=Path, required=True, help="phase folder (phase.yaml + ground truth)")
    sensitivity.add_argument(
        "--submissions", type=Path, required=True, help="folder with one subfolder or archive per submission"
    )
    sensitivity.add_argument(
        "--output",
        type=Path,
        required=True,
        help="receives one rescore output folder per definition and sensitivity.json/.csv/.png/.html",
    )
    sensitivity.add_argument("--scheduler", default=None, help="address of a running Dask scheduler (default: a LocalCluster)")
    sensitivity.add_argument(
        "--workers", type=int, default=None, help="LocalCluster worker processes (default: the CPUs available)"
    )
    sensitivity.add_argument("--log-level", default=None)

    fingerprint = commands.add_parser(
        "fingerprint",
        help="hash a phase folder's files once and cache the hashes in it (image build time, or before making a platform's tarball)",
    )
    fingerprint.add_argument("phase_dir", type=Path)
    fingerprint.add_argument("--log-level", default=None)

    raster = commands.add_parser(
        "rasterize", help="tomo_foam: write each phantom's 'labels' volume from its 'spheres' void list (image build time)"
    )
    raster.add_argument("phase_dir", type=Path)
    raster.add_argument("--phantom", action="append", help="only this phantom (repeatable)")
    raster.add_argument("--threads", type=int, default=1)
    raster.add_argument("--force", action="store_true", help="overwrite existing label volumes")
    raster.add_argument("--log-level", default=None)
    return parser.parse_args(argv)


def _rescore(args) -> int:
    from evaluation.organizer.rescore import rescore

    summary = rescore(
        args.ground_truth, args.submissions, args.output, args.scheduler, args.workers, worker_timeout=args.worker_timeout
    )
    if args.compare is not None:
        from evaluation.organizer.compare import compare

        summary["changelog"] = compare(args.compare, args.output, args.output, args.tolerance)
    print(json.dumps(summary), flush=True)
    return EXIT_INTERNAL if summary["retry"] else EXIT_OK


def _task_groups(args) -> dict[str, list[Path]]:
    groups = {"": list(args.inputs)} if args.inputs else {}
    for item in args.task:
        name, _, path = item.partition("=")
        if not name or not path or name in groups:
            raise GraderError(f"--task {item!r}: expected a new NAME=PATH")
        groups[name] = [Path(path)]
    if not groups:
        raise GraderError("nothing to rank: give a rescore output folder (or --task NAME=PATH)")
    return groups


def _rank(args) -> int:
    import dataclasses

    from evaluation.organizer.ranking import config, data, final, final_report, table, uncertainty, uncertainty_report

    groups = {} if args.table else _task_groups(args)
    spec = config.find_phase(args.phase, [p for paths in groups.values() for p in paths])
    chosen = {"resamples": args.resamples, "seed": args.seed, "confidence": args.confidence}
    spec = dataclasses.replace(spec, **{k: v for k, v in chosen.items() if v is not None})
    if args.table:
        tasks = data.common_submissions(table.read(args.table, spec, args.smaller_better, table.columns(args.columns)))
    else:
        tasks = data.tasks(groups, spec, args.private)
    result = final.rank_tasks(tasks, spec)
    written, sections = [], ()
    if len(tasks if args.table else groups) == 1:
        try:
            if args.table:
                scores = uncertainty.from_task(tasks[0], null_as=args.null_as)
            else:
                scores = uncertainty.load(next(iter(groups.values())), null_as=args.null_as, private=args.private)
        except GraderError as exc:
            _log.warning("leaderboard_uncertainty_left_out", reason=str(exc))
        else:
            bootstrapped = uncertainty.bootstrap(
                scores, resamples=spec.resamples or 1000, seed=spec.seed, confidence=spec.confidence
            )
            written += uncertainty_report.write(args.output, bootstrapped)
            sections = (uncertainty_report.html_section(bootstrapped, *_uncertainty_pngs(args.output)),)
    written += final_report.write(args.output, result, sections)
    print(
        json.dumps(
            {
                "submissions": len(result.algorithms),
                "tasks": len(result.results),
                "winner": [result.algorithms[i] for i in result.order if result.rank[i] == 1],
                "written": [str(p) for p in written],
            }
        ),
        flush=True,
    )
    return EXIT_OK


def _uncertainty_pngs(folder: Path) -> tuple[bytes, bytes]:
    from evaluation.organizer.ranking.uncertainty_report import PAIRWISE_PNG, RANKING_PNG

    return (folder / RANKING_PNG).read_bytes(), (folder / PAIRWISE_PNG).read_bytes()


def _sensitivity(args) -> int:
    from evaluation.organizer.ranking import sensitivity

    result = sensitivity.run(args.ground_truth, args.submissions, args.output, args.scheduler, args.workers)
    changed = {v["variant"]: v.get("changed", v.get("error")) for v in result["variants"]}
    print(json.dumps({"submissions": len(result["submissions"]), "changed": changed}), flush=True)
    return EXIT_OK


def _compare(args) -> int:
    from evaluation.organizer.compare import compare

    print(json.dumps(compare(args.old, args.new, args.output, args.tolerance)), flush=True)
    return EXIT_OK


def _rasterize(args) -> int:
    from evaluation.suites.tomo_foam import rasterize_phase

    written = rasterize_phase(args.phase_dir, args.phantom, args.threads, args.force)
    print("\n".join(str(p) for p in written), flush=True)
    return EXIT_OK


def _fingerprint(args) -> int:
    import time

    from evaluation import provenance

    started = time.monotonic()
    found = provenance.phase_fingerprint(args.phase_dir, into_phase=True)
    found.pop("groups")
    print(json.dumps({**found, "seconds": round(time.monotonic() - started, 3)}), flush=True)
    return EXIT_OK


RUN = {
    "rescore": _rescore,
    "rank": _rank,
    "sensitivity": _sensitivity,
    "rasterize": _rasterize,
    "fingerprint": _fingerprint,
    "compare": _compare,
}


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log.configure(args.log_level)
    try:
        return RUN[args.command](args)
    except GraderError as exc:
        _log.error("operation_failed", command=args.command, message=str(exc))
        message = str(exc)
    except Exception as exc:
        _log.exception("internal_error", command=args.command)
        message = f"internal error: {type(exc).__name__}: {exc}"
    sys.stderr.flush()
    print(f"{args.command} failed: {message}", file=sys.stderr, flush=True)
    return EXIT_INTERNAL
