"""Overlap metrics of one (case, class) from its four confusion counts, per definition.

The counts come from one contingency pass over the case (``scoring``); here only the
arithmetic differs: what empty masks score, and in which precision. MetricsReloaded sums
float32 maps for tp/fp/fn/tn (``MetricsReloaded/metrics/pairwise_measures.py:
BinaryPairwiseMeasures.tp`` etc.), so every ratio built from them is a float32 quotient;
MONAI works in float32 throughout (``monai/metrics/meandice.py``, ``meaniou.py``).
Metrics a library does not define are given their textbook formula in float64, 0/0 being
undefined (nan).
"""

import math

import numpy as np

from evaluation.suites.segmentation.keys import number_key

NAN = float("nan")


def _div(a, b) -> float:
    return float(a / b) if b else NAN


def _plain(tp: int, fp: int, fn: int, tn: int, betas) -> dict:
    n_ref, n_pred = tp + fn, tp + fp
    precision, recall = _div(tp, n_pred), _div(tp, n_ref)
    specificity = _div(tn, tn + fp)
    out = {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "n_ref": n_ref,
        "n_pred": n_pred,
        "dice": _div(2 * tp, n_ref + n_pred),
        "iou": _div(tp, tp + fp + fn),
        "precision": precision,
        "recall": recall,
        "specificity": specificity,
        "npv": _div(tn, tn + fn),
        "accuracy": _div(tp + tn, tp + fp + fn + tn),
        "balanced_accuracy": (recall + specificity) / 2,
        "youden": recall + specificity - 1,
        "lr_plus": _div(recall, 1 - specificity),
        "volume_difference": _div(n_pred - n_ref, n_ref),
        "abs_volume_difference": _div(abs(n_pred - n_ref), n_ref),
    }
    denominator = math.sqrt(float(n_pred) * n_ref * (tn + fp) * (tn + fn))
    out["mcc"] = _div(tp * tn - fp * fn, denominator)
    total = tp + fp + fn + tn
    chance = (n_pred * n_ref + (tn + fn) * (tn + fp)) / total**2 if total else NAN
    out["cohens_kappa"] = _div(out["accuracy"] - chance, 1 - chance)
    for beta in betas:
        b2 = beta * beta
        out[f"f{number_key(beta)}"] = _div((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp)
    return out


def plain(tp, fp, fn, tn, betas, corrections=()) -> dict:
    """Textbook formulas in float64 (the definition of metrics a library lacks)."""
    return _plain(tp, fp, fn, tn, betas)


def panoptica(tp, fp, fn, tn, betas, corrections=()) -> dict:
    """panoptica/metrics: ``dice.py`` and ``iou.py`` score two empty masks 0.0; RVD/RVAE
    (``relative_volume_difference.py``, ``relative_absolute_volume_error.py``) are 0.0 for two
    empty masks and raise for an empty reference alone (None)."""
    out = _plain(tp, fp, fn, tn, betas)
    n_ref, n_pred = tp + fn, tp + fp
    if n_ref == 0 and n_pred == 0:
        out.update(dice=0.0, iou=0.0, volume_difference=0.0, abs_volume_difference=0.0)
    elif n_ref == 0:
        out.update(volume_difference=None, abs_volume_difference=None)
    else:
        out["volume_difference"] = (float(n_pred) - float(n_ref)) / float(n_ref)
        out["abs_volume_difference"] = abs(out["volume_difference"])
    return out


def _f32(value) -> np.float32:
    return np.float32(value)


def metricsreloaded(tp, fp, fn, tn, betas, corrections=()) -> dict:
    """``BinaryPairwiseMeasures``: dsc 1 for two empty masks, iou nan; ppv/npv/accuracy/mcc
    and the F-beta's precision and recall are float32 quotients of the float32 counts;
    sensitivity/specificity are float64 quotients; ``fbeta`` follows ``fbeta()`` (0 or 1 when
    precision and recall give no number); ``abs_volume_difference`` is ``avdr`` as the library
    computes it on unsigned masks (``unsigned_avdr``), or on float masks with the correction
    ``avdr_wraparound``."""
    out = _plain(tp, fp, fn, tn, betas)
    n_ref, n_pred, n_neg_ref, n_neg_pred = tp + fn, tp + fp, fp + tn, fn + tn
    t, f_p, f_n, t_n = _f32(tp), _f32(fp), _f32(fn), _f32(tn)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ppv = (NAN if n_ref == 0 else 0) if n_pred == 0 else float(t / (t + f_p))
        recall = NAN if n_ref == 0 else (0 if n_pred == 0 else float(t / (t + f_n)))
        sensitivity = NAN if n_ref == 0 else float(t) / n_ref
        specificity = NAN if n_neg_ref == 0 else float(t_n) / n_neg_ref
        accuracy = float((t_n + t) / (t_n + t + f_n + f_p))
        npv = (NAN if n_neg_ref == 0 else 0) if tn + fn == 0 else float(t_n / (f_n + t_n))
        mcc = float((t * t_n - f_p * f_n) / np.sqrt((t + f_p) * (t + f_n) * (t_n + f_p) * (t_n + f_n)))
        chance = np.float64(0.0)
        for ref_count, pred_count in ((n_neg_ref, n_neg_pred), (n_ref, n_pred)):
            if ref_count:
                chance += (pred_count / (tp + fp + fn + tn)) * (ref_count / (tp + fp + fn + tn))
        kappa = (accuracy - chance) / (1 - chance)
    out.update(
        dice=1.0 if n_ref + n_pred == 0 else float(2 * t) / (n_pred + n_ref),
        iou=NAN if n_ref + n_pred == 0 else float(tp) / float(np.float32(tp + fp + fn)),
        precision=ppv,
        recall=sensitivity,
        specificity=specificity,
        accuracy=accuracy,
        npv=npv,
        mcc=mcc,
        cohens_kappa=kappa,
        balanced_accuracy=0.5 * sensitivity + 0.5 * specificity,
        youden=specificity + sensitivity - 1,
        lr_plus=NAN if n_neg_ref == 0 or n_ref == 0 or specificity == 1 else sensitivity / (1 - specificity),
        abs_volume_difference=NAN
        if n_ref == 0
        else abs(float(n_ref) - float(n_pred)) / float(n_ref)
        if "avdr_wraparound" in corrections
        else unsigned_avdr(n_ref, n_pred),
    )
    for beta in betas:
        out[f"f{number_key(beta)}"] = _mr_fbeta(beta, ppv, recall, fp + fn)
    return out


def unsigned_avdr(n_ref: int, n_pred: int) -> float:
    """``BinaryPairwiseMeasures.absolute_volume_difference_ratio`` on unsigned masks (the uint8
    masks of the library's own pipelines): ``np.sum`` gives uint64 voxel counts, so
    ``n_ref - n_pred`` wraps around to 2**64 - (n_pred - n_ref) when the prediction is larger,
    ``np.abs`` leaves it so, and the quotient is taken in float64."""
    ref, pred = np.array([n_ref], np.uint64), np.array([n_pred], np.uint64)
    with np.errstate(over="ignore"):
        return float((np.abs(ref - pred) / ref)[0])


def _mr_fbeta(beta, ppv, recall, errors) -> float:
    """``BinaryPairwiseMeasures.fbeta``: float64 arithmetic on the float32 precision/recall."""
    b2 = float(beta) ** 2
    numerator = (1 + b2) * ppv * recall
    denominator = b2 * ppv + recall
    if math.isnan(denominator) or denominator == 0:
        return 0.0 if errors > 0 else 1.0
    return float(numerator / denominator)


def monai(tp, fp, fn, tn, betas, corrections=()) -> dict:
    """``DiceMetric`` / ``MeanIoU`` with their default ``ignore_empty=True``: float32, nan when
    the reference is empty (``ignore_empty=False`` is available as ``empty_values``: 1 for two
    empty masks, 0 for an empty reference)."""
    out = _plain(tp, fp, fn, tn, betas)
    ref, pred, inter = _f32(tp + fn), _f32(tp + fp), _f32(tp)
    out["dice"] = float(np.float32(2.0) * inter / (ref + pred)) if tp + fn else NAN
    out["iou"] = float(inter / (ref + pred - inter)) if tp + fn else NAN
    return out


def deepmind(tp, fp, fn, tn, betas, corrections=()) -> dict:
    """``compute_dice_coefficient``: nan for two empty masks."""
    out = _plain(tp, fp, fn, tn, betas)
    out["dice"] = NAN if tp + fp + fn == 0 else float(2 * tp / (2 * tp + fp + fn))
    return out


DEFINITIONS = {"panoptica": panoptica, "metricsreloaded": metricsreloaded, "monai": monai, "deepmind": deepmind}


def _from_counts(function):
    """The metric table's function of a definition: every overlap key from the counts."""

    def measure(m) -> dict:
        return function(*m.counts, m.options.fbeta, m.options.corrections)

    measure.__name__ = f"{function.__name__}_overlap"
    return measure


# Definition -> the metric table's function (``Measured`` -> every overlap key): one per
# definition, shared by every overlap row, so that a case computes its overlap keys once.
MEASURES = {name: _from_counts(function) for name, function in DEFINITIONS.items()}
