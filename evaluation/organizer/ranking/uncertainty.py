"""How certain is a leaderboard? Bootstrap over cases.

Input: per-case scores of each submission (``Result.case_scores``, written by ``rescore`` as
``<submission>/case_scores.json``). Each of B resamples draws the cases with replacement
(seeded), every submission is scored by the **mean of its case scores** over the drawn cases,
and the submissions are ranked. Out come, per submission, a percentile confidence interval of
that score and the distribution of its rank, and for each pair the share of resamples in which
one beats the other (the approach of challengeR, Wiesenfarth et al., Sci. Rep. 2021).

The resampled statistic is the case mean. For a suite whose leaderboard number is a mean of
its case scores this is the leaderboard score itself; for others (CellMap pools or weights
over crops, then takes a geometric mean) it is the nearest per-case statistic, and the
published leaderboard number is reported beside it.

Ties: a resample in which two submissions have exactly the same mean gives both the better
rank (competition ranking, as the leaderboard does: 1, 1, 3) and counts as half a win for each
in the pairwise matrix — two identical submissions therefore share rank 1 in every resample
and beat each other 50 %.

Everything is vectorised: the resampled means are one matrix product (submissions x cases)
times (cases x resamples) of draw counts, ranks one sort per resample column, the pairwise
matrix a broadcast comparison in row blocks. 100 submissions x 500 cases x 1000 resamples
take well under a second (``bench/ranking_bootstrap.py``).
"""

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, report
from evaluation.errors import GraderError
from evaluation.metrics.bootstrap import draw_counts, resampled_means

_log = log.get(__name__)
CASE_SCORES_FILE = "case_scores.json"
PRIVATE_LEADERBOARD_FILE = "private-leaderboard.json"
LEADERBOARD_FILE = "leaderboard.json"
_PAIRWISE_BLOCK_BYTES = 64 * 1024**2


@dataclass(frozen=True)
class Scores:
    """Case scores of the submissions to rank: ``matrix[i, j]`` = submission i on case j."""

    names: list[str]
    cases: list[str]
    matrix: np.ndarray
    leaderboard: np.ndarray  # the published score (NaN if unknown)
    ranking: str
    higher_is_better: bool
    subset: str = "public"  # or "private": the phase's private cases (rescore's private results)
    provenance: dict | None = None  # the build and the phase every ranked result shares


# --------------------------------------------------------------------------------------------
# Loading


def record_files(path: Path, private: bool = False) -> list[tuple[str, Path]]:
    """(submission name, file with its case scores) for one input path."""
    table = path / (PRIVATE_LEADERBOARD_FILE if private else LEADERBOARD_FILE)
    if path.is_dir() and table.is_file():  # a rescore output folder
        rows = json.loads(table.read_text())["rows"]
        skipped = [r["submission"] for r in rows if r["rank"] is None]
        if skipped:
            _log.warning("unranked_submissions_left_out", submissions=skipped)
        return [(r["submission"], path / r["submission"] / CASE_SCORES_FILE) for r in rows if r["rank"] is not None]
    if path.is_dir():
        return [(path.name, path / CASE_SCORES_FILE)]
    if path.name == CASE_SCORES_FILE or path.name == "metrics.json":
        return [(path.parent.name, path)]
    raise GraderError(f"{path}: expected a rescore output folder, a submission's result folder, case_scores.json or metrics.json")


RESCORE_FIRST = (
    "rank reads what 'rescore' writes (python -m evaluation rescore --ground-truth PHASE_DIR "
    "--submissions UPLOADS_DIR --output OUT, then rank OUT): its output folder, or the result folders of at "
    "least two submissions in it"
)


