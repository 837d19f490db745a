"""One FISBe image: label preprocessing and every per-image metric of the FlyLight preset.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``evaluate.evaluate_volume``
with ``--app flylight`` (cldice localisation, greedy assignment, predictions' ids of at most
800 voxels removed, false merges at clRecall 0.1, false splits at 0.05, dim and overlap
subsets), ``util.check_fix_and_unify_ids``, ``localize.get_centerline_overlap``,
``compute.get_gt_coverage{,_dim,_overlap}``, ``compute.get_m2m_metrics``,
``match.get_false_labels``. Values keep the reference's numeric types (numpy float32 where it
computes in float32) until the suite turns them into JSON.

Where the reference crashes, the natural value is returned instead: no matching when there
is nothing to match (``compute.get_gt_coverage_overlap`` takes the max of an empty matrix
for an empty prediction), 0.0 for ratios over zero instances (``evaluate_volume`` divides by
the GT count), one empty channel for an all-empty channel stack
(``util.remove_empty_channels`` leaves no channel), integers wide enough for any number of
ids (``util.check_fix_and_unify_ids`` writes back into the input's dtype).
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics.centerline import cldice, greedy_match, overlap_matrix
from evaluation.metrics.skeleton import skeleton_voxels
from evaluation.metrics.sparse_labels import SparseLabels
from evaluation.readers.label_stacks import Channel
from evaluation.suites.fisbe.coverage import SkeletonHits, gt_coverage
from evaluation.suites.fisbe.many_to_many import many_to_many, split_merge_counts

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.55, 0.65, 0.75, 0.85, 0.95)
POOLED_THRESHOLDS = THRESHOLDS[:9]


def table_name(threshold: float) -> str:
    return "th_" + str(threshold).replace(".", "_")


@dataclass(frozen=True)
class Settings:
    """The FlyLight preset's fixed clRecall thresholds of the many-to-many matching
    (``evaluate.main``, ``--app flylight``: ``fm_thresh``, ``fs_thresh``); the small-id
    removal, the preset's one knob a phase may change, happens before (:func:`unify`)."""

    fm_threshold: float = 0.1
    fs_threshold: float = 0.05


# --------------------------------------------------------------------------------------------
# Preprocessing (``util.check_fix_and_unify_ids``)


def unify(channels: list[Channel], shape, remove_small: int | None = None, dims=None) -> tuple[SparseLabels, list[int]]:
    """Small-id removal (over all channels together, count <= ``remove_small``:
    ``util.filter_components``), empty channels dropped (``util.remove_empty_channels``; one
    empty channel kept if nothing is left), binary channels numbered
    (``util.binary_masks_to_uniq_ids``), then ids relabelled sequentially per channel with a
    running offset; ``dims`` (original ids) are mapped through the first channel holding each
    id (0 if none does)."""
    if remove_small:
        values = np.concatenate([c.values for c in channels]) if channels else np.zeros(0, np.int64)
        ids, counts = np.unique(values, return_counts=True)
        small = ids[counts <= remove_small]
        if small.size:
            channels = [_keep(c, ~np.isin(c.values, small)) for c in channels]
    if len(channels) > 1:
        channels = [c for c in channels if c.values.size]
    if not channels:
        channels = [Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))]
    top = max(int(c.values.max()) if c.values.size else 0 for c in channels)
    if top == 1:
        channels = [Channel(c.index, np.full(c.values.size, i + 1, np.int64)) for i, c in enumerate(channels)]

    offset, forward = 1, {}
    parts_index, parts_ids, channel_of = [], [], [0]
    for number, c in enumerate(channels):
        distinct, rank = np.unique(c.values, return_inverse=True)
        for original, new in zip(distinct.tolist(), range(offset, offset + distinct.size)):
            forward.setdefault(original, new)
        parts_index.append(c.index)
        parts_ids.append(rank.astype(np.int64).ravel() + offset)
        channel_of += [number] * distinct.size
        offset = offset + distinct.size if distinct.size else 1
    count = len(channel_of) - 1
    labels = SparseLabels.from_pairs(shape, np.concatenate(parts_index), np.concatenate(parts_ids), count, channel_of)
    mapped = [forward.get(int(d), 0) for d in (dims or [])]
    return labels, mapped


def _keep(channel: Channel, keep: np.ndarray) -> Channel:
    return Channel(channel.index[keep], channel.values[keep])


