"""Distance metrics of one (case, class), reduced from its ``Surfaces`` the way each library
reduces its own distance lists. Each function returns every distance key; the caller keeps
those the phase asked for.

Where a library raises instead of returning a number (panoptica's Hausdorff distance of an
empty mask), the value is ``None``: undefined, written as null.
"""

import sys

import numpy as np

from evaluation.metrics import surfels
from evaluation.metrics.grouped import counting_order, percentile_linear, quantile_float32
from evaluation.metrics.nearest import distance_rank
from evaluation.suites.segmentation.keys import number_key
from evaluation.suites.segmentation.surfaces import Surfaces, monai_area_table, surfel_surfaces, voxel_surfaces


def tolerance_value(tolerance, spacing) -> float:
    """``min_spacing`` is panoptica's default tolerance (``normalized_surface_dice.py:
    _compute_normalized_surface_dice``: ``min(voxelspacing)``)."""
    return float(min(spacing)) if tolerance == "min_spacing" else float(tolerance)


def _percentile(values: np.ndarray, percent: float) -> float:
    ordered = np.sort(values)
    return float(percentile_linear(ordered, np.array([0]), np.array([ordered.size]), percent)[0])


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


def _ratio(numerator, denominator) -> float:
    return float(numerator / denominator) if denominator else float("nan")


def panoptica(s: Surfaces, percentiles, tolerances, spacing) -> dict:
    """panoptica/metrics/_surface_distances.py (``_hd_from_pair``, ``_hd95_from_pair``,
    ``_assd_from_pair``, ``_nsd_from_pair``): HD the larger directed maximum, a percentile of
    the two directions pooled, ASSD the mean of the two directed means, NSD the average of the
    two directed fractions within the tolerance. Nothing guards empty masks: the distances to
    an empty surface are those to the voxel (-1, 0, ..., 0) (``Surfaces``), the maximum of an
    empty list raises (None) and the mean of one is nan."""
    a = s.ref_virtual if s.ref_virtual is not None else s.ref
    b = s.pred_virtual if s.pred_virtual is not None else s.pred
    pooled = np.hstack((a, b))
    out = {
        "hd": float(max(a.max(), b.max())) if a.size and b.size else None,
        "asd_ref_to_pred": _mean(a),
        "asd_pred_to_ref": _mean(b),
        "surface_ref": int(s.ref.size),
        "surface_pred": int(s.pred.size),
    }
    out["masd"] = out["assd"] = float(np.mean((out["asd_ref_to_pred"], out["asd_pred_to_ref"])))
    for p in percentiles:
        out[f"hd{number_key(p)}"] = _percentile(pooled, p) if pooled.size else None
    with np.errstate(invalid="ignore", divide="ignore"):
        for t in tolerances:
            tau = tolerance_value(t, spacing)
            near_a, near_b = np.sum(a <= tau) / a.size, np.sum(b <= tau) / b.size
            far_a, far_b = np.sum(a > tau) / a.size, np.sum(b > tau) / b.size
            key = number_key(t)
            out[f"nsd_{key}"] = float((near_a + near_b) / (near_a + near_b + far_a + far_b + sys.float_info.min))
            out[f"nsd_ref_{key}"], out[f"nsd_pred_{key}"] = float(near_a), float(near_b)
    return out


def metricsreloaded(s: Surfaces, percentiles, tolerances, spacing) -> dict:
    """MetricsReloaded/metrics/pairwise_measures.py ``measured_distance`` and
    ``normalised_surface_distance``: both masks empty give 0 distances and NSD 1, one empty
    gives nan distances; HD the larger directed maximum, a percentile the larger of the two
    directed percentiles, ``assd`` pooled over both directions, ``masd`` the mean of the two
    directed means, NSD pooled counts within the tolerance. With one mask empty, the NSD
    counts the other surface's voxels within the tolerance of the voxel (-1, 0, ..., 0)."""
    a, b = s.ref, s.pred
    out = {"surface_ref": int(a.size), "surface_pred": int(b.size)}
    both, one = a.size == 0 and b.size == 0, (a.size == 0) != (b.size == 0)
    undefined = 0.0 if both else float("nan")
    if both or one:
        out.update(hd=undefined, assd=undefined, masd=undefined, asd_ref_to_pred=undefined, asd_pred_to_ref=undefined)
        out.update({f"hd{number_key(p)}": undefined for p in percentiles})
        virtual = s.ref_virtual if s.ref_virtual is not None else s.pred_virtual
        for t in tolerances:
            key, tau = number_key(t), tolerance_value(t, spacing)
            out[f"nsd_{key}"] = 1.0 if both else float(np.sum(virtual <= tau) / virtual.size)
            out[f"nsd_ref_{key}"] = out[f"nsd_pred_{key}"] = out[f"nsd_{key}"] if both else float("nan")
        return out
    sum_a, sum_b = np.sum(a), np.sum(b)
    out.update(
        hd=float(max(np.max(b), np.max(a))),
        assd=float((sum_b + sum_a) / (b.size + a.size)),
        masd=float(0.5 * (sum_b / b.size + sum_a / a.size)),
        asd_ref_to_pred=float(sum_a / a.size),
        asd_pred_to_ref=float(sum_b / b.size),
    )
    for p in percentiles:
        out[f"hd{number_key(p)}"] = max(_percentile(b, p), _percentile(a, p))
    for t in tolerances:
        key, tau = number_key(t), tolerance_value(t, spacing)
        near_a, near_b = np.sum(a <= tau), np.sum(b <= tau)
        out[f"nsd_{key}"] = float((near_b + near_a) / (a.size + b.size))
        out[f"nsd_ref_{key}"], out[f"nsd_pred_{key}"] = float(near_a / a.size), float(near_b / b.size)
    return out


