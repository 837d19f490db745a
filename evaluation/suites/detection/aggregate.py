"""The cases' rows as picai_eval's ``Metrics``, metrics.json, the leaderboard and case scores.

``picai_eval/eval.py: evaluate`` collects per case its rows, ``case_target`` (the largest
``is_lesion``, 0 without rows), ``case_pred`` (the case confidence), ``case_weight`` and
``lesion_weight`` (the case weight per row), and ``picai_eval/metrics.py: Metrics`` sorts them by
case and computes, from the rows of every case in that order: the lesion-level
precision-recall curve and AP, the case-level ROC curve and AUROC, the FROC (sensitivity at
each threshold against false positives per case) and ``score`` = (AUROC + AP) / 2, the PI-CAI
ranking metric. The PI-CAI Grand-Challenge evaluation replaces ``case_pred`` by the submitted
likelihoods and writes ``{"case": minimal_dict(), "aggregates": {score, auroc, AP,
lesion_TPR_at_FPR_<x>, num_cases, num_lesions, picai_eval_version}}``; here every value of
``Metrics`` is written. Undefined values (where the reference raises or gives NaN) are null.
"""

from dataclasses import dataclass, field

import numpy as np

from evaluation.contract import Outcome, Result
from evaluation.suites.detection import curves
from evaluation.suites.detection.inputs import Context
from evaluation.suites.detection.options import Options, fp_key

REFERENCE = {
    "repository": "DIAGNijmegen/picai_eval",
    "version": "1.4.13",
    "commit": "410559fa3eb4715219706f098fcd9a58f601a29f",
    "function": "src/picai_eval/metrics.py:Metrics",
    "softmax_extraction": "report_guided_annotation 0.3.4, extract_lesion_candidates.py:extract_lesion_candidates",
}
VERSION = "1.4.x"  # Metrics.version
HEADLINE = "score"


@dataclass
class Dataset:
    """The scored cases in sorted order, their rows flattened once (``offsets[i]`` is where
    case i's rows start), with the per-case targets, predictions and weights."""

    cases: list[str]
    rows: dict[str, list]
    target: np.ndarray
    pred: np.ndarray
    weight: np.ndarray
    is_lesion: np.ndarray = field(init=False)
    confidence: np.ndarray = field(init=False)
    offsets: np.ndarray = field(init=False)

    def __post_init__(self):
        counts = [len(self.rows[c]) for c in self.cases]
        self.offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
        flat = [r for c in self.cases for r in self.rows[c]]
        self.is_lesion = np.array([r[0] for r in flat], dtype=np.int64)
        self.confidence = np.array([r[1] for r in flat], dtype=np.float64)

    def row_index(self, subjects: np.ndarray) -> np.ndarray:
        """The rows of the cases ``subjects`` (indices, duplicates allowed), in that order."""
        starts, stops = self.offsets[subjects], self.offsets[subjects + 1]
        lengths = stops - starts
        if not lengths.sum():
            return np.zeros(0, np.int64)
        return np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(lengths.sum())

    def precision_recall(self, subjects: np.ndarray):
        index = self.row_index(subjects)
        row_weight = np.repeat(self.weight[subjects], self.offsets[subjects + 1] - self.offsets[subjects])
        return curves.precision_recall(self.is_lesion[index], self.confidence[index], row_weight)

    def ap(self, subjects: np.ndarray) -> float:
        found = self.precision_recall(subjects)
        return float("nan") if found is None else found[3]

    def roc(self, subjects: np.ndarray):
        return curves.roc(self.target[subjects], self.pred[subjects], self.weight[subjects])

    def auroc(self, subjects: np.ndarray) -> float:
        return self.roc(subjects)[2]

    def score(self, subjects: np.ndarray) -> float:
        return (self.auroc(subjects) + self.ap(subjects)) / 2

    @property
    def everyone(self) -> np.ndarray:
        return np.arange(len(self.cases))


@dataclass(frozen=True)
class Froc:
    thresholds: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    tpr: np.ndarray
    fpr: np.ndarray


def froc(data: Dataset, last_point: bool) -> Froc:
    """``Metrics.lesion_TP``, ``lesion_FP``, ``lesion_TPR`` (TP / lesions, all NaN without a
    lesion) and ``lesion_FPR`` (FP / cases: false positives per case), unweighted."""
    thresholds = curves.froc_thresholds(data.confidence)
    tp, fp = curves.froc_counts(data.is_lesion, data.confidence, thresholds, last_point)
    lesions = int(data.is_lesion.sum())
    tpr = tp / lesions if lesions > 0 else np.full(len(tp), np.nan)
    fpr = fp / len(data.cases) if data.cases else np.full(len(fp), np.nan)  # every case failed
    return Froc(thresholds, tp, fp, tpr, fpr)


