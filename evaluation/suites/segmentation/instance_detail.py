"""Lesion-level detail of one (case, class): detection per organizer-given size bin, every
instance with its size, and COCO's average precision over a sweep of IoU thresholds.

* Size bins (``instance_metrics: [size_bins]``, edges ``size_bins`` in ``size_unit``): ``n``
  edges make ``n + 1`` bins, bin 0 below the first edge, bin ``i`` from edge ``i - 1`` up to
  (not including) edge ``i``, the last from the last edge on, as panoptica bins reference
  instances (``utils/numpy_utils.py: recall_by_volume_bins``, ``np.digitize``). Recall per bin:
  the matched share of the reference instances in it; precision per bin: the matched share of
  the predicted instances in it (binned by their own size); NaN for an empty bin. The counts
  are kept too, so that the statistics can pool them over cases.
* ``ap``: COCO's ``COCOeval`` for one image and category (``pycocotools/cocoeval.py``,
  ``evaluateImg`` and ``accumulate``), on the instance masks' IoU: thresholds 0.50:0.05:0.95,
  the predicted instances as detections of equal score in ascending id order (a label map
  has no confidences; pycocotools' stable sort keeps that order), at most 100 of them, each
  taking the unmatched reference instance of highest IoU at least the threshold, precision
  made monotone and read at 101 recall points. ``ap`` is the mean over thresholds and recall
  points, ``ap50`` and ``ap75`` those at 0.5 and 0.75; null without reference instances, as
  COCO's -1. The per-threshold matches are kept to pool the cases (the dataset AP).
"""

import numpy as np

THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)  # COCOeval Params
RECALLS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
MAX_DETECTIONS = 100
AP_KEYS = ("ap", "ap50", "ap75")


def bin_keys(edges) -> list[str]:
    found = []
    for i in range(len(edges) + 1):
        found += [f"recall_bin{i}", f"precision_bin{i}", f"n_ref_bin{i}", f"n_pred_bin{i}", f"tp_ref_bin{i}", f"tp_pred_bin{i}"]
    return found


def size_bins(ref_sizes, pred_sizes, ref_matched, pred_matched, edges) -> dict:
    """Recall and precision per bin, with the counts behind them."""
    out = {}
    ref_bins = np.digitize(np.asarray(ref_sizes, float), sorted(edges)) if len(ref_sizes) else np.zeros(0, int)
    pred_bins = np.digitize(np.asarray(pred_sizes, float), sorted(edges)) if len(pred_sizes) else np.zeros(0, int)
    for i in range(len(edges) + 1):
        n_ref, n_pred = int(np.sum(ref_bins == i)), int(np.sum(pred_bins == i))
        tp_ref = int(np.sum(np.asarray(ref_matched, bool)[ref_bins == i])) if n_ref else 0
        tp_pred = int(np.sum(np.asarray(pred_matched, bool)[pred_bins == i])) if n_pred else 0
        out.update(
            {
                f"recall_bin{i}": tp_ref / n_ref if n_ref else None,
                f"precision_bin{i}": tp_pred / n_pred if n_pred else None,
                f"n_ref_bin{i}": n_ref,
                f"n_pred_bin{i}": n_pred,
                f"tp_ref_bin{i}": tp_ref,
                f"tp_pred_bin{i}": tp_pred,
            }
        )
    return out


def coco_matches(n_ref: int, n_pred: int, pairs_ref, pairs_pred, pairs_iou) -> np.ndarray:
    """``evaluateImg``'s ``dtMatches`` as booleans: (threshold, detection) matched, for the
    first ``MAX_DETECTIONS`` predictions in id order."""
    n_det = min(n_pred, MAX_DETECTIONS)
    ious = np.zeros((n_det, n_ref))
    for r, p, v in zip(pairs_ref, pairs_pred, pairs_iou):
        if p < n_det:
            ious[p, r] = v
    matched = np.zeros((THRESHOLDS.size, n_det), bool)
    for t, threshold in enumerate(THRESHOLDS):
        taken = np.zeros(n_ref, bool)
        for d in range(n_det):
            best, found = min(threshold, 1 - 1e-10), -1
            for g in range(n_ref):
                if taken[g] or ious[d, g] < best:
                    continue
                best, found = ious[d, g], g
            if found >= 0:
                taken[found], matched[t, d] = True, True
    return matched


