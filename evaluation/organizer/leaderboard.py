"""``rescore``'s leaderboards: ``leaderboard.csv/.json`` over the public cases, and with a
phase's ``private_cases`` ``private-leaderboard.csv/.json``, the sealed final ranking, from
each submission's private result. Both carry the run's provenance (the build and the phase)."""

import csv
import io
from pathlib import Path

from evaluation import report
from evaluation.contract import Suite

LEADERBOARD = "leaderboard"  # leaderboard.csv / leaderboard.json
PRIVATE_LEADERBOARD = "private-leaderboard"
SCORED = "scored"


def ranked(entries: list, key: str, higher_is_better: bool, board=lambda e: e.leaderboard) -> list[tuple[int | None, object]]:
    """Scored submissions by ``key`` of ``board(entry)`` (competition ranking: ties share the
    better rank), then the others, unranked — a submission with a failed case is not ranked,
    as on the platforms."""
    scored = [e for e in entries if e.status == SCORED and board(e).get(key) is not None]
    scored.sort(key=lambda e: (-board(e)[key] if higher_is_better else board(e)[key], e.name))
    rows, previous, rank = [], None, 0
    for position, entry in enumerate(scored, start=1):
        if board(entry)[key] != previous:
            rank, previous = position, board(entry)[key]
        rows.append((rank, entry))
    rest = sorted((e for e in entries if e not in scored), key=lambda e: e.name)
    return rows + [(None, e) for e in rest]


def write(output: Path, suite: Suite, phase_folder: Path, entries: list, provenance: dict, private: bool = False) -> list[dict]:
    """One leaderboard as JSON and CSV; ``private``: from the submissions' private results."""
    board = (lambda e: e.private_leaderboard) if private else (lambda e: e.leaderboard)
    shown = lambda e: board(e) if e.status == SCORED else {}  # noqa: E731 - a failed run's partial values are no score
    rows = [
        {
            "rank": rank,
            "submission": e.name,
            "status": e.status,
            suite.ranking: shown(e).get(suite.ranking),
            "leaderboard": shown(e),
            "message": e.message,
        }
        for rank, e in ranked(entries, suite.ranking, suite.higher_is_better, board)
    ]
    name = PRIVATE_LEADERBOARD if private else LEADERBOARD
    table = {
        "suite": suite.name,
        "ranking": suite.ranking,
        "higher_is_better": suite.higher_is_better,
        "phase": str(phase_folder),
        "cases": "private" if private else "public",
        "provenance": provenance,
        "rows": rows,
    }
    report.write_atomic(output / f"{name}.json", report.json_bytes(table, listing_infinities=True))
    columns = sorted({c for row in rows for c in row["leaderboard"]} - {suite.ranking})
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["rank", "submission", "status", suite.ranking, *columns, "message"])
    for row in rows:
        cells = [
            row["rank"],
            row["submission"],
            row["status"],
            row[suite.ranking],
            *(row["leaderboard"].get(c) for c in columns),
            row["message"],
        ]
        writer.writerow(["" if cell is None else cell for cell in cells])
    report.write_atomic(output / f"{name}.csv", text.getvalue().encode())
    return rows
