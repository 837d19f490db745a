"""The cross-image aggregation (the official score) and the run's metrics document.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``summarize.py``:
``aggregate_and_report`` pools all images when they are of one kind
(``average_flylight_score_over_instances``: F1 per threshold from summed counts, coverage
averaged over all GT instances) and otherwise pools the complete and the partly labelled
images separately and averages the two (``average_sets``). Values keep the reference's numpy
types (float32 coverage means) until the document is turned into JSON.
"""

import numpy as np

from evaluation.contract import Outcome, Plan, Result
from evaluation.report import sanitize
from evaluation.suites.fisbe.image import POOLED_THRESHOLDS, table_name
from evaluation.suites.fisbe.report import summary_csv

REFERENCE = {"repository": "Kainmueller-Lab/evaluate-instance-segmentation", "commit": "cc34f4d", "preset": "flylight"}
# Leaderboard column -> the pooled ``general`` entry it shows.
LEADERBOARD = {
    "S": "avg_f1_cov_score",
    "avF1": "avFscore",
    "C": "avg_gt_skel_coverage",
    "clDiceTP": "avg_TP_05_cldice",
    "tp": "TP_05_rel",
    "FS": "FS",
    "FM": "FM",
}


def pool(results: list[dict]) -> dict:
    """``average_flylight_score_over_instances``: pooled counts, F1 per threshold from summed
    TP/FP/FN, coverage averaged over all GT instances (float32)."""
    g = lambda key: [r["general"][key] for r in results]  # noqa: E731
    f32 = lambda key: [np.float32(v) for r in results for v in r["general"][key]]  # noqa: E731
    counts = {
        kind: {t: [r["confusion_matrix"][table_name(t)][key] for r in results] for t in POOLED_THRESHOLDS}
        for kind, key in (("tp", "AP_TP"), ("fp", "AP_FP"), ("fn", "AP_FN"))
    }
    fscores = []
    for t in POOLED_THRESHOLDS:
        tp, fp, fn = (np.sum(counts[k][t]) for k in ("tp", "fp", "fn"))
        denominator = 2 * tp + fp + fn
        fscores.append(2 * tp / denominator if denominator > 0 else 0.0)
    gt_covs, cldices = f32("gt_skel_coverage"), f32("TP_05_cldice")
    covs_dim, covs_overlap = f32("gt_covs_dim"), f32("gt_covs_overlap")
    coverage = np.mean(gt_covs) if gt_covs else 0.0
    num_gt, tp_05 = np.sum(g("Num GT")), np.sum(g("TP_05"))
    gt_dim, tp_dim = np.sum(g("GT_dim")), np.sum(g("TP_05_dim"))
    gt_overlap, tp_overlap = np.sum(g("GT_overlap")), np.sum(g("TP_05_overlap"))
    general = {
        "Num GT": num_gt,
        "Num Pred": np.sum(g("Num Pred")),
        "avg_gt_skel_coverage": coverage,
        "avg_f1_cov_score": 0.5 * np.mean(fscores) + 0.5 * coverage,
        "avFscore": np.mean(fscores),
        "FM": np.sum(g("FM")),
        "FS": np.sum(g("FS")),
        "TP_05": tp_05,
        "TP_05_rel": tp_05 / float(num_gt) if num_gt > 0 else 0.0,
        "TP_05_cldice": cldices,
        "avg_TP_05_cldice": np.mean(cldices) if tp_05 > 0 else 0.0,
        "GT_dim": gt_dim,
        "TP_05_dim": tp_dim,
        "TP_05_rel_dim": tp_dim / float(gt_dim) if gt_dim > 0 else 0.0,
        "avg_gt_cov_dim": np.mean(covs_dim) if covs_dim else 0.0,
        "GT_overlap": gt_overlap,
        "TP_05_overlap": tp_overlap,
        "TP_05_rel_overlap": tp_overlap / float(gt_overlap) if gt_overlap > 0 else 0.0,
        "avg_gt_cov_overlap": np.mean(covs_overlap) if covs_overlap else 0.0,
    }
    confusion = {"avFscore": np.mean(fscores)}
    for i, t in enumerate(POOLED_THRESHOLDS):
        confusion[table_name(t)] = {"fscore": fscores[i]}
    confusion["th_0_5"].update(AP_TP=np.sum(counts["tp"][0.5]), AP_FP=np.sum(counts["fp"][0.5]), AP_FN=np.sum(counts["fn"][0.5]))
    return {
        "S": general["avg_f1_cov_score"],
        "general": general,
        "confusion_matrix": confusion,
        "gt_covs": gt_covs,
        "tp": [np.sum(counts["tp"][t]) for t in POOLED_THRESHOLDS],
        "fp": [np.sum(counts["fp"][t]) for t in POOLED_THRESHOLDS],
        "fn": [np.sum(counts["fn"][t]) for t in POOLED_THRESHOLDS],
    }