def score_interval(data: Dataset, resamples: int, seed: int) -> dict:
    """``Metrics.bootstrap_score_ci(n_bootstraps, seed)``: each round draws as many cases as
    there are, with replacement (``numpy.random.default_rng(seed).choice``), and computes
    AUROC and AP on them (duplicates count twice); the 2.5 and 97.5 percentiles of AUROC, AP
    and their mean (NaN as soon as one round is undefined, as ``np.percentile`` gives)."""
    rng = np.random.default_rng(seed)
    n = len(data.cases)
    aurocs, aps = [], []
    for _ in range(resamples):
        sample = rng.choice(np.arange(n), size=n, replace=True)
        aurocs.append(data.auroc(sample))
        aps.append(data.ap(sample))
    scores = [(a + b) / 2 for a, b in zip(aurocs, aps)]
    return {
        "auroc_95_ci": np.percentile(aurocs, [2.5, 97.5]).tolist(),
        "ap_95_ci": np.percentile(aps, [2.5, 97.5]).tolist(),
        "score_95_ci": np.percentile(scores, [2.5, 97.5]).tolist(),
        "resamples": resamples,
        "seed": seed,
    }


def jackknife(data: Dataset, score: float) -> dict[str, float]:
    """Each case's jackknife pseudo-value of the score, n * score - (n - 1) * score without
    the case: its influence on the leaderboard value, on the score's scale. Their mean is the
    jackknife estimate of the score (its bias-corrected value, close to it), and resampling
    them approximates the score's sampling spread; a case whose removal leaves the score
    undefined (the only case of its class) has none."""
    n = len(data.cases)
    if n < 2 or not np.isfinite(score):
        return {}
    found = {}
    for i, case in enumerate(data.cases):
        without = np.delete(data.everyone, i)
        value = n * score - (n - 1) * data.score(without)
        if np.isfinite(value):
            found[case] = float(value)
    return found


def sensitivities(options: Options, found: Froc) -> dict[str, float]:
    return {fp_key(x): curves.tpr_at_fpr(found.tpr, found.fpr, x) for x in options.fp_per_case}


@dataclass(frozen=True)
class Curves:
    """The three curves of the scored cases: precision-recall (precision, recall, thresholds,
    AP; None without any row), ROC (FPR, TPR, AUROC) and FROC."""

    precision_recall: tuple | None
    roc: tuple
    froc: Froc

    @classmethod
    def of(cls, options: Options, data: Dataset) -> "Curves":
        everyone = data.everyone
        return cls(data.precision_recall(everyone), data.roc(everyone), froc(data, "froc_last_point" in options.corrections))

    @property
    def ap(self) -> float:
        return float("nan") if self.precision_recall is None else self.precision_recall[3]


def aggregates(options: Options, data: Dataset, found: Curves, source: str, failed: int) -> dict:
    """Every value of ``Metrics``, the Grand-Challenge evaluation's first, then the curves."""
    pr, (case_fpr, case_tpr, auroc), ap = found.precision_recall, found.roc, found.ap
    values = {
        "score": (auroc + ap) / 2,
        "auroc": auroc,
        "AP": ap,
        **sensitivities(options, found.froc),
        "num_cases": len(data.cases),
        "num_lesions": int(data.is_lesion.sum()),
        "picai_eval_version": VERSION,
        "precision": None if pr is None else pr[0].tolist(),
        "recall": None if pr is None else pr[1].tolist(),
        "precision_recall_thresholds": None if pr is None else pr[2].tolist(),
        "lesion_TP": found.froc.tp.tolist(),
        "lesion_FP": found.froc.fp.tolist(),
        "lesion_TPR": found.froc.tpr.tolist(),
        "lesion_FPR": found.froc.fpr.tolist(),
        "thresholds": found.froc.thresholds.tolist(),
        "case_TPR": case_tpr.tolist(),
        "case_FPR": case_fpr.tolist(),
        **rows_counts(data),
        "case_pred_source": source,
        "n_failed_cases": failed,
    }
    if options.score_ci_resamples:
        values["score_ci"] = score_interval(data, options.score_ci_resamples, options.score_ci_seed)
    return values


