"""CodaBench scoring program: ``input/ref`` + ``input/res`` -> ``output/scores.json``.

The scoring command (``metadata.yaml``) runs ``python3 -m evaluation --platform codabench
--input /app/input --output /app/output``. The reference data (``ref``) carries the phase: the
image is public on CodaBench, so ground truth must come with the competition, not be baked in.

Because ``ref/`` decides where the ground truth is read from, CodaBench is recognised without
being named only on the worker's own mount (``/app/input`` holding ``ref/`` and ``res/``): a
Grand-Challenge upload is extracted into ``/input`` and could carry a ``ref/`` of its own. The submission
folder holds a ``metadata`` file written by the worker, which is ignored. ``scores.json`` must
be a flat {column key: finite number}; keys must match the leaderboard's columns.
"""

import hashlib
import html
import json
import math
import os
from pathlib import Path

from evaluation import log
from evaluation import report as reports
from evaluation.contract import Result
from evaluation.platforms.base import Platform, default_ground_truth, phase_folder

_log = log.get(__name__)
SCORES_FILE = "scores.json"
DETAILS_FILE = "detailed_results.html"
STORED_LIMIT = 1e10  # CodaBench stores scores as Decimal(20, 10)
WORKER_INPUT = Path("/app/input")  # where the compute worker mounts ref/ and res/


class CodaBench(Platform):
    name = "codabench"
    # The default queue's compute workers end any run at 1200 s, whatever the phase's
    # execution time limit says ("Execution Time Limit exceeded. Limit was 1200 seconds").
    time_limit_s = 1200.0

    @staticmethod
    def recognises(input_folder: Path) -> bool:
        on_worker_mount = Path(os.path.abspath(input_folder)) == WORKER_INPUT
        return on_worker_mount and (input_folder / "ref").is_dir() and (input_folder / "res").is_dir()

    def default_ground_truth(self) -> Path:
        return phase_folder(self.input / "ref", "the reference data (input/ref)") or default_ground_truth()

    def submission_folder(self) -> Path:
        return self.input / "res"

    def private_output(self) -> None:
        """None: the worker zips the whole output folder as the scoring result, which the
        submission's owner may download (compute_worker.py ``push_output``; api
        ``SubmissionFilesSerializer.get_scoring_result``, unless the organizer hides it),
        and every other folder is deleted with the run; a column in scores.json reaches the
        owner too, hidden or not (``SubmissionSerializer.scores``). The private leaderboard
        comes from ``rescore`` on the downloaded uploads."""
        return None

    def publish(self, report: Result, metrics: dict) -> None:
        reports.write_atomic(self.output / SCORES_FILE, json.dumps(scores(report.leaderboard), indent=2).encode())
        page = (report.files.get("report.html") if "case" in metrics else None) or summary_page(report.leaderboard, metrics)
        reports.write_atomic(self.output / DETAILS_FILE, page.encode() if isinstance(page, str) else page)


def scores(leaderboard: dict) -> dict[str, float]:
    """The leaderboard as CodaBench stores it: finite numbers below 1e10 only, under keys a
    leaderboard column can have (``column_key``; keys that fit keep their column, a shortened
    one that would take another's gets the hashed form). An undefined value is left out (the
    column shows n/a) rather than written as a number it is not."""
    kept = {}
    for key, value in sorted(leaderboard.items(), key=lambda item: len(item[0]) > MAX_KEY):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and abs(value) < STORED_LIMIT:
            column = column_key(key)
            kept[column if column not in kept else column_key(key, abbreviate=False)] = float(value)
        else:
            _log.warning("score_left_out", key=key, value=repr(value))
    return kept


MAX_KEY = 36  # codabench src/apps/leaderboards/models.py: Column.key = CharField(max_length=36)
ABBREVIATIONS = (
    ("normalized", "norm"),
    ("hausdorff", "hd"),
    ("distance", "dist"),
    ("instance", "inst"),
    ("semantic", "sem"),
    ("combined", "comb"),
    ("accuracy", "acc"),
    ("overall", "all"),
    ("coverage", "cov"),
    ("precision", "prec"),
    ("recall", "rec"),
    ("score", "s"),
)


def column_key(key: str, abbreviate: bool = True) -> str:
    """A leaderboard key as a CodaBench column key: unchanged up to 36 characters; longer ones
    with the words of ``ABBREVIATIONS`` shortened, in that order, until it fits (CellMap's
    ``instance_normalized_hausdorff_distance`` becomes ``instance_norm_hausdorff_distance``);
    failing that, its first 27 characters, '_' and 8 hex digits of its SHA-1. Stable: the same
    key always maps to the same column."""
    if len(key) <= MAX_KEY:
        return key
    words = key.split("_")
    for long, short in ABBREVIATIONS if abbreviate else ():
        words = [short if word == long else word for word in words]
        if len("_".join(words)) <= MAX_KEY:
            return "_".join(words)
    return f"{key[: MAX_KEY - 9]}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def summary_page(leaderboard: dict, metrics: dict) -> str:
    """A self-contained page: leaderboard values, then per-case results as a table."""
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{_number(v)}</td></tr>" for k, v in leaderboard.items())
    cases = "".join(
        f"<h3>{html.escape(str(name))}</h3><pre>{html.escape(json.dumps(reports.sanitize(value), indent=1))}</pre>"
        for name, value in metrics.get("case", {}).items()
    )
    failures = "".join(f"<li>{html.escape(f['case'])}: {html.escape(f['message'])}</li>" for f in metrics.get("failures", []))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Detailed results</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}pre{font-size:12px}</style></head><body>"
        f"<h1>Detailed results ({html.escape(metrics.get('suite', ''))})</h1><h2>Leaderboard</h2><table>{rows}</table>"
        + (f"<h2>Failed cases</h2><ul>{failures}</ul>" if failures else "")
        + f"<h2>Per case</h2>{cases}</body></html>"
    )


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else html.escape(str(value))
