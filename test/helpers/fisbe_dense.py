"""A straightforward, slow FISBe evaluation on dense full-volume arrays, following the
reference (Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d: ``util.check_fix_and_unify_ids``,
``localize.get_centerline_overlap``, ``match.assign_labels``, ``compute.get_gt_coverage*``,
``match.get_m2m_matches``, ``match.get_false_labels``) without the suite's sparse machinery:
every instance is a full-volume boolean mask and every skeleton is computed on the whole
volume, as the reference does. Tests and ``bench/fisbe_volume.py`` compare the suite with it
value by value.
"""

import numpy as np
from helpers.whole_array import skeletonize_full

from evaluation.suites.fisbe.many_to_many import LazyHeap

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.55, 0.65, 0.75, 0.85, 0.95)


def prepare(stack: np.ndarray, remove_small=None, dims=()):
    """``util.check_fix_and_unify_ids`` on a (C, Z, Y, X) array (small ids removed, empty
    channels dropped, binary channels numbered, ids relabelled per channel with a running
    offset); returns (relabelled stack, mapped dims)."""
    a = np.asarray(stack).astype(np.int64)
    if remove_small:
        ids, counts = np.unique(a, return_counts=True)
        a[np.isin(a, ids[counts <= remove_small])] = 0
    if a.shape[0] > 1:
        keep = [c for c in range(a.shape[0]) if a[c].any()]
        a = a[keep] if keep else np.zeros((1,) + a.shape[1:], np.int64)
    if a.max() == 1:
        a = a * np.arange(1, a.shape[0] + 1)[:, None, None, None]
    out, offset, forward = np.zeros_like(a), 1, {}
    for c in range(a.shape[0]):
        values = np.unique(a[c][a[c] > 0])
        for new, old in enumerate(values.tolist(), start=offset):
            out[c][a[c] == old] = new
            forward.setdefault(old, new)
        offset = offset + values.size if values.size else 1
    return out, [forward.get(int(d), 0) for d in dims]


def masks(a: np.ndarray) -> list[np.ndarray]:
    return [np.any(a == k, axis=0) for k in range(1, int(a.max()) + 1)]


def overlap_ratio(skeletons, others, other_fg) -> np.ndarray:
    m = np.zeros((len(skeletons) + 1, len(others) + 1), np.float32)
    for s, skel in enumerate(skeletons, start=1):
        size = int(skel.sum())
        if size == 0:
            continue
        m[s, 0] = int((skel & ~other_fg).sum()) / float(size)
        for c, other in enumerate(others, start=1):
            m[s, c] = int((skel & other).sum()) / float(size)
    return m


def greedy(loc, th):
    fg = loc[1:, 1:]
    cands = sorted((-float(fg[g, p]), g, p) for g, p in zip(*np.nonzero(fg > np.float32(th))))
    used_g, used_p, gs, ps = set(), set(), [], []
    for _, g, p in cands:
        if g not in used_g and p not in used_p:
            used_g.add(g), used_p.add(p), gs.append(g + 1), ps.append(p + 1)
    return len(gs), gs, ps


def coverage(prec, rec, gt_skels, pred_masks, union):
    assigned = np.argmax(prec, axis=0)
    out = []
    for g in range(1, rec.shape[0]):
        if union:
            chosen = [p for p in range(1, prec.shape[1]) if assigned[p] == g]
            if not chosen:
                out.append(0.0)
                continue
            u = np.any([pred_masks[p - 1] for p in chosen], axis=0)
            skel = gt_skels[g - 1]
            out.append(np.float64(int((skel & u).sum())) / np.float64(int(skel.sum())))
        else:
            out.append(np.sum(rec[g, assigned == g]))
    return out


def m2m(rec, th, overlaps, gt_masks, gt_skels, pred_masks):
    fg = rec[1:, 1:]
    rows, cols = np.nonzero(fg > th)
    matches = {}
    if not overlaps:
        for g, p in zip(rows.tolist(), cols.tolist()):
            matches.setdefault(g, []).append(p)
        return matches
    heap = LazyHeap()
    for g, p in zip(rows.tolist(), cols.tolist()):
        heap.push((g, p), float(-fg[g, p]))
    avail = {g: gt_skels[g].copy() for g in set(rows.tolist())}
    pavail = {p: pred_masks[p].copy() for p in set(cols.tolist())}
    while (key := heap.pop_live()) is not None:
        g, p = key
        matches.setdefault(g, []).append(p)
        avail[g] &= ~pred_masks[p]
        pavail[p] &= ~gt_masks[g]
        for q in np.flatnonzero(fg[g] > th).tolist():
            v = int((avail[g] & pred_masks[q]).sum()) / (float(gt_skels[g].sum()) or 1.0)
            heap.push((g, q), -v) if v > th else heap.invalidate((g, q))
        for h in np.flatnonzero(fg[:, p] > th).tolist():
            v = int((gt_skels[h] & pavail[p]).sum()) / (float(gt_skels[h].sum()) or 1.0)
            heap.push((h, p), -v) if v > th else heap.invalidate((h, p))
    return matches


def fm_fs(matches, n_pred):
    fs = sum(max(0, len(v) - 1) for v in matches.values())
    per = np.zeros(n_pred, int)
    for v in matches.values():
        for p in v:
            per[p] += 1
    return int(np.maximum(per - 1, 0).sum()), fs


