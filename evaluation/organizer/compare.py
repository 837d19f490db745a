"""``python -m evaluation compare OLD NEW --output DIR``: what a re-score changed, and why.

OLD and NEW are two ``rescore`` outputs (or any folders of ``<submission>/metrics.json``, such
as the conformance runs ``lock.sh`` keeps), or two ``metrics.json`` files. For every submission
the changelog gives the old and new leaderboard value and rank, every value under ``case`` and
``aggregates`` that moved by more than the tolerance (with the move), and the causes as far as
the two results' provenance shows them: the grader's version or commit, the locked dependency
set (which packages), the phase (phase.yaml, which truth folders), the options in force, the
reference or the metric definitions. Written as ``changelog.json``, ``changelog.csv`` (one row
per moved value) and ``changelog.html`` (a page an organizer can post). ``rescore --compare OLD``
writes the same into its output folder at the end.
"""

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from evaluation import figures, report
from evaluation.errors import GraderError
from evaluation.organizer.leaderboard import ranked

CHANGELOG = "changelog"  # changelog.json, changelog.csv, changelog.html
CASE_SCORES_FILE = "case_scores.json"  # rescore's, beside metrics.json
PHASE_FILE = "phase.yaml"


@dataclass
class Side:
    """One result set: per submission its metrics.json, and the ranks its leaderboard gave."""

    metrics: dict[str, dict]
    ranks: dict[str, int | None] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)
    single: bool = False  # one metrics.json given by itself (a file, or the folder holding it)


def load(path: Path) -> Side:
    """A metrics.json file, a folder holding one, or a folder of ``<submission>/metrics.json``
    (a rescore output: its leaderboard.json gives the ranks and statuses)."""
    path = Path(path)
    if path.is_file():
        return Side({path.parent.name or "submission": _with_full_provenance(path)}, single=True)
    if (path / report.METRICS_FILE).is_file():
        return Side({path.name: _with_full_provenance(path / report.METRICS_FILE)}, single=True)
    if not path.is_dir():
        raise GraderError(f"{path} is neither a metrics.json file nor a folder of results")
    found = {p.parent.name: _with_full_provenance(p) for p in sorted(path.glob(f"*/{report.METRICS_FILE}"))}
    side = Side(found)
    table = path / "leaderboard.json"
    if table.is_file():
        for row in json.loads(table.read_text())["rows"]:
            side.ranks[row["submission"]] = row["rank"]
            side.statuses[row["submission"]] = row["status"]
    if not found and not side.statuses:
        raise GraderError(f"{path} holds no metrics.json (directly or one folder down)")
    return side


def _with_full_provenance(path: Path) -> dict:
    """A metrics.json, with the organizer's provenance from rescore's case_scores.json beside
    it when there is one (metrics.json leaves out the truth folders' digests)."""
    metrics = _read(path)
    beside = path.parent / CASE_SCORES_FILE
    if beside.is_file() and isinstance(_read(beside).get("provenance"), dict):
        metrics["provenance"] = _read(beside)["provenance"]
    return metrics


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise GraderError(f"{path} is not valid JSON: {exc}") from None


# --------------------------------------------------------------------------------------------
# Values


