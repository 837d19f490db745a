"""The reference's ``summary.csv``: a table of chosen metrics per sample, for people.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d,
``summarize.summarize_metric_dict`` with the ``--app flylight`` summary columns
(``evaluate.main``, ``args.summary``).
"""

import csv
import io

import numpy as np

from evaluation.suites.fisbe.image import POOLED_THRESHOLDS, table_name

# The reference's summary columns, in its order.
SUMMARY_METRICS = (
    "general.Num GT",
    "general.Num Pred",
    "general.avg_f1_cov_score",
    "confusion_matrix.avFscore",
    "general.avg_gt_skel_coverage",
    "confusion_matrix.th_0_5.AP_TP",
    "confusion_matrix.th_0_5.AP_FP",
    "confusion_matrix.th_0_5.AP_FN",
    "general.FM",
    "general.FS",
    "general.TP_05",
    "general.TP_05_rel",
    "general.avg_TP_05_cldice",
    "general.GT_dim",
    "general.TP_05_dim",
    "general.TP_05_rel_dim",
    "general.avg_gt_cov_dim",
    "general.GT_overlap",
    "general.TP_05_overlap",
    "general.TP_05_rel_overlap",
    "general.avg_gt_cov_overlap",
) + tuple(f"confusion_matrix.{table_name(t)}.fscore" for t in POOLED_THRESHOLDS)


def _deep_get(d: dict, dotted: str):
    """The value at a dotted path, or None (``summarize.deep_get``)."""
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def summary_csv(results: dict[str, dict], pooled: dict) -> str:
    """The reference's ``summary.csv``: ';'-separated, a row per sample (values as floats,
    missing as 0.0), then ``mean``, ``sum`` and ``avg_inst`` (the pooled result, printed with
    its numpy types)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=";", quotechar="|", quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow(["sample"] + [" ".join(m.split(".")[-2:]) for m in SUMMARY_METRICS])
    table = np.zeros((len(results), len(SUMMARY_METRICS)))
    for i, (name, result) in enumerate(results.items()):
        for k, metric in enumerate(SUMMARY_METRICS):
            value = _deep_get(result, metric)
            table[i, k] = float(value) if value is not None else 0.0
        writer.writerow([name] + list(table[i]))
    writer.writerow(["mean"] + list(np.mean(table, axis=0)))
    writer.writerow(["sum"] + list(np.sum(table, axis=0)))
    writer.writerow(["avg_inst"] + [v if (v := _deep_get(pooled, m)) is not None else 0.0 for m in SUMMARY_METRICS])
    return out.getvalue()