# --------------------------------------------------------------------------------------------
# Per-image evaluation


@dataclass
class Localisation:
    """Skeletons, their hits and the three (N_gt+1, N_pred+1) float32 matrices: clRecall,
    clPrecision and clDice (``localize.compute_localization_criterion`` with ``cldice``)."""

    gt_skeletons: list[np.ndarray]
    pred_skeletons: list[np.ndarray]
    hits: list[SkeletonHits]
    recall: np.ndarray
    precision: np.ndarray
    cldice: np.ndarray


def localise(gt: SparseLabels, pred: SparseLabels, with_gt_hits: bool) -> Localisation:
    shape = gt.shape
    gt_skeletons = [skeleton_voxels(gt.voxels(g), shape) for g in range(1, gt.count + 1)]
    pred_skeletons = [skeleton_voxels(pred.voxels(p), shape) for p in range(1, pred.count + 1)]
    hits = []
    for skeleton in gt_skeletons:
        pred_pos, pred_ids = pred.hits(skeleton)
        gt_pos, gt_ids = gt.hits(skeleton) if with_gt_hits else (None, None)
        hits.append(SkeletonHits(skeleton.size, pred_pos, pred_ids, gt_pos, gt_ids))
    recall = overlap_matrix(gt_skeletons, pred)
    precision = overlap_matrix(pred_skeletons, gt).T
    return Localisation(gt_skeletons, pred_skeletons, hits, recall, precision, cldice(precision, recall))


def recall_without_overlap(gt: SparseLabels, pred: SparseLabels, loc: Localisation) -> np.ndarray:
    """clRecall after removing every voxel shared by two or more GT instances from both sides
    (``compute_localization_criterion``, for the partly mode's false merge count); skeletons
    of instances that lose no voxel are reused."""
    shared = gt.shared_voxels()
    gt_wo, pred_wo = gt.without(shared), pred.without(shared)
    skeletons = []
    for g in range(1, gt.count + 1):
        touched = np.isin(gt.voxels(g), shared).any() if shared.size else False
        skeletons.append(skeleton_voxels(gt_wo.voxels(g), gt.shape) if touched else loc.gt_skeletons[g - 1])
    return overlap_matrix(skeletons, pred_wo)


def false_labels(
    tp_pred: np.ndarray, n_pred: int, precision: np.ndarray, recall: np.ndarray, recall_wo: np.ndarray | None, threshold: float
) -> tuple[int, int]:
    """(false splits, false merges) of one threshold (``get_false_labels``): unmatched
    predictions whose largest clPrecision is with a GT instance, and predictions covering more
    than one GT skeleton above the threshold (also without the GT overlap regions)."""
    all_pred = np.arange(1, n_pred + 1)
    unmatched = all_pred[np.isin(all_pred, tp_pred, invert=True)]
    splits = int(np.count_nonzero(np.argmax(precision[:, unmatched], axis=0) > 0)) if unmatched.size else 0
    mask = recall[1:, 1:] > threshold
    if recall_wo is not None:
        mask = mask & (recall_wo[1:, 1:] > threshold)
    merges = int(np.sum(np.maximum(0, np.sum(mask, axis=0) - 1)))
    return splits, merges


def threshold_tables(loc: Localisation, n_gt: int, n_pred: int, partly: bool, recall_wo) -> tuple[dict, list, list, int, list]:
    tables, aps, fscores, tp_05, tp_05_cldice = {}, [], [], 0, []
    for threshold in THRESHOLDS:
        if min(n_gt, n_pred) > 0 and np.max(loc.cldice) > threshold:
            tp, gt_ind, pred_ind = greedy_match(loc.cldice, threshold)
        else:
            tp, gt_ind, pred_ind = 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
        splits = merges = None
        if partly:
            splits, merges = false_labels(pred_ind, n_pred, loc.precision, loc.recall, recall_wo, threshold)
            fp = splits
        else:
            fp = n_pred - tp
        fn = n_gt - tp
        precision = 1.0 * tp / max(1, tp + fp)
        recall = 1.0 * tp / max(1, tp + fn)
        ap = precision * recall
        fscore = (2.0 * precision * recall) / (precision + recall) if precision + recall > 0 else 0.0
        aps.append(ap)
        fscores.append(fscore)
        table = {"AP_TP": tp, "AP_FP": fp, "AP_FN": fn, "precision": precision, "recall": recall, "AP": ap, "fscore": fscore}
        if partly:
            table.update(false_split=splits, false_merge=merges)
        tables[table_name(threshold)] = table
        if threshold == 0.5:
            tp_05 = tp
            tp_05_cldice = list(loc.cldice[gt_ind, pred_ind])
    return tables, aps, fscores, tp_05, tp_05_cldice