def leaves(node, path: tuple = (), strings: bool = False):
    """(path, value) of every number, null and boolean of a result tree (and string)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, str(key)), strings)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, (*path, str(index)), strings)
    elif node is None or isinstance(node, (int, float)) or (strings and isinstance(node, str)):
        yield path, node


def _moved(old, new, tolerance: float) -> bool:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
    if numbers:
        return not (old == new or abs(new - old) <= tolerance)
    return old != new


def _move(path: str, old, new) -> dict:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
    return {"path": path, "old": old, "new": new, "delta": (new - old) if numbers else None}


def moved_values(old: dict, new: dict, tolerance: float) -> list[dict]:
    """Per case (and ``aggregates``), the values that moved: appeared, vanished or changed by
    more than ``tolerance``."""
    found = []
    for section in ("aggregates", "case"):
        before, after = old.get(section) or {}, new.get(section) or {}
        groups = sorted(set(before) | set(after)) if section == "case" else [None]
        for group in groups:
            a = dict(leaves(before.get(group, {}) if group is not None else before))
            b = dict(leaves(after.get(group, {}) if group is not None else after))
            moves = [
                _move("/".join(p), a.get(p), b.get(p))
                for p in sorted(set(a) | set(b))
                if (p in a) != (p in b) or _moved(a.get(p), b.get(p), tolerance)
            ]
            if moves:
                found.append({"case": group if group is not None else "(aggregates)", "values": moves})
    return found


# --------------------------------------------------------------------------------------------
# Causes


def paired(old: Side, new: Side) -> tuple[Side, Side]:
    """Two results given one by one are the same submission before and after, whatever their
    folders are called: both are named as NEW is."""
    if old.single and new.single:
        (name,) = new.metrics
        old = Side({name: next(iter(old.metrics.values()))}, single=True)
    return old, new


def submission_causes(old: dict | None, new: dict | None) -> list[dict]:
    """Why one submission's results differ: it is only on one side, or its provenance says."""
    if old is None or new is None:
        return [{"cause": "submission", "detail": f"absent from {'OLD' if old is None else 'NEW'}"}]
    return causes(old.get("provenance"), new.get("provenance"))


def causes(old: dict | None, new: dict | None) -> list[dict]:
    """What differs between two results' provenance, in the order an organizer looks for it."""
    if not old or not new:
        missing = "OLD" if not old else "NEW"
        return [{"cause": "unknown", "detail": f"{missing} carries no provenance (made before the grader recorded it)"}]
    found = []
    grader_a, grader_b = old.get("grader", {}), new.get("grader", {})
    for key, name in (("version", "grader version"), ("commit", "grader source commit")):
        if grader_a.get(key) != grader_b.get(key):
            found.append({"cause": name, "detail": f"{grader_a.get(key)} -> {grader_b.get(key)}"})
    deps_a, deps_b = grader_a.get("dependencies", {}), grader_b.get("dependencies", {})
    changed = [
        f"{n} {deps_a.get(n)} -> {deps_b.get(n)}" for n in sorted(set(deps_a) | set(deps_b)) if deps_a.get(n) != deps_b.get(n)
    ]
    if changed or grader_a.get("lock_sha256") != grader_b.get("lock_sha256"):
        found.append({"cause": "dependency set", "detail": "; ".join(changed) or "the lock changed (same installed versions)"})
    found += _phase_causes(old.get("phase", {}), new.get("phase", {}))
    reference_a, reference_b = old.get("suite", {}).get("reference"), new.get("suite", {}).get("reference")
    if reference_a != reference_b:
        found.append({"cause": "reference", "detail": _changes(reference_a, reference_b)})
    if old.get("definitions") != new.get("definitions"):
        metrics = sorted({*old.get("definitions", {}), *new.get("definitions", {})})
        differ = [m for m in metrics if old.get("definitions", {}).get(m) != new.get("definitions", {}).get(m)]
        found.append({"cause": "metric definitions", "detail": ", ".join(differ)})
    return found


def _changes(old, new, shown: int = 10) -> str:
    """``path: old -> new`` for each value that differs between two trees (the first ``shown``)."""
    a, b = (dict(leaves(tree, strings=True)) if isinstance(tree, dict) else {(): tree} for tree in (old, new))
    differ = [p for p in sorted(set(a) | set(b)) if a.get(p) != b.get(p)]
    text = "; ".join(f"{'.'.join(p) or 'value'}: {a.get(p)} -> {b.get(p)}" for p in differ[:shown])
    return text + (f"; ... and {len(differ) - shown} more" if len(differ) > shown else "")


