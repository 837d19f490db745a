"""The detection suite's curves for a reader: one CSV table and, with ``report`` on, one HTML page of SVG charts.

picai_eval writes no table or plot (its ``Metrics`` exposes the arrays; ``metrics.json`` holds
only AUROC, AP and the rows). ``curves.csv`` lists every point of the three curves in one long
table, ``curve,threshold,x,y``:

- ``froc``: x = false positives per case (``lesion_FPR``), y = sensitivity (``lesion_TPR``), at
  each FROC threshold, highest first; the last point is the reference's (infinitely many false
  positives, written empty) unless the correction ``froc_last_point`` keeps it;
- ``precision_recall``: x = recall, y = precision, at each distinct lesion confidence, lowest
  first (the missed lesions' 0 first), then the final point (recall 0, precision 1) with no
  threshold;
- ``roc``: x = FPR, y = TPR of the case-level curve, from (0, 0); no thresholds.

``curves.html`` draws the three side by side (SVG charts).
"""

import html
import math

import numpy as np

from evaluation import charts, figures
from evaluation.suites.detection.aggregate import Curves

CSV_FILE = "curves.csv"
PAGE_FILE = "curves.html"
HEADER = ["curve", "threshold", "x", "y"]
TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50)  # false positives per case


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def records(found: Curves) -> list[list]:
    lines = []
    froc = found.froc
    thresholds = froc.thresholds.tolist()
    thresholds += [None] * (len(froc.fpr) - len(thresholds))  # fewer than two: the reference's [0, inf] counts
    for t, x, y in zip(thresholds, froc.fpr, froc.tpr):
        lines.append(["froc", t, _number(x), _number(y)])
    if found.precision_recall is not None:
        precision, recall, thresholds, _ = found.precision_recall
        for i, (x, y) in enumerate(zip(recall, precision)):
            lines.append(["precision_recall", float(thresholds[i]) if i < thresholds.size else None, _number(x), _number(y)])
    fpr, tpr, _ = found.roc
    lines.extend(["roc", None, _number(x), _number(y)] for x, y in zip(fpr, tpr))
    return lines


def table(found: Curves) -> str:
    return figures.csv_text(HEADER, records(found))


def page(found: Curves, title: str) -> str:
    """FROC (log false positives per case), precision-recall and ROC, side by side, as a page
    (SVG charts: drawn by the browser, the run renders nothing)."""
    froc = found.froc
    ticks = [(x, f"{x:g}") for x in TICKS]
    drawn = [
        charts.lines("FROC", [("FROC", froc.fpr, froc.tpr)], "false positives per case", "lesion sensitivity",
                     x_ticks=ticks, step=True, log_x=True, y_range=(0.0, 1.0)),
    ]  # fmt: skip
    if found.precision_recall is not None:
        precision, recall, _, ap = found.precision_recall
        pr_title = f"Precision-recall (AP {ap:.4f})"
        drawn.append(
            charts.lines(pr_title, [("precision", recall[::-1], precision[::-1])], "lesion recall", "precision",
                         x_ticks=[(x, f"{x:g}") for x in (0, 0.25, 0.5, 0.75, 1)], step=True, y_range=(0.0, 1.0))
        )  # fmt: skip
    fpr, tpr, auroc = found.roc
    roc_title = f"ROC (AUROC {auroc:.4f})" if np.isfinite(auroc) else "ROC (undefined: one class only)"
    drawn.append(
        charts.lines(roc_title, [("ROC", fpr, tpr), ("chance", [0, 1], [0, 1])], "false positive rate (cases)",
                     "true positive rate (cases)", x_ticks=[(x, f"{x:g}") for x in (0, 0.25, 0.5, 0.75, 1)],
                     y_range=(0.0, 1.0), dashed=frozenset({"chance"}))
    )  # fmt: skip
    body = f"<h1>{html.escape(title)}</h1>" + charts.row(drawn, "FROC, precision-recall and ROC curves")
    return figures.page("Detection curves", body, "body{font-family:sans-serif;margin:1.5em}")