def subset_scores(ids: list[int], gt: SparseLabels, loc: Localisation, pred_overlaps: bool):
    """(GT count, TP at 0.5, TP ratio, coverages, mean coverage) of a GT subset
    (``get_gt_coverage_dim`` / ``_overlap``): coverage from the predictions' clPrecision
    against the subset alone (other GT counts as background), the subset's clRecall rows,
    and a separate greedy matching at 0.5 on the subset's clDice rows."""
    k = len(ids)
    subset = gt.subset(ids)
    precision = overlap_matrix(loc.pred_skeletons, subset).T
    rows = [0] + list(ids)
    covs = gt_coverage(precision, loc.recall[rows], subset.overlaps() and pred_overlaps, [loc.hits[i - 1] for i in ids])
    loc_subset = loc.cldice[rows]
    tp = 0
    if loc_subset[1:, 1:].size and np.max(loc_subset[1:, 1:]) > 0.5:
        tp, _, _ = greedy_match(loc_subset, 0.5)
    return k, tp, tp / float(k), covs, np.mean(covs)


def evaluate(gt: SparseLabels, pred: SparseLabels, dims: list[int], partly: bool, settings: Settings = Settings()) -> dict:
    """The reference's metrics dictionary for one image (tables ``general`` and
    ``confusion_matrix``), numpy scalar types kept."""
    gt_overlaps, pred_overlaps = gt.overlaps(), pred.overlaps()
    overlaps = gt_overlaps or pred_overlaps
    n_gt, n_pred = gt.count, pred.count
    loc = localise(gt, pred, with_gt_hits=overlaps)
    recall_wo = recall_without_overlap(gt, pred, loc) if partly and overlaps else None

    general = {"Num GT": n_gt, "Num Pred": n_pred}
    tables, aps, fscores, tp_05, tp_05_cldice = threshold_tables(loc, n_gt, n_pred, partly, recall_wo)
    av_f19 = np.mean(fscores[:-5])
    confusion = {
        **tables,
        "avAP": np.mean(aps[4:]),
        "avAP59": np.mean(aps[4:]),
        "avAP19": np.mean(aps[:-5]),
        "avFscore": av_f19,
        "avFscore59": np.mean(fscores[4:]),
        "avFscore19": av_f19,
    }

    general["TP_05"] = tp_05
    general["TP_05_rel"] = tp_05 / float(n_gt) if n_gt else 0.0
    general["TP_05_cldice"] = tp_05_cldice
    general["avg_TP_05_cldice"] = np.mean(tp_05_cldice) if tp_05_cldice else 0.0

    coverage = gt_coverage(loc.precision, loc.recall, gt_overlaps and pred_overlaps, loc.hits)
    mean_coverage = np.mean(coverage) if coverage else 0.0
    general["gt_skel_coverage"] = coverage
    general["avg_gt_skel_coverage"] = mean_coverage
    general["avg_f1_cov_score"] = 0.5 * av_f19 + 0.5 * mean_coverage

    fm, _ = split_merge_counts(many_to_many(loc.recall, settings.fm_threshold, overlaps, loc.hits), n_pred)
    _, fs = split_merge_counts(many_to_many(loc.recall, settings.fs_threshold, overlaps, loc.hits), n_pred)
    general["FM"], general["FS"] = fm, fs

    dim = subset_scores(dims, gt, loc, pred_overlaps) if dims and n_pred > 0 else (len(dims), 0, 0.0, [], 0)
    overlap_ids = np.unique(gt.ids[np.isin(gt.index, gt.shared_voxels())]).tolist() if gt_overlaps else []
    overlap = subset_scores(overlap_ids, gt, loc, pred_overlaps) if overlap_ids else (0, 0, 0.0, [], 0)
    for suffix, values in (("dim", dim), ("overlap", overlap)):
        for key, value in zip(("GT_", "TP_05_", "TP_05_rel_", "gt_covs_", "avg_gt_cov_"), values):
            general[key + suffix] = value
    return {"general": general, "confusion_matrix": confusion}