def _monai_directions(s: Surfaces) -> tuple[np.ndarray, np.ndarray]:
    """(pred -> ref, ref -> pred) as ``monai/metrics/utils.py: get_surface_distance`` returns
    them, float32: with one surface empty, both directions are ``inf`` once per element of the
    other surface."""
    a, b = s.ref.astype(np.float32), s.pred.astype(np.float32)
    if a.size == 0 and b.size:
        return b, np.full(b.size, np.inf, np.float32)
    if b.size == 0 and a.size:
        return np.full(a.size, np.inf, np.float32), a
    return b, a


def _float32_mean(values: np.ndarray) -> float:
    return float(np.float32(values.mean(dtype=np.float64))) if values.size else float("nan")


def _nan_max(values) -> float:
    """``torch.max`` of a stacked tensor: nan wins."""
    return float("nan") if any(np.isnan(v) for v in values) else float(max(values))


def monai(s: Surfaces, percentiles, tolerances, spacing, surfels: Surfaces | None = None) -> dict:
    """monai/metrics: ``hausdorff_distance.py`` (max, or ``torch.quantile`` of each direction,
    then the larger), ``surface_distance.py`` (ASSD: the mean of both directions
    concatenated), ``surface_dice.py`` (NSD: counts, or surfel areas with ``use_subvoxels``,
    within the tolerance). Distances are float32, compared with a float32 tolerance; an empty
    direction gives nan, an empty mask ``inf`` distances (so a percentile is nan: inf - inf)."""
    to_ref, to_pred = _monai_directions(s)
    out = {
        "surface_ref": int(s.ref.size),
        "surface_pred": int(s.pred.size),
        "hd": _nan_max([float(d.max()) if d.size else float("nan") for d in (to_ref, to_pred)]),
        "assd": _float32_mean(np.concatenate((to_ref, to_pred))),
        "asd_pred_to_ref": _float32_mean(to_ref),
        "asd_ref_to_pred": _float32_mean(to_pred),
    }
    out["masd"] = float(np.float32((np.float32(out["asd_pred_to_ref"]) + np.float32(out["asd_ref_to_pred"])) / np.float32(2)))
    for p in percentiles:
        quantiles = [
            float(quantile_float32(np.sort(d), np.array([0]), np.array([d.size]), p / 100)[0]) if d.size else float("nan")
            for d in (to_ref, to_pred)
        ]
        out[f"hd{number_key(p)}"] = _nan_max(quantiles)
    for t in tolerances:
        key, tau = number_key(t), np.float32(tolerance_value(t, spacing))
        near_ref, near_pred = int(np.sum(to_pred <= tau)), int(np.sum(to_ref <= tau))
        total = to_ref.size + to_pred.size
        out[f"nsd_{key}"] = float(np.float32(near_ref + near_pred) / np.float32(total)) if total else float("nan")
        out[f"nsd_ref_{key}"] = float(np.float32(near_ref) / np.float32(to_pred.size)) if to_pred.size else float("nan")
        out[f"nsd_pred_{key}"] = float(np.float32(near_pred) / np.float32(to_ref.size)) if to_ref.size else float("nan")
        if surfels is not None:
            out.update(_monai_subvoxel_nsd(surfels, key, tau))
    return out


def _monai_subvoxel_nsd(s: Surfaces, key: str, tau: np.float32) -> dict:
    """``surface_dice.py`` with ``use_subvoxels``: surfel areas of the elements within the
    tolerance over all areas, distances float32."""
    to_ref, to_pred = s.pred.astype(np.float32), s.ref.astype(np.float32)
    near_ref = float(s.ref_area[to_pred <= tau].sum()) if s.ref_area.size else 0.0
    near_pred = float(s.pred_area[to_ref <= tau].sum()) if s.pred_area.size else 0.0
    total = float(s.ref_area.sum()) + float(s.pred_area.sum())
    return {
        f"nsd_{key}": float(np.float32((near_ref + near_pred) / total)) if total else float("nan"),
        f"nsd_ref_{key}": float(np.float32(near_ref / float(s.ref_area.sum()))) if s.ref_area.size else float("nan"),
        f"nsd_pred_{key}": float(np.float32(near_pred / float(s.pred_area.sum()))) if s.pred_area.size else float("nan"),
    }


