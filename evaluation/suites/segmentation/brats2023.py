"""The BraTS 2023 lesion-wise metrics (rachitsaluja/BraTS-2023-Metrics at 43c9052,
``metrics.py``), one case: per region (WT = labels 1, 2, 3; TC = 1, 3; ET = 3), the legacy
Dice, HD95, sensitivity and specificity of the whole region, and the lesion-wise Dice and HD95.

``get_LesionWiseScores``: the truth's components (26-connected) that fall in one component of
the truth dilated by the challenge's factor (18-connected structure, ``dil_factor``
iterations) are one lesion; every predicted component (26-connected) touching that dilated
component is its match, whole (even the part outside), and a predicted component touching
none is a false positive. Each lesion's Dice and HD95 (DeepMind's surface distances, the
first distance at which 95 % of the surfel area is reached) are taken against the union of its
matches; an unmatched lesion scores Dice 0 and HD95 infinite, i.e. 374. ``get_LesionWiseResults``
then leaves out lesions of at most ``lesion_volume_thresh`` mm³ and averages over the rest and
the false positives (Dice 0, HD95 374 each); with neither, Dice 1 and HD95 0.

Reproduced as they are (docs/suites/segmentation.md lists them):

* the volume threshold applies to truth lesions only: a false positive of any size, a single
  voxel included, is penalised; ``brats2023_fp_min_volume`` applies the threshold to false
  positives too;
* the lesions are numbered as cc3d numbers the dilated truth read by nibabel, in (x, y, z)
  order: the lesion-wise means are summed in that order (the last bit of the mean depends on
  it);
* volumes and distances use the header's spacing, read as float32 (NIfTI stores it so); the
  dilation counts voxels whatever the spacing.

Everything is computed in the region's bounding box (grown by the dilation), each lesion's
surface distances in its own box and its matches': no pass over the volume per lesion.
"""

import math
import sys

import numpy as np

from evaluation.errors import SubmissionError
from evaluation.metrics import instance_pairs, surfels
from evaluation.suites.segmentation import distances
from evaluation.suites.segmentation.keys import ERROR, FIELD, SCORE
from evaluation.suites.segmentation.surfaces import Box, surfel_surfaces

PENALTY_HD95 = 374
REGIONS = (("wt", (1, 2, 3)), ("tc", (1, 3)), ("et", (3,)))
# get_LesionWiseResults' columns, in its order, with their kinds
COLUMNS = (
    ("Num_TP", FIELD),
    ("Num_FP", FIELD),
    ("Num_FN", FIELD),
    ("Sensitivity", SCORE),
    ("Specificity", SCORE),
    ("Legacy_Dice", SCORE),
    ("Legacy_HD95", ERROR),
    ("GT_Complete_Volume", FIELD),
    ("LesionWise_Score_Dice", SCORE),
    ("LesionWise_Score_HD95", ERROR),
)
# get_LesionWiseResults: challenge -> (dilation_factor, lesion_volume_thresh in mm^3)
CHALLENGES = {"gli": (3, 50), "ssa": (3, 50), "men": (1, 50), "ped": (3, 50), "met": (1, 2)}


def evaluate_case(truth: np.ndarray, pred: np.ndarray, spacing, challenge: str, corrections=(), scan=None) -> dict:
    """{region: {column: value}} of one case; ``spacing`` in the arrays' (z, y, x) order."""
    if truth.ndim != 3:
        raise SubmissionError("the BraTS 2023 lesion-wise metrics are defined on 3-D images")
    dilation, threshold = CHALLENGES[challenge]
    table, low, high = scan(truth, pred, (1, 2, 3))
    return {
        name: _region(truth, pred, spacing, labels, table, low, high, dilation, threshold, corrections)
        for name, labels in REGIONS
    }


def _region(truth, pred, spacing, labels, table, low, high, dilation, threshold, corrections) -> dict:
    members = np.array(labels, np.int64)  # slots 1, 2, 3 are labels 1, 2, 3
    tp = int(table[np.ix_(members, members)].sum())
    n_ref, n_pred = int(table[members, :].sum()), int(table[:, members].sum())
    tn = int(table.sum()) - n_ref - n_pred + tp
    sx, sy, sz = (float(np.float32(s)) for s in spacing[::-1])
    present = [m for m in members if high[m].any()]
    out = {
        "Sensitivity": 1.0 if n_ref == 0 and n_pred == 0 else 1.0 * tp / (n_ref + sys.float_info.min),
        "Specificity": 1.0 * tn / (tn + (n_pred - tp) + sys.float_info.min),
        "Legacy_Dice": 1.0 if n_ref + n_pred == 0 else 2.0 * tp / (n_pred + n_ref),
        "Legacy_HD95": 0.0,
        "GT_Complete_Volume": float(n_ref) * sx * sy * sz,
    }
    lesions, false_positives = [], []
    if present:
        window = tuple(
            slice(max(int(low[present, a].min()) - dilation, 0), min(int(high[present, a].max()) + dilation, truth.shape[a]))
            for a in range(3)
        )
        lookup = np.zeros(max(labels) + 1, bool)
        lookup[list(labels)] = True
        ref = _member(truth[window], lookup)
        prd = _member(pred[window], lookup)
        out["Legacy_HD95"] = _hd95(ref, prd, spacing)
        lesions, false_positives = _lesions(ref, prd, spacing, dilation, (sx, sy, sz))
    return {**out, **_scores(lesions, false_positives, threshold, corrections)}