def _phase_causes(old: dict, new: dict) -> list[dict]:
    found = []
    print_a, print_b = old.get("fingerprint", {}), new.get("fingerprint", {})
    if print_a.get("sha256") != print_b.get("sha256"):
        groups_a, groups_b = print_a.get("groups"), print_b.get("groups")
        if groups_a is None or groups_b is None:
            found.append(
                {
                    "cause": "phase files",
                    "detail": "the phase's files changed (which ones: metrics.json keeps the phase's digest only, "
                    "rescore's case_scores.json has one per folder)",
                }
            )
        else:
            differ = sorted(k for k in set(groups_a) | set(groups_b) if groups_a.get(k) != groups_b.get(k))
            if PHASE_FILE in differ:
                found.append({"cause": "phase.yaml", "detail": "phase.yaml changed"})
            truth = [k for k in differ if k != PHASE_FILE]
            if truth:
                labelled = [
                    f"{k} ({'added' if k not in groups_a else 'removed' if k not in groups_b else 'changed'})" for k in truth
                ]
                found.append({"cause": "truth files", "detail": ", ".join(labelled)})
    options_a, options_b = old.get("options", {}), new.get("options", {})
    changed = [
        f"{k}: {options_a.get(k)!r} -> {options_b.get(k)!r}"
        for k in sorted(set(options_a) | set(options_b))
        if options_a.get(k) != options_b.get(k)
    ]
    if changed:
        found.append({"cause": "options", "detail": "; ".join(changed)})
    return found


# --------------------------------------------------------------------------------------------
# The changelog


class _Ranked:  # the shape leaderboard.ranked reads
    def __init__(self, name: str, status: str, board: dict):
        self.name, self.status, self.leaderboard = name, status, board


def _ranks(side: Side, key: str, higher: bool) -> dict[str, int | None]:
    if side.ranks:
        return side.ranks
    entries = [
        _Ranked(n, "scored" if not m.get("failures") else "failed", m.get("leaderboard", {})) for n, m in side.metrics.items()
    ]
    return {e.name: rank for rank, e in ranked(entries, key, higher)}


def _ranking_key(metrics: dict) -> str | None:
    return ((metrics.get("provenance") or {}).get("suite") or {}).get("ranking")


def changelog(old: Side, new: Side, tolerance: float = 0.0) -> dict:
    """Per submission: leaderboard value and rank before and after, moved values, causes."""
    any_metrics = next(iter(new.metrics.values()), None) or next(iter(old.metrics.values()), {})
    suite = (any_metrics.get("provenance") or {}).get("suite", {})
    key, higher = suite.get("ranking"), suite.get("higher_is_better", True)
    if key is None:  # results from before provenance: the first leaderboard column
        key = next(iter(any_metrics.get("leaderboard", {}) or any_metrics.get("aggregates", {})), None)
    keys = {_ranking_key(m) for side in (old, new) for m in side.metrics.values()} - {None}
    mixed = len(keys) > 1  # results of several suites (e.g. the conformance runs): no common rank
    ranks_a, ranks_b = ({}, {}) if mixed else (_ranks(old, key, higher), _ranks(new, key, higher))
    rows = []
    for name in sorted(set(old.metrics) | set(new.metrics) | set(old.statuses) | set(new.statuses)):
        a, b = old.metrics.get(name), new.metrics.get(name)
        own = _ranking_key(b or a or {}) or key
        value_a = (a or {}).get("leaderboard", {}).get(own)
        value_b = (b or {}).get("leaderboard", {}).get(own)
        moves = moved_values(a, b, tolerance) if a and b else []
        rows.append(
            {
                "submission": name,
                "old": {
                    "value": value_a,
                    "rank": ranks_a.get(name),
                    "status": old.statuses.get(name, "scored" if a else "absent"),
                },
                "new": {
                    "value": value_b,
                    "rank": ranks_b.get(name),
                    "status": new.statuses.get(name, "scored" if b else "absent"),
                },
                "value_moved": _moved(value_a, value_b, tolerance),
                "rank_moved": ranks_a.get(name) != ranks_b.get(name),
                "moved": moves,
                "causes": submission_causes(a, b) if (moves or _moved(value_a, value_b, tolerance)) else [],
            }
        )
    every_cause = sorted({f"{c['cause']}: {c['detail']}" for row in rows for c in row["causes"]})
    return {
        "ranking": None if mixed else key,  # None: each submission by its own suite's ranking key
        "higher_is_better": higher,
        "tolerance": tolerance,
        "submissions": rows,
        "summary": {
            "submissions": len(rows),
            "values_moved": sum(len(m["values"]) for row in rows for m in row["moved"]),
            "submissions_moved": sum(bool(row["moved"]) or row["value_moved"] for row in rows),
            "ranks_moved": sum(row["rank_moved"] for row in rows),
            "causes": every_cause,
        },
    }