def combine_sets(a: dict, b: dict) -> dict:
    """``average_sets``: the complete and the partly set's results averaged (S, avF1, C and
    per-threshold F1 as means of the two), counts summed."""
    ga, gb = a["general"], b["general"]
    num_gt, tp_05 = ga["Num GT"] + gb["Num GT"], ga["TP_05"] + gb["TP_05"]
    cldices = list(ga["TP_05_cldice"]) + list(gb["TP_05_cldice"])
    fscore = np.mean([ga["avFscore"], gb["avFscore"]])
    general = {
        "Num GT": num_gt,
        "Num Pred": ga["Num Pred"] + gb["Num Pred"],
        "avg_gt_skel_coverage": np.mean([ga["avg_gt_skel_coverage"], gb["avg_gt_skel_coverage"]]),
        "avg_f1_cov_score": np.mean([a["S"], b["S"]]),
        "avFscore": fscore,
        "FM": ga["FM"] + gb["FM"],
        "FS": ga["FS"] + gb["FS"],
        "TP_05": tp_05,
        "TP_05_rel": tp_05 / float(num_gt) if num_gt > 0 else 0.0,
        "avg_TP_05_cldice": np.mean(cldices) if cldices else 0.0,
    }
    confusion = {"avFscore": fscore}
    for t in POOLED_THRESHOLDS:
        name = table_name(t)
        confusion[name] = {"fscore": np.mean([a["confusion_matrix"][name]["fscore"], b["confusion_matrix"][name]["fscore"]])}
    confusion["th_0_5"].update(
        {k: a["confusion_matrix"]["th_0_5"][k] + b["confusion_matrix"]["th_0_5"][k] for k in ("AP_TP", "AP_FP", "AP_FN")}
    )
    return {
        "S": general["avg_f1_cov_score"],
        "general": general,
        "confusion_matrix": confusion,
        "gt_covs": list(a["gt_covs"]) + list(b["gt_covs"]),
    }


def aggregate(results: dict[str, dict], partly: dict[str, bool]) -> dict:
    """``aggregate_and_report``: pooled over all images when they are of one kind, else the
    complete and partly sets pooled separately and combined (``combined`` is official)."""
    names = list(results)
    kinds = {partly[n] for n in names}
    if len(kinds) > 1:
        complete = pool([results[n] for n in names if not partly[n]])
        partial = pool([results[n] for n in names if partly[n]])
        return {"complete": complete, "partly": partial, "combined": combine_sets(complete, partial)}
    return {"combined": pool([results[n] for n in names])}


def headline(pooled: dict) -> dict:
    return {column: pooled["general"][key] for column, key in LEADERBOARD.items()}


def aggregate_document(pooled: dict) -> dict:
    """One aggregate as written to metrics.json: the leaderboard columns, then the reference's
    aggregate dictionary (per-threshold count lists under ``per_threshold``)."""
    document = {
        **headline(pooled),
        "general": dict(pooled["general"]),
        "confusion_matrix": pooled["confusion_matrix"],
        "gt_covs": pooled["gt_covs"],
    }
    if "tp" in pooled:
        document["per_threshold"] = {
            "threshold": list(POOLED_THRESHOLDS),
            "tp": pooled["tp"],
            "fp": pooled["fp"],
            "fn": pooled["fn"],
        }
    return document


def summarize(plan: Plan, outcomes: dict[str, Outcome]) -> Result:
    """Per-sample results (scored or failed, partly flag, prediction submitted or missing),
    the aggregates of the scored samples and the summary tables."""
    partly = {t.key: t.payload.partly for t in plan.tasks}
    missing = {t.key for t in plan.tasks if t.payload.prediction is None}
    cases, results = {}, {}
    for task in plan.tasks:
        outcome = outcomes[task.key]
        entry = {"partly": partly[task.key], "prediction": "missing" if task.key in missing else "submitted"}
        if outcome.ok:
            results[task.key] = outcome.value
            cases[task.key] = {**outcome.value, **entry, "status": "scored"}
        else:
            cases[task.key] = {**entry, "status": "failed", "error": outcome.message}
    aggregates, files = {}, {}
    if results:
        pooled = aggregate(results, partly)
        aggregates = aggregate_document(pooled["combined"])
        files["summary.csv"] = summary_csv(results, pooled["combined"])
        if "complete" in pooled:
            for kind in ("complete", "partly"):
                aggregates[kind] = aggregate_document(pooled[kind])
                subset = {n: r for n, r in results.items() if partly[n] == (kind == "partly")}
                files[f"summary_{kind}.csv"] = summary_csv(subset, pooled[kind])
    aggregates["samples"] = {"total": len(plan.tasks), "scored": len(results), "missing_predictions": len(missing)}
    leaderboard = {k: float(aggregates.get(k, 0.0)) for k in LEADERBOARD}
    metrics = {"case": cases, "aggregates": aggregates, "reference": dict(REFERENCE)}
    return Result(
        metrics=sanitize(metrics),
        leaderboard=leaderboard,
        case_scores={n: float(r["general"]["avg_f1_cov_score"]) for n, r in results.items()},
        files=files,
    )
