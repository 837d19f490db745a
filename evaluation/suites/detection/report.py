"""The detection suite's curves for a reader: one CSV table and, with ``report`` on, one PNG.

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

``curves.png`` draws the three side by side.
"""

import math

import numpy as np

from evaluation import figures
from evaluation.suites.detection.aggregate import Curves

CSV_FILE = "curves.csv"
PNG_FILE = "curves.png"
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


def plot(found: Curves, title: str) -> bytes:
    """FROC (log false positives per case), precision-recall and ROC, side by side."""
    plt = figures.pyplot()
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 4.2))
    froc = found.froc
    finite = np.isfinite(froc.fpr) & np.isfinite(froc.tpr) & (froc.fpr > 0)
    left.step(froc.fpr[finite], froc.tpr[finite], where="post", color="tab:blue")
    left.set_xscale("log")
    plain = figures.pyplot().FuncFormatter(lambda v, _: f"{v:g}")  # mathtext is off: no $10^{-1}$ labels
    left.xaxis.set_major_formatter(plain)
    left.xaxis.set_minor_formatter(figures.pyplot().NullFormatter())
    if finite.any():
        low, high = float(froc.fpr[finite].min()), float(froc.fpr[finite].max())
        left.set_xticks([x for x in TICKS if low / 1.5 <= x <= high * 1.5] or [low, high])
    left.set(xlabel="false positives per case", ylabel="lesion sensitivity", title="FROC", ylim=(-0.02, 1.02))
    if found.precision_recall is not None:
        precision, recall, _, ap = found.precision_recall
        middle.step(recall, precision, where="post", color="tab:green")
        middle.set_title(f"Precision-recall (AP {ap:.4f})")
    else:
        middle.set_title("Precision-recall (no lesion or candidate)")
    middle.set(xlabel="lesion recall", ylabel="precision", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    fpr, tpr, auroc = found.roc
    right.plot(fpr, tpr, color="tab:red", marker=".")
    right.plot([0, 1], [0, 1], color="0.8", linestyle="--", linewidth=1)
    right.set(xlabel="false positive rate (cases)", ylabel="true positive rate (cases)", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    right.set_title(f"ROC (AUROC {auroc:.4f})" if np.isfinite(auroc) else "ROC (undefined: one class only)")
    for axis in (left, middle, right):
        axis.grid(True, alpha=0.3)
    figure.suptitle(title)
    figure.tight_layout()
    return figures.png(figure)