def named_files(inputs: list[Path], private: bool = False) -> list[tuple[str, Path]]:
    """(submission name, case scores file) of every submission ``inputs`` name: at least two,
    no name twice."""
    files = [item for path in inputs for item in record_files(Path(path), private)]
    for name, file in files:
        if not file.is_file():
            raise GraderError(f"{file.parent} holds no {file.name} of {name!r}: {RESCORE_FIRST}")
    names = [name for name, _ in files]
    if len(set(names)) != len(names):
        raise GraderError(f"submission names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    if len(files) < 2:
        raise GraderError(f"ranking needs at least two scored submissions, found {len(files)}: {RESCORE_FIRST}")
    return files


def read_record(name: str, path: Path) -> dict:
    """The case scores of one submission: ``case_scores.json``, or a metrics.json that holds
    ``case_scores`` itself or has ``case_scores.json`` beside it."""
    if path.name == "metrics.json" and not _has_case_scores(path) and (path.parent / CASE_SCORES_FILE).is_file():
        path = path.parent / CASE_SCORES_FILE
    try:
        record = report.restore_infinities(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise GraderError(f"cannot read the case scores of {name!r} from {path}: {exc}") from None
    if not isinstance(record.get("case_scores"), dict) or not record["case_scores"]:
        raise GraderError(f"{path} holds no case scores: {RESCORE_FIRST}")
    return record


def _has_case_scores(path: Path) -> bool:
    try:
        return isinstance(json.loads(path.read_text()).get("case_scores"), dict)
    except (OSError, ValueError):
        return False


def load(inputs: list[Path], null_as: float | None = None, private: bool = False) -> Scores:
    """Case scores of every submission named by ``inputs``. All must share the suite's ranking
    key, its direction, one set of cases and one phase (fingerprint); a null case score is
    refused unless ``null_as`` gives the value to use. ``private``: the private cases' scores
    (``rescore`` of a phase with ``private_cases``), for the sealed final ranking."""
    files = named_files(inputs, private)
    names = [name for name, _ in files]
    records = [read_record(name, path) for name, path in files]
    if private:
        missing = [name for name, r in zip(names, records) if not r.get("private")]
        if missing:
            raise GraderError(f"no private results for {missing[:5]}: rescore a phase with private_cases")
        records = [{**r, **r["private"]} for r in records]
    provenance = _shared_provenance(names, records)
    first = records[0]
    ranking, higher = first.get("ranking", "score"), first.get("higher_is_better", True)
    cases = sorted(first["case_scores"])
    for name, record in zip(names, records):
        if (record.get("ranking", "score"), record.get("higher_is_better", True)) != (ranking, higher):
            raise GraderError(f"{name!r} is ranked by a different key or direction than {names[0]!r}")
        if sorted(record["case_scores"]) != cases:
            extra = set(record["case_scores"]) ^ set(cases)
            raise GraderError(f"{name!r} has other cases than {names[0]!r} (differing: {sorted(extra)[:5]})")
    matrix = np.array(
        [[_case_value(name, case, r["case_scores"][case], null_as) for case in cases] for name, r in zip(names, records)],
        dtype=np.float64,
    )
    published = np.array([_number(r.get("leaderboard", {}).get(ranking)) for r in records], dtype=np.float64)
    return Scores(names, cases, matrix, published, ranking, bool(higher), "private" if private else "public", provenance)


def from_task(task, null_as: float | None = None) -> Scores:
    """The case scores of a ranking task (a long table's), missing values as ``null_as``."""
    missing = ~task.present | np.isnan(task.values)
    if missing.any() and null_as is None:
        raise GraderError(f"task {task.name!r} has missing values; choose a value for them with --null-as")
    matrix = np.where(missing, null_as if null_as is not None else np.nan, task.values)
    return Scores(
        list(task.algorithms), list(task.cases), matrix, np.full(len(task.algorithms), np.nan), task.name, task.higher_is_better
    )


def _shared_provenance(names: list[str], records: list[dict]) -> dict | None:
    """The build and phase of the ranked results; results made against different phases are
    not ranked together."""
    made = [(name, r["provenance"]) for name, r in zip(names, records) if isinstance(r.get("provenance"), dict)]
    if not made:
        return None
    phases = {p["phase"]["fingerprint"]["sha256"] for _, p in made}
    if len(phases) > 1:
        raise GraderError(
            f"the results were scored against {len(phases)} different phases (fingerprints); rank one re-score at a time"
        )
    name, first = made[0]
    return {"grader": first["grader"], "phase": first["phase"], "suite": first["suite"]}


def _case_value(name: str, case: str, value, null_as: float | None) -> float:
    """A case's score: a number, infinite ones included (an empty prediction's distance, as
    challengeR takes Inf), or ``null_as`` for an undefined one."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if null_as is None:
            raise GraderError(f"{name!r} has no score for case {case!r} (null); choose a value with --null-as")
        return null_as
    return float(value)


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


# --------------------------------------------------------------------------------------------
# The bootstrap


def competition_ranks(values: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Rank of every row in every column, 1 = best; ties share the best of their ranks."""
    keyed = -values if higher_is_better else values
    order = np.argsort(keyed, axis=0, kind="stable")
    ordered = np.take_along_axis(keyed, order, axis=0)
    n = values.shape[0]
    starts = np.ones_like(ordered, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    position = np.where(starts, np.arange(n)[:, None], 0)
    sorted_ranks = np.maximum.accumulate(position, axis=0) + 1
    ranks = np.empty_like(sorted_ranks)
    np.put_along_axis(ranks, order, sorted_ranks, axis=0)
    return ranks


def rank_frequencies(ranks: np.ndarray) -> np.ndarray:
    """(submissions x ranks) share of resamples in which submission i has rank r + 1."""
    n, resamples = ranks.shape
    flat = (np.arange(n)[:, None] * n + ranks - 1).ravel()
    return np.bincount(flat, minlength=n * n).reshape(n, n) / resamples


def pairwise_wins(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """(submissions x submissions) share of resamples in which row beats column; a tie counts
    half. The diagonal is 0.5. Computed in row blocks to bound memory."""
    n, resamples = means.shape
    keyed = means if higher_is_better else -means
    wins = np.empty((n, n))
    block = max(1, _PAIRWISE_BLOCK_BYTES // max(1, n * resamples))
    for start in range(0, n, block):
        rows = keyed[start : start + block, None, :]
        wins[start : start + block] = ((rows > keyed[None]).sum(axis=2) + 0.5 * (rows == keyed[None]).sum(axis=2)) / resamples
    return wins


def bootstrap(scores: Scores, resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict:
    """The ranking-uncertainty result (JSON-able)."""
    if resamples < 1 or not 0 < confidence < 1:
        raise GraderError("resamples must be >= 1 and confidence between 0 and 1")
    counts = draw_counts(len(scores.cases), resamples, seed)
    means = resampled_means(scores.matrix, counts)
    ranks = competition_ranks(means, scores.higher_is_better)
    frequencies = rank_frequencies(ranks)
    wins = pairwise_wins(means, scores.higher_is_better)
    tail = (1 - confidence) / 2
    ci = np.quantile(means, [tail, 1 - tail], axis=1)
    rank_ci = np.quantile(ranks, [tail, 1 - tail], axis=1, method="inverted_cdf")
    case_mean = scores.matrix.mean(axis=1)
    published = np.where(np.isnan(scores.leaderboard), case_mean, scores.leaderboard)
    observed = competition_ranks(published[:, None], scores.higher_is_better)[:, 0]
    order = np.lexsort((np.array(scores.names), observed))
    submissions = [
        {
            "submission": scores.names[i],
            "leaderboard_rank": int(observed[i]),
            "leaderboard_score": None if np.isnan(scores.leaderboard[i]) else float(scores.leaderboard[i]),
            "case_mean": float(case_mean[i]),
            "case_mean_ci": [float(ci[0, i]), float(ci[1, i])],
            "rank_median": float(np.median(ranks[i])),
            "rank_mean": float(ranks[i].mean()),
            "rank_ci": [int(rank_ci[0, i]), int(rank_ci[1, i])],
            "rank_frequencies": {str(r + 1): float(frequencies[i, r]) for r in np.flatnonzero(frequencies[i])},
        }
        for i in order
    ]
    names = [scores.names[i] for i in order]
    return {
        "ranking": scores.ranking,
        "higher_is_better": scores.higher_is_better,
        "statistic": "mean of case scores",
        "resamples": resamples,
        "seed": seed,
        "confidence": confidence,
        "cases": len(scores.cases),
        "subset": scores.subset,
        "provenance": scores.provenance,
        "submissions": submissions,
        "pairwise": {"submissions": names, "row_beats_column": wins[np.ix_(order, order)].tolist()},
        "ties": "tied resamples share the better rank and count half a win each",
    }