def subset(ids, gt, gt_masks, gt_skels, pred_masks, pred_skels, pred_overlaps, rec, loc):
    k = len(ids)
    sub = np.stack([np.where(gt_masks[i - 1], j + 1, 0) for j, i in enumerate(ids)])
    sub_masks = [gt_masks[i - 1] for i in ids]
    prec = overlap_ratio(pred_skels, sub_masks, np.any(sub > 0, axis=0)).T
    union = bool(np.any((sub > 0).sum(0) > 1)) and pred_overlaps
    covs = coverage(prec, rec[[0] + list(ids)], [gt_skels[i - 1] for i in ids], pred_masks, union)
    l_sub = loc[[0] + list(ids)]
    tp = greedy(l_sub, 0.5)[0] if l_sub[1:, 1:].size and l_sub[1:, 1:].max() > np.float32(0.5) else 0
    return k, tp, tp / float(k), covs, np.mean(covs)


def evaluate(gt_stack, pred_stack, dims=(), partly=False):
    """Per-image metrics (``general`` and ``confusion_matrix``) of 4-D GT and prediction."""
    pred, _ = prepare(pred_stack, remove_small=800)
    gt, dims = prepare(gt_stack, dims=dims)
    gt_ov, pred_ov = bool(np.any((gt > 0).sum(0) > 1)), bool(np.any((pred > 0).sum(0) > 1))
    n_gt, n_pred = int(gt.max()), int(pred.max())
    gt_masks, pred_masks = masks(gt), masks(pred)
    gt_skels = [skeletonize_full(m) for m in gt_masks]
    pred_skels = [skeletonize_full(m) for m in pred_masks]
    rec = overlap_ratio(gt_skels, pred_masks, np.any(pred > 0, axis=0))
    prec = overlap_ratio(pred_skels, gt_masks, np.any(gt > 0, axis=0)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        loc = np.nan_to_num(2 * prec * rec / (prec + rec))
    rec_wo = None
    if partly and (gt_ov or pred_ov):
        shared = (gt > 0).sum(0) > 1
        wo_skels = [skeletonize_full(m & ~shared) for m in gt_masks]
        rec_wo = overlap_ratio(wo_skels, [m & ~shared for m in pred_masks], np.any(pred > 0, axis=0) & ~shared)

    general, cm, aps, fs_list = {"Num GT": n_gt, "Num Pred": n_pred}, {}, [], []
    for th in THRESHOLDS:
        tp, gs, ps = greedy(loc, th) if min(n_gt, n_pred) > 0 and loc.max() > np.float32(th) else (0, [], [])
        row = {}
        if partly:
            unmatched = [p for p in range(1, n_pred + 1) if p not in ps]
            fp = sum(1 for p in unmatched if np.argmax(prec[:, p]) > 0)
            mask = rec[1:, 1:] > th
            if rec_wo is not None:
                mask &= rec_wo[1:, 1:] > th
            row = {"false_split": fp, "false_merge": int(np.maximum(mask.sum(0) - 1, 0).sum())}
        else:
            fp = n_pred - tp
        fn = n_gt - tp
        pr, rc = tp / max(1, tp + fp), tp / max(1, tp + fn)
        f = 2 * pr * rc / (pr + rc) if pr + rc > 0 else 0.0
        aps.append(pr * rc), fs_list.append(f)
        cm["th_" + str(th).replace(".", "_")] = {
            "AP_TP": tp,
            "AP_FP": fp,
            "AP_FN": fn,
            "precision": pr,
            "recall": rc,
            "AP": pr * rc,
            "fscore": f,
            **row,
        }
        if th == 0.5:
            general["TP_05"], general["TP_05_cldice"] = tp, [loc[g, p] for g, p in zip(gs, ps)]
    cm.update(
        avAP=np.mean(aps[4:]),
        avAP59=np.mean(aps[4:]),
        avAP19=np.mean(aps[:9]),
        avFscore=np.mean(fs_list[:9]),
        avFscore59=np.mean(fs_list[4:]),
        avFscore19=np.mean(fs_list[:9]),
    )
    general["TP_05_rel"] = general["TP_05"] / n_gt if n_gt else 0.0
    general["avg_TP_05_cldice"] = np.mean(general["TP_05_cldice"]) if general["TP_05_cldice"] else 0.0
    cov = coverage(prec, rec, gt_skels, pred_masks, gt_ov and pred_ov)
    general["gt_skel_coverage"] = cov
    general["avg_gt_skel_coverage"] = np.mean(cov) if cov else 0.0
    general["avg_f1_cov_score"] = 0.5 * cm["avFscore19"] + 0.5 * general["avg_gt_skel_coverage"]
    ov = gt_ov or pred_ov
    general["FM"] = fm_fs(m2m(rec, 0.1, ov, gt_masks, gt_skels, pred_masks), n_pred)[0]
    general["FS"] = fm_fs(m2m(rec, 0.05, ov, gt_masks, gt_skels, pred_masks), n_pred)[1]
    args = (gt, gt_masks, gt_skels, pred_masks, pred_skels, pred_ov, rec, loc)
    dim = subset(dims, *args) if dims and n_pred else (len(dims), 0, 0.0, [], 0)
    ov_ids = np.unique(gt[:, (gt > 0).sum(0) > 1]).tolist()
    ov_ids = [i for i in ov_ids if i]
    over = subset(ov_ids, *args) if ov_ids else (0, 0, 0.0, [], 0)
    for suffix, vals in (("dim", dim), ("overlap", over)):
        for key, v in zip(("GT_", "TP_05_", "TP_05_rel_", "gt_covs_", "avg_gt_cov_"), vals):
            general[key + suffix] = v
    return {"general": general, "confusion_matrix": cm}
