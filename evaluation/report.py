"""The one writer of results: sanitise, validate, write atomically.

Undefined values (NaN, +-inf: e.g. Dice of two empty masks, VoI ratios of an empty truth)
become JSON ``null``, which is what the references write and what Grand-Challenge reads
NaN as. Files are written to a temporary name in the output folder and renamed into place,
so an interrupted run never leaves a partial ``metrics.json``.
"""

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from evaluation import schemas
from evaluation.errors import GraderError
from evaluation.metrics.bootstrap import draw_counts, resampled_means

METRICS_FILE = "metrics.json"


def metrics_document(
    suite_name: str,
    result,
    outcomes: dict,
    publish_cases: bool = True,
    provenance: dict | None = None,
) -> dict:
    """metrics.json for one submission: the suite's ``case``/``aggregates``, its leaderboard
    columns, the cases that failed, and what made it (``provenance``). The command line and
    ``rescore`` both write exactly this.

    ``aggregates.ranking_ci`` is a seeded bootstrap interval, over the submission's cases, of
    the mean case score (the statistic ``rank`` resamples; a leaderboard can show its
    ``half_width`` as an error bar). With ``publish_cases`` false (hidden test sets: Grand-
    Challenge shows participants the whole file), per-case values are left out and failures
    are numbered instead of named. ``outcomes`` are every case's, in the plan's order: a private
    case's failure (``sealed``) reads as any other's, so that failing does not tell which cases
    are private."""
    from evaluation import __version__

    failures = [o for o in outcomes.values() if not o.ok]
    metrics = dict(result.metrics)
    metrics["aggregates"] = {**metrics.get("aggregates", {}), "ranking_ci": ranking_interval(result.case_scores)}
    if not publish_cases:
        metrics.pop("case", None)
    return {
        "grader": {"name": "evaluation", "version": __version__},
        "suite": suite_name,
        **metrics,
        "leaderboard": dict(result.leaderboard),
        **({"census": result.census} if getattr(result, "census", None) is not None else {}),
        **({} if publish_cases else {"cases_withheld": True}),
        "failures": [
            {"case": o.key if publish_cases else f"case {i}", "kind": o.kind, "message": o.message}
            for i, o in enumerate(failures, 1)
        ],
        **({"provenance": provenance} if provenance is not None else {}),
    }


def ranking_interval(case_scores: dict, resamples: int = 1000, seed: int = 0, confidence: float = 0.95) -> dict | None:
    """Percentile bootstrap interval of the mean case score (``ranking.bootstrap``'s statistic,
    same draws for the same number of cases); None with fewer than two scored cases."""
    values = np.array([v for v in case_scores.values() if isinstance(v, (int, float)) and math.isfinite(v)], dtype=np.float64)
    if values.size < 2:
        return None
    means = resampled_means(values[None, :], draw_counts(values.size, resamples, seed))[0]
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return {
        "statistic": "mean of case scores",
        "mean": float(values.mean()),
        "low": float(low),
        "high": float(high),
        "half_width": float(high - low) / 2,
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
        "cases": int(values.size),
    }


def sanitize(value):
    """A JSON-safe copy: numpy scalars to Python, non-finite floats to None, tuples to lists."""
    if isinstance(value, dict):
        return {str(k): sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [sanitize(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


INFINITIES = "infinities"


def infinities(value):
    """The infinite leaves of ``value`` at their paths (list items by index), as ``"+inf"`` or
    ``"-inf"``; None when it holds none. JSON has no infinity: the grader's documents write
    every non-finite number as null in place, where a platform reads numbers, and list the
    infinite ones here, so that "infinite" (an empty prediction's HD95) reads apart from
    "undefined" (NaN: both masks empty)."""
    if isinstance(value, dict):
        found = {str(key): inner for key, item in value.items() if (inner := infinities(item)) is not None}
        return found or None
    if isinstance(value, (list, tuple, np.ndarray)):
        found = {str(index): inner for index, item in enumerate(value) if (inner := infinities(item)) is not None}
        return found or None
    if isinstance(value, (float, np.floating)) and math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return None


def with_infinities(document: dict) -> dict:
    """``document`` with its ``INFINITIES`` node when it holds an infinite number."""
    found = infinities(document)
    return {**document, INFINITIES: found} if found else document


def restore_infinities(document: dict) -> dict:
    """A document as written, its listed infinities back in place of their nulls."""
    listed = document.get(INFINITIES)
    if not isinstance(listed, dict):
        return document

    def put(node, where: dict):
        for key, inner in where.items():
            slot = int(key) if isinstance(node, list) else key
            if isinstance(inner, dict):
                put(node[slot], inner)
            else:
                node[slot] = math.inf if inner == "+inf" else -math.inf

    restored = json.loads(json.dumps({k: v for k, v in document.items() if k != INFINITIES}))
    put(restored, listed)
    return restored


def write_atomic(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def json_bytes(document, listing_infinities: bool = False) -> bytes:
    """Strict JSON; with ``listing_infinities`` (the grader's own documents, not the
    references' file formats), the infinities listed as ``with_infinities`` does."""
    document = with_infinities(document) if listing_infinities and isinstance(document, dict) else document
    return (json.dumps(sanitize(document), indent=2, allow_nan=False) + "\n").encode()


def write(output: Path, metrics: dict, files: dict[str, dict | str | bytes] | None = None) -> dict:
    """Validate ``metrics`` against the metrics schema, then write the other files and
    ``metrics.json`` last (its presence means the run completed). Returns what was written.
    A dict is written as JSON, a str as UTF-8 text, bytes unchanged."""
    metrics = sanitize(with_infinities(metrics))
    problem = schemas.first_error("metrics", metrics)
    if problem:
        raise GraderError(f"metrics document violates schemas/metrics.schema.json: {problem}")
    for name, content in (files or {}).items():
        if isinstance(content, dict):
            content = json_bytes(content)
        elif isinstance(content, str):
            content = content.encode()
        write_atomic(output / name, content)
    write_atomic(output / METRICS_FILE, json_bytes(metrics))
    return metrics
