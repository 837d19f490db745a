"""The ranking's data as challenge organizers hold it: challengeR's long table.

``as.challenge`` (challengeR 1.0.5, ``R/challengeR.R``) takes a data frame with one row per
(task, algorithm, case) and the value; ``rank --table FILE.csv`` reads that table from a CSV
file, so an organizer who scored the submissions elsewhere ranks them without building result
folders. Cells read as R's ``read.csv`` reads them: ``NA``, ``NaN`` and an empty cell are
missing (``na.treat`` then decides), ``Inf`` and ``-Inf`` are infinite values, ranked as
values, and hexadecimal floats (``0x1.8p+1``) are exact.
"""

import csv
import math
from pathlib import Path

from evaluation.errors import GraderError
from evaluation.organizer.ranking import methods
from evaluation.organizer.ranking.config import Spec

COLUMNS = ("task", "algorithm", "case", "value")  # "task" may be absent: one task
MISSING = ("", "NA", "NaN", "nan")
INFINITE = {"Inf": math.inf, "inf": math.inf, "+Inf": math.inf, "-Inf": -math.inf, "-inf": -math.inf}


def columns(text: str | None) -> dict[str, str]:
    """``--columns task=Task,algorithm=alg_name,...``: the table's header for each role."""
    chosen = {role: role for role in COLUMNS}
    for item in (text or "").split(","):
        if item.strip():
            role, _, header = item.partition("=")
            if role.strip() not in COLUMNS or not header.strip():
                raise GraderError(f"--columns {item!r}: expected ROLE=HEADER with ROLE one of {', '.join(COLUMNS)}")
            chosen[role.strip()] = header.strip()
    return chosen


def value(cell: str, where: str) -> float:
    cell = cell.strip()
    if cell in MISSING:
        return math.nan
    if cell in INFINITE:
        return INFINITE[cell]
    try:
        return float.fromhex(cell) if cell.lower().lstrip("+-").startswith("0x") else float(cell)  # R reads both
    except ValueError:
        raise GraderError(f"{where}: {cell!r} is not a number, NA, NaN or Inf") from None


def read(path: Path, spec: Spec, smaller_is_better: bool, names: dict[str, str]) -> list[methods.Task]:
    """One task per value of the task column (one task without it), as ``as.challenge``
    builds them: a repeated (algorithm, case) is refused, an absent one is missing."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise GraderError(f"cannot read the table {path}: {exc}") from None
    header = set(rows[0]) if rows else set()
    needed = [names[role] for role in COLUMNS[1:] if names[role] not in header]
    if needed:
        raise GraderError(f"{path}: no column {', '.join(repr(n) for n in needed)} (columns: {', '.join(sorted(header))})")
    by_task: dict[str, list] = {}
    for number, row in enumerate(rows, start=2):
        task = row.get(names["task"], "") if names["task"] in header else ""
        entry = (row[names["case"]], row[names["algorithm"]], value(row[names["value"]], f"{path} line {number}"))
        by_task.setdefault(task, []).append(entry)
    algorithms = sorted({algorithm for entries in by_task.values() for _, algorithm, _ in entries})
    return [
        methods.prepare(
            task or names["value"],
            entries,
            not smaller_is_better,
            spec.na_treat,
            algorithms=algorithms,
            without_values=spec.without_values,
        )
        for task, entries in sorted(by_task.items())
    ]