def _member(labels: np.ndarray, lookup: np.ndarray) -> np.ndarray:
    inside = labels < lookup.size
    return np.where(inside, lookup[np.where(inside, labels, 0)], False)


def _hd95(ref: np.ndarray, pred: np.ndarray, spacing) -> float:
    """``compute_robust_hausdorff(compute_surface_distances(gt, pred, spacing), 95)``: infinite
    when one mask is empty."""
    box = Box.of(ref, pred, spacing)
    return distances.deepmind(surfel_surfaces(box, surfels.area_table(box.spacing)), (95.0,), (), box.spacing)["hd95"]


def _lesions(ref: np.ndarray, pred: np.ndarray, spacing, dilation: int, xyz):
    """(rows (lesion volume, matched, Dice, HD95) in the reference's lesion order, sizes of
    the false-positive components)."""
    import cc3d
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(3, 2)
    dilated = ndimage.binary_dilation(ref, structure=structure, iterations=dilation)
    # cc3d numbers the dilated truth in nibabel's (x, y, z) order: label the transposed copy
    lesion_of = cc3d.connected_components(np.ascontiguousarray(dilated.transpose(2, 1, 0)), connectivity=26)
    lesion_of = np.ascontiguousarray(lesion_of.transpose(2, 1, 0))
    components = cc3d.connected_components(pred.view(np.uint8), connectivity=26)
    truth_lesions = np.where(ref, lesion_of, 0)
    # which predicted components touch each dilated lesion, and how much of each lesion they cover
    d_ids, _, p_ids, p_sizes, d_pair, p_pair, _ = instance_pairs.overlaps(lesion_of, components)
    l_ids, l_sizes, _, _, l_pair, lp_pair, l_inter = instance_pairs.overlaps(truth_lesions, components)
    size_of = dict(zip(p_ids.tolist(), p_sizes.tolist()))
    touching: dict[int, list[int]] = {}
    for d, p in zip(d_ids[d_pair].tolist(), p_ids[p_pair].tolist()):
        touching.setdefault(d, []).append(p)
    covered: dict[int, int] = {}
    for lesion, n in zip(l_ids[l_pair].tolist(), l_inter.tolist()):
        covered[lesion] = covered.get(lesion, 0) + n
    lesion_boxes = ndimage.find_objects(truth_lesions)
    component_boxes = ndimage.find_objects(components)
    rows = []
    for lesion, size in zip(l_ids.tolist(), l_sizes.tolist()):
        matches = sorted(touching.get(lesion, []))
        predicted = sum(size_of[p] for p in matches)
        dice = 2.0 * covered.get(lesion, 0) / (predicted + size)
        hd95 = _lesion_hd95(truth_lesions, components, lesion, matches, lesion_boxes, component_boxes, spacing)
        volume = float(np.float64(size) * np.float32(xyz[0]) * np.float32(xyz[1]) * np.float32(xyz[2]))
        rows.append((volume, bool(matches), dice, hd95))
    matched = {p for ps in touching.values() for p in ps}
    false_positives = [
        float(np.float64(size_of[p]) * np.float32(xyz[0]) * np.float32(xyz[1]) * np.float32(xyz[2]))
        for p in p_ids.tolist()
        if p not in matched
    ]
    return rows, false_positives


def _lesion_hd95(lesions, components, lesion, matches, lesion_boxes, component_boxes, spacing) -> float:
    boxes = [lesion_boxes[lesion - 1]] + [component_boxes[p - 1] for p in matches]
    window = tuple(slice(min(b[a].start for b in boxes), max(b[a].stop for b in boxes)) for a in range(3))
    ref = lesions[window] == lesion
    pred = np.isin(components[window], matches) if matches else np.zeros(ref.shape, bool)
    return _hd95(ref, pred, spacing)


def _scores(lesions: list, false_positives: list, threshold: float, corrections) -> dict:
    """``get_LesionWiseResults``: counts without the small lesions, the lesion-wise means over
    the large lesions and the false positives."""
    if "brats2023_fp_min_volume" in corrections:
        false_positives = [v for v in false_positives if v > threshold]
    kept = [(dice, PENALTY_HD95 if math.isinf(hd95) else hd95) for volume, _, dice, hd95 in lesions if volume > threshold]
    n_fp = len(false_positives)
    small_matched = sum(1 for volume, matched, _, _ in lesions if volume <= threshold and matched)
    small_missed = sum(1 for volume, matched, _, _ in lesions if volume <= threshold and not matched)
    count = len(kept) + n_fp
    with np.errstate(invalid="ignore", divide="ignore"):
        dice = np.sum(np.array([d for d, _ in kept], np.float64)) / count if count else math.nan
        hd95 = (np.sum(np.array([h for _, h in kept], np.float64)) + n_fp * PENALTY_HD95) / count if count else math.nan
    return {
        "Num_TP": float(sum(1 for _, matched, _, _ in lesions if matched) - small_matched),
        "Num_FP": float(n_fp),
        "Num_FN": float(sum(1 for _, matched, _, _ in lesions if not matched) - small_missed),
        "LesionWise_Score_Dice": 1.0 if math.isnan(dice) else float(dice),
        "LesionWise_Score_HD95": 0.0 if math.isnan(hd95) else float(hd95),
    }


def row(result: dict) -> dict:
    """One region's values in the reference's column order, infinities as 374
    (``results_df.replace(np.inf, 374)``)."""
    return {c: (float(PENALTY_HD95) if math.isinf(result[c]) else result[c]) for c, _ in COLUMNS}