def coco_ap(matches: list[np.ndarray], n_refs: list[int]) -> dict:
    """``accumulate`` and ``summarize`` over images (their detections in image order, all of
    one score): precision at 101 recall points per threshold, then the means."""
    n_gt = int(sum(n_refs))
    if n_gt == 0:
        return dict.fromkeys(AP_KEYS)
    matched = np.concatenate(matches, axis=1) if matches else np.zeros((THRESHOLDS.size, 0), bool)
    precision = np.zeros((THRESHOLDS.size, RECALLS.size))
    for t in range(THRESHOLDS.size):
        tp = np.cumsum(matched[t]).astype(float)
        fp = np.cumsum(~matched[t]).astype(float)
        recall = tp / n_gt
        pr = (tp / (fp + tp + np.spacing(1))).tolist()
        for i in range(len(pr) - 1, 0, -1):
            if pr[i] > pr[i - 1]:
                pr[i - 1] = pr[i]
        for r, at in enumerate(np.searchsorted(recall, RECALLS, side="left")):
            if at < len(pr):
                precision[t, r] = pr[at]
    return {"ap": float(np.mean(precision)), "ap50": float(np.mean(precision[0])), "ap75": float(np.mean(precision[5]))}


# --------------------------------------------------------------------------------------------
# Over the cases


def pooled(options, scored: dict[str, dict]) -> dict:
    """Per class, the dataset's AP (COCO over every case, cases in name order as image ids)
    and each size bin's recall and precision from the counts summed over the cases."""
    out = {}
    for cls in (c.name for c in options.classes):
        cases = [scored[case]["instances"].get(cls, {}) for case in sorted(scored)]
        entry = {}
        if "ap" in options.instance_metrics:
            coco = [c["coco"] for c in cases if "coco" in c]
            entry["ap"] = coco_ap(
                [np.array(c["matches"], bool).reshape(THRESHOLDS.size, -1) for c in coco], [c["n_ref"] for c in coco]
            )
        if "size_bins" in options.instance_metrics:
            entry["size_bins"] = {f"bin{i}": _pooled_bin(scored, cls, i) for i in range(len(options.size_bins) + 1)}
        out[cls] = entry
    return out


def _pooled_bin(scored: dict, cls: str, i: int) -> dict:
    values = [v["classes"][cls].get("instances", {}) for v in scored.values()]
    total = {k: sum(int(v.get(f"{k}_bin{i}") or 0) for v in values) for k in ("n_ref", "n_pred", "tp_ref", "tp_pred")}
    return {
        **total,
        "recall": total["tp_ref"] / total["n_ref"] if total["n_ref"] else None,
        "precision": total["tp_pred"] / total["n_pred"] if total["n_pred"] else None,
    }


def instances_csv(scored: dict[str, dict]) -> str:
    """One row per instance pair and per unmatched instance, with their sizes."""
    from evaluation import figures

    header = ["case", "class", "kind", "ref", "pred", "ref_voxels", "ref_volume", "pred_voxels", "pred_volume", "iou", "dice"]
    records = []
    for case, value in sorted(scored.items()):
        for cls, found in value.get("instances", {}).items():
            for m in found.get("matches", []):
                pred = " ".join(map(str, m["pred"]))
                sizes = [m["ref_voxels"], m["ref_volume"], m["pred_voxels"], m["pred_volume"]]
                records.append([case, cls, "match", m["ref"], pred, *sizes, m.get("iou"), m.get("dice")])
            for u in found.get("unmatched_ref_instances", []):
                records.append([case, cls, "unmatched_ref", u["id"], None, u["voxels"], u["volume"], None, None, None, None])
            for u in found.get("unmatched_pred_instances", []):
                records.append([case, cls, "unmatched_pred", None, u["id"], None, None, u["voxels"], u["volume"], None, None])
    return figures.csv_text(header, records)