def rows_counts(data: Dataset) -> dict[str, int]:
    """Our counts of the rows: candidates matched (true positives), lesions missed, candidates
    counted as false positives (a candidate left unmatched with enough overlap is none)."""
    is_lesion, confidence = data.is_lesion, data.confidence
    return {
        "num_true_positives": int(np.count_nonzero((is_lesion == 1) & (confidence > 0))),
        "num_false_negatives": int(np.count_nonzero((is_lesion == 1) & (confidence == 0))),
        "num_false_positives": int(np.count_nonzero(is_lesion == 0)),
    }


def case_entry(rows: list, value: dict, target: int, pred: float, weight, file: str | None, map_confidence) -> dict:
    """metrics.json ``case.<case>``: the reference's ``minimal_dict`` entries (rows as three
    parallel lists: a metrics value holds no nested lists) and our counts."""
    is_lesion = [int(r[0]) for r in rows]
    return {
        "lesion_results": {
            "is_lesion": is_lesion,
            "confidence": [float(r[1]) for r in rows],
            "overlap": [float(r[2]) for r in rows],
        },
        "lesion_weight": [weight] * len(rows),
        "case_target": target,
        "case_pred": pred,
        "case_weight": weight,
        **({"case_confidence": map_confidence} if map_confidence is not None else {}),
        "num_lesions": sum(is_lesion),
        "num_candidates": value["candidates"],
        "true_positives": sum(1 for r in rows if r[0] == 1 and r[1] > 0),
        "false_negatives": sum(1 for r in rows if r[0] == 1 and r[1] == 0),
        "false_positives": sum(1 for r in rows if r[0] == 0),
        "prediction_file": file,
        "status": "scored",
    }


def collect(context: Context, outcomes: dict[str, Outcome]) -> tuple[dict, dict]:
    """(case -> worker value) of the scored cases, (case -> message) of the failed ones."""
    scored, failed = {}, {}
    for case in context.cases:
        outcome = outcomes.get(context.tasks[case])
        if outcome is not None and outcome.ok:
            scored[case] = outcome.value[case]
        else:
            failed[case] = outcome.message if outcome is not None else "not scored"
    return scored, failed


def dataset(context: Context, scored: dict) -> tuple[Dataset, str]:
    """The scored cases as picai_eval's inputs; the case prediction is the submitted
    likelihood when there is one (the PI-CAI Grand-Challenge evaluation), else the case
    confidence."""
    options, given = context.options, context.likelihoods
    cases = sorted(scored)
    rows = {c: [tuple(r) for r in scored[c]["rows"]] for c in cases}
    target = np.array([max(r[0] for r in rows[c]) if rows[c] else 0 for c in cases], dtype=np.int64)
    pred = [given.get(c, 0.0) if given is not None else scored[c]["case_pred"] for c in cases]
    weight = np.array([options.weight(c) for c in cases], dtype=np.float64)
    source = "likelihoods" if given is not None else options.case_confidence_func
    return Dataset(cases, rows, target, np.array(pred, dtype=np.float64), weight), source


def result(context: Context, outcomes: dict[str, Outcome]) -> tuple[Result, Curves]:
    """metrics.json, the leaderboard columns and the case scores; the curves, for the report."""
    options = context.options
    scored, failed = collect(context, outcomes)
    data, source = dataset(context, scored)
    found = Curves.of(options, data)
    aggregate = aggregates(options, data, found, source, len(failed))
    entries = {}
    for i, case in enumerate(data.cases):
        map_confidence = scored[case]["case_pred"] if context.likelihoods is not None else None
        entries[case] = case_entry(
            data.rows[case],
            scored[case],
            int(data.target[i]),
            float(data.pred[i]),
            options.weight(case),
            context.files[case],
            map_confidence,
        )
    for case, message in failed.items():
        entries[case] = {"status": "failed", "error": message, "prediction_file": context.files.get(case)}
    reference = {**REFERENCE, "convention": "lesion rows per case; AP over lesions, AUROC over cases, score = (AUROC + AP) / 2"}
    metrics = {"case": dict(sorted(entries.items())), "aggregates": aggregate, "reference": reference}
    case_scores = jackknife(data, aggregate["score"])
    return Result(metrics=metrics, leaderboard=leaderboard(options, aggregate), case_scores=case_scores), found


def leaderboard(options: Options, aggregate: dict) -> dict[str, float]:
    """The Grand-Challenge evaluation's numeric aggregates, where they are defined."""
    keys = [HEADLINE, "auroc", "AP", *(fp_key(x) for x in options.fp_per_case), "num_cases", "num_lesions"]
    return {key: float(aggregate[key]) for key in keys if aggregate[key] is not None and np.isfinite(aggregate[key])}