def csv_text(log: dict) -> str:
    header = ["submission", "old_rank", "new_rank", "old_value", "new_value", "case", "path", "old", "new", "delta", "causes"]
    records = []
    for row in log["submissions"]:
        head = [row["submission"], row["old"]["rank"], row["new"]["rank"], row["old"]["value"], row["new"]["value"]]
        reasons = "; ".join(f"{c['cause']}: {c['detail']}" for c in row["causes"])
        if not row["moved"]:
            records.append([*head, "", "", "", "", "", reasons])
        for case in row["moved"]:
            records += [[*head, case["case"], v["path"], v["old"], v["new"], v["delta"], reasons] for v in case["values"]]
    return figures.csv_text(header, records)


MAX_SHOWN = 50  # moved values shown per case on the page (the CSV has all)


def html_page(log: dict) -> str:
    e = lambda value: html.escape("" if value is None else str(value))  # noqa: E731
    number = lambda v: e(f"{v:.6g}" if isinstance(v, float) and math.isfinite(v) else v)  # noqa: E731
    summary = log["summary"]
    overview = figures.table(
        ["submission", "old value", "new value", "old rank", "new rank", "cases moved", "causes"],
        [
            [
                e(r["submission"]),
                number(r["old"]["value"]),
                number(r["new"]["value"]),
                e(r["old"]["rank"]),
                e(r["new"]["rank"]),
                str(len(r["moved"])),
                "<br>".join(f"<b>{e(c['cause'])}</b>: {e(c['detail'])}" for c in r["causes"]),
            ]
            for r in log["submissions"]
        ],
    )
    details = []
    for r in log["submissions"]:
        for case in r["moved"]:
            shown = case["values"][:MAX_SHOWN]
            rows = [[e(v["path"]), number(v["old"]), number(v["new"]), number(v["delta"])] for v in shown]
            more = (
                f"<p>... and {len(case['values']) - MAX_SHOWN} more (changelog.csv)</p>"
                if len(case["values"]) > MAX_SHOWN
                else ""
            )
            details.append(
                f"<h3>{e(r['submission'])}: {e(case['case'])}</h3>" + figures.table(["value", "old", "new", "move"], rows) + more
            )
    causes_list = "".join(f"<li>{e(c)}</li>" for c in summary["causes"]) or "<li>none: nothing moved</li>"
    body = (
        "<h1>What the re-score changed</h1><p>"
        + (
            f"Ranking by <code>{e(log['ranking'])}</code> ({'higher' if log['higher_is_better'] else 'lower'} is better); "
            if log["ranking"]
            else "Results of several suites: each value is its suite's ranking key, no common rank; "
        )
        + f"values compared with tolerance {e(log['tolerance'])}. "
        f"{summary['submissions_moved']} of {summary['submissions']} submissions moved, {summary['ranks_moved']} changed rank, "
        f"{summary['values_moved']} values moved.</p><h2>Causes</h2><ul>{causes_list}</ul><h2>Submissions</h2>{overview}"
        + ("<h2>Moved values</h2>" + "".join(details) if details else "")
    )
    style = "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    return figures.page("Re-score changelog", body, style)


def write(output: Path, log: dict) -> list[Path]:
    paths = [output / f"{CHANGELOG}.{suffix}" for suffix in ("json", "csv", "html")]
    contents = [report.json_bytes(log, listing_infinities=True), csv_text(log).encode(), html_page(log).encode()]
    for path, content in zip(paths, contents):
        report.write_atomic(path, content)
    return paths


def compare(old: Path, new: Path, output: Path, tolerance: float = 0.0) -> dict:
    """Write the changelog of OLD -> NEW into ``output``; returns its summary."""
    log = changelog(*paired(load(old), load(new)), tolerance)
    write(output, log)
    return log["summary"]