def deepmind(s: Surfaces, percentiles, tolerances, spacing) -> dict:
    """surface_distance/metrics.py on corner surfels: each direction sorted by (distance,
    area); ``compute_robust_hausdorff`` takes the first distance whose cumulative area
    fraction reaches the percentile (no interpolation), then the larger direction (``inf`` for
    an empty one); ``compute_average_surface_distance`` the area-weighted mean of each
    direction; ``compute_surface_overlap_at_tolerance`` and ``compute_surface_dice_at_tolerance``
    the areas within the tolerance. ``assd`` (pooled, area-weighted) and ``masd`` (mean of the
    two directions) are this suite's symmetric summaries; the library returns the pair only."""
    (d_ref, a_ref), (d_pred, a_pred) = (
        _by_distance(s.ref, s.ref_area, s.ref_area_rank, spacing),
        _by_distance(s.pred, s.pred_area, s.pred_area_rank, spacing),
    )
    sum_ref, sum_pred = np.sum(a_ref), np.sum(a_pred)
    weighted_ref, weighted_pred = np.sum(d_ref * a_ref), np.sum(d_pred * a_pred)
    fractions = [np.cumsum(a) / np.sum(a) if a.size else None for a in (a_ref, a_pred)]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "surface_ref": int(d_ref.size),
            "surface_pred": int(d_pred.size),
            "surface_area_ref": float(sum_ref),
            "surface_area_pred": float(sum_pred),
            "asd_ref_to_pred": float(weighted_ref / sum_ref),
            "asd_pred_to_ref": float(weighted_pred / sum_pred),
            "assd": float((weighted_ref + weighted_pred) / (sum_ref + sum_pred)),
        }
        out["masd"] = (out["asd_ref_to_pred"] + out["asd_pred_to_ref"]) / 2
        out["hd"] = _robust_hausdorff((d_ref, d_pred), fractions, 100)
        for p in percentiles:
            out[f"hd{number_key(p)}"] = _robust_hausdorff((d_ref, d_pred), fractions, p)
        for t in tolerances:
            key, tau = number_key(t), tolerance_value(t, spacing)
            near_ref, near_pred = np.sum(a_ref[d_ref <= tau]), np.sum(a_pred[d_pred <= tau])
            out[f"nsd_{key}"] = float((near_ref + near_pred) / (sum_ref + sum_pred))
            out[f"nsd_ref_{key}"], out[f"nsd_pred_{key}"] = float(near_ref / sum_ref), float(near_pred / sum_pred)
    return out


def _by_distance(distances: np.ndarray, areas: np.ndarray, area_rank: np.ndarray, spacing) -> tuple[np.ndarray, np.ndarray]:
    """``_sort_distances_surfels``: sorted by (distance, area), here by counting on the
    distances' and the areas' dense ranks (both take few distinct values)."""
    if not distances.size:
        return distances, areas
    keys = distance_rank(distances, spacing) * (int(area_rank.max()) + 1) + area_rank
    order = counting_order(keys, int(keys.max()) + 1)
    return distances[order], areas[order]


def _robust_hausdorff(directions, fractions, percent) -> float:
    """Per direction, the first distance whose cumulative area fraction reaches ``percent``."""
    found = []
    for d, cumulative in zip(directions, fractions):
        found.append(float(d[min(int(np.searchsorted(cumulative, percent / 100.0)), d.size - 1)]) if d.size else float("inf"))
    return max(found)


# --------------------------------------------------------------------------------------------
# The metric table's functions: one (case, class)'s surfaces as each definition sees them,
# reduced; one function per definition, shared by every distance row


def _arguments(m) -> tuple:
    return m.options.percentiles, m.options.nsd_tolerances, m.box.spacing


def panoptica_distances(m) -> dict:
    return panoptica(voxel_surfaces(m.box), *_arguments(m))


def metricsreloaded_distances(m) -> dict:
    return metricsreloaded(voxel_surfaces(m.box), *_arguments(m))


def monai_distances(m) -> dict:
    """Boundary voxels; with ``monai_subvoxels``, the NSD on MONAI's corner surfels too."""
    corners = surfel_surfaces(m.box, monai_area_table(m.box.spacing)) if m.options.monai_subvoxels else None
    return monai(voxel_surfaces(m.box), *_arguments(m), surfels=corners)


def deepmind_distances(m) -> dict:
    return deepmind(surfel_surfaces(m.box, surfels.area_table(m.box.spacing)), *_arguments(m))


MEASURES = {
    "panoptica": panoptica_distances,
    "metricsreloaded": metricsreloaded_distances,
    "monai": monai_distances,
    "deepmind": deepmind_distances,
}
