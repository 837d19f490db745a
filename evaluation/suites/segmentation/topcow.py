"""TopCoW 2024's multiclass Circle-of-Willis evaluation of one case (task 1), as
CoWBenchmark/TopCoW_Eval_Metrics@25ca839 (``topcow24_eval`` 0.0.2) computes it in
``score_case_task_1_seg.py: score_case_task_1_seg``: the per-case row of its metrics.json, with
its column names and value types.

Both label maps arrive as the reference has them after its ``CastImageFilter`` to uint8
(``topcow_inputs``), in numpy's (z, y, x) order, with the truth's spacing in ITK's (x, y, z)
order (``pred.CopyInformation(gt)``: the prediction's header plays no part).

What the reference does, and where (files under ``topcow24_eval/``):

* the labels evaluated are those present in either map, ascending
  (``utils/utils_mask.py: extract_labels``); a label absent from both has no value at all;
  ``metrics/seg_metrics/generate_cls_avg_dict.py`` names them (``constants.py:
  MUL_CLASS_LABEL_MAP``) and averages each metric over them in ascending order (float64,
  summed one by one, then divided); with no label at all every average and merged value is 0;
* Dice: 0 where a map lacks the label, else the overlap filter's, which derives it from the
  Jaccard index J as 2J / (1 + J) (``cls_avg_dice.py: dice_coefficient_single_label``; not
  always the last bit of 2|A∩B| / (|A| + |B|));
* Betti-0 error: |b0(prediction) - b0(truth)|, 26-connected components
  (``cls_avg_b0.py: betti_number_error_single_label``);
* HD and HD95 in mm (``cls_avg_hd95.py: hd95_single_label``): 90 where a map lacks the label
  (``HD95_UPPER_BOUND``); else both images padded by a voxel, each mask's 26-connected contour,
  ITK's float32 Maurer distance map of the other contour (``metrics.itk_distance``), the
  contour's distances as a list that stays float32 unless a zero distance is appended as a
  Python 0 (which makes it float64), and numpy 1.x's linear percentile of each direction, the
  larger one (95 and 100);
* clDice of the merged masks (``clDice.py: clDice``): Lee skeletons of the arrays transposed to
  (x, y, z) (the thinning is directional), tprec and tsens 0 for an empty skeleton, clDice 0
  when both are;
* detection of the group-2 labels 8, 9, 10, 15 (``detection_grp2_labels.py``): TP when the
  truth has the label and the IoU reaches 0.25, FN below it or when the prediction lacks it;
  FP when only the prediction has it, else TN;
* the anterior and posterior edge lists of each map (``graph_classification/*.py``): A1 and P1
  where the ACA touches the ICA and the PCA the BA (26-neighbours, ``edge_criteria.py``),
  Acom, 3rd-A2 and Pcoms wherever the label is present;
* topology matching (``topology_matching/topology_matching.py``, ``check_LR_flip.py``): per
  region the graph and, per region label, b0 and the sorted labels touching it (and, for the
  prediction, its detection), the prediction's left-right flip from the median voxel index
  along the image's first axis; the verdict is True when every label is TP or TN, has the
  truth's neighbours and b0, and the region is not flipped.

The whole case is cut to the bounding box of every labelled voxel of both maps first; the
per-label statistics, the label adjacencies and the component counts take one pass each for
all labels; each label's distances are computed inside its own box (``metrics.itk_distance``
gets the box's position back, so the float32 values are the whole image's).
"""

import math

import numpy as np

from evaluation.metrics import betti, itk_distance, jit, lee_thinning, skeleton
from evaluation.metrics.jit import numba

# constants.py: MUL_CLASS_LABEL_MAP (13 and 14 are not CoW labels there)
LABELS = {
    1: "BA",
    2: "R-PCA",
    3: "L-PCA",
    4: "R-ICA",
    5: "R-MCA",
    6: "L-ICA",
    7: "L-MCA",
    8: "R-Pcom",
    9: "L-Pcom",
    10: "Acom",
    11: "R-ACA",
    12: "L-ACA",
    15: "3rd-A2",
}
MERGED = "MergedBin"
# The suite's classes: each label by its name, lowercase as the suite's class names are, and
# the merged masks (the reference's MergedBin: every label, a region of the suite)
MERGED_CLASS = "merged"
CLASSES = tuple((name.lower(), (label,)) for label, name in LABELS.items()) + ((MERGED_CLASS, tuple(LABELS)),)
# The keys of each class, as the metric table names them, with the table's row of each
KEYS = (("dice", "dice"), ("cldice", "cldice"), ("betti0_error", "betti0_error"), ("hd", "hd"), ("hd95", "hd_percentile"))
REFERENCE = "CoWBenchmark/TopCoW_Eval_Metrics@25ca8399e056e71e3ff6743ac4a47ce28624cb3d (topcow24_eval 0.0.2), task 1"
HD_PENALTY = 90  # constants.py: HD95_UPPER_BOUND, an integer, in mm whatever the image
IOU_THRESHOLD = 0.25  # constants.py: IOU_THRESHOLD
GROUP2 = (8, 9, 10, 15)  # detection_grp2_labels.py
REGIONS = {"anterior": (10, 11, 12, 15), "posterior": (2, 3, 8, 9)}  # topology_matching.py
# (metric prefix, class-average name) as generate_cls_avg_dict.py's keys
AVERAGES = {"Dice": "ClsAvgDice", "B0err": "ClsAvgB0err", "HD": "ClsAvgHD", "HD95": "ClsAvgHD95"}


# --------------------------------------------------------------------------------------------
# Compiled passes


@numba.njit(cache=True, nogil=True)
def _label_stats(a, counts, low, high, columns):  # pragma: no cover - compiled
    """Per label: voxels, bounding box (``high`` exclusive) and how many voxels lie in each x
    index (for the medians of the left-right test); the background is not counted."""
    nz, ny, nx = a.shape
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                v = a[z, y, x]
                if v == 0:
                    continue
                counts[v] += 1
                columns[v, x] += 1
                low[v, 0] = min(low[v, 0], z)
                low[v, 1] = min(low[v, 1], y)
                low[v, 2] = min(low[v, 2], x)
                high[v, 0] = max(high[v, 0], z + 1)
                high[v, 1] = max(high[v, 1], y + 1)
                high[v, 2] = max(high[v, 2], x + 1)


@numba.njit(cache=True, nogil=True)
def _adjacency(a):  # pragma: no cover - compiled
    """``touch[u, v]``: a voxel of label u has a 26-neighbour of label v (u != v, both
    non-zero); outside the array is background. The 13 forward offsets see every pair once."""
    nz, ny, nx = a.shape
    touch = np.zeros((256, 256), np.bool_)
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                u = a[z, y, x]
                if u == 0:
                    continue
                for dz in range(2):
                    for dy in range(-1, 2):
                        for dx in range(-1, 2):
                            if dz == 0 and (dy < 0 or (dy == 0 and dx <= 0)):
                                continue
                            zz, yy, xx = z + dz, y + dy, x + dx
                            if zz >= nz or yy < 0 or yy >= ny or xx < 0 or xx >= nx:
                                continue
                            v = a[zz, yy, xx]
                            if v != 0 and v != u:
                                touch[u, v] = True
                                touch[v, u] = True
    return touch


@numba.njit(cache=True, nogil=True)
def _agreement(truth, pred):  # pragma: no cover - compiled
    """Voxels where both maps hold the same label, per label; voxels where both are labelled."""
    same = np.zeros(256, np.int64)
    both = 0
    t, p = truth.ravel(), pred.ravel()
    for i in range(t.size):
        if t[i] == p[i]:
            same[t[i]] += 1
        if t[i] != 0 and p[i] != 0:
            both += 1
    return same, both


def warm_up() -> None:
    """Compiles every kernel a case runs (``jit.warm_up`` says so the first time)."""

    def compile_all():
        truth = np.zeros((5, 6, 7), np.uint8)
        truth[1:4, 1:4, 1:3], truth[1:4, 1:4, 3:5] = 1, 3
        evaluate(truth, np.roll(truth, 1, axis=2), (1.0, 1.0, 1.0), betti1=True)

    lee_thinning.warm_up()
    betti.warm_up()
    itk_distance.warm_up()
    jit.warm_up("TopCoW", compile_all, [__file__], equivalents=False)


# --------------------------------------------------------------------------------------------
# One label map


class _Map:
    """What the case's metrics read of one label map (the case's box of it)."""

    def __init__(self, labels: np.ndarray, counts, low, high, columns):
        self.array = labels
        self.counts, self.low, self.high, self.columns = counts, low, high, columns
        self.present = [int(v) for v in np.flatnonzero(counts[1:]) + 1]
        self.has = set(self.present)
        self.touch = _adjacency(labels)
        self.b0 = _components_per_label(labels)

    def neighbours(self, label: int) -> list[int]:
        """``utils_neighborhood.py: get_label_neighbors``: every other label touching it."""
        return [int(v) for v in np.flatnonzero(self.touch[label])] if label in self.has else []

    def edges(self) -> dict[str, list[int]]:
        """``graph_classification``'s edge lists: anterior [L-A1, Acom, 3rd-A2, R-A1],
        posterior [L-Pcom, L-P1, R-P1, R-Pcom] (``edge_criteria.py: has_A1, has_P1``)."""

        def touching(u, v):
            return int(u in self.has and bool(self.touch[u, v]))

        return {
            "anterior": [touching(12, 6), int(10 in self.has), int(15 in self.has), touching(11, 4)],
            "posterior": [int(9 in self.has), touching(3, 1), touching(2, 1), int(8 in self.has)],
        }

    def twice_median_x(self, label: int) -> int:
        """Twice the median x index of the label's voxels (``np.median``: the mean of the two
        middle values of an even count), exactly, from the label's column counts."""
        cumulative = np.cumsum(self.columns[label])
        n = int(self.counts[label])
        if n % 2:
            return 2 * int(np.searchsorted(cumulative, n // 2 + 1))
        return int(np.searchsorted(cumulative, n // 2)) + int(np.searchsorted(cumulative, n // 2 + 1))


def _components_per_label(labels: np.ndarray) -> np.ndarray:
    """b0 of every label at once: cc3d's multi-label 26-connected components, each component's
    label counted."""
    import cc3d

    found = np.zeros(256, np.int64)
    if not labels.any():
        return found
    components, n = cc3d.connected_components(labels, connectivity=26, return_N=True)
    label_of = np.zeros(n + 1, np.uint8)
    label_of[components.ravel()] = labels.ravel()
    return found + np.bincount(label_of[1:], minlength=256)


def _stats(labels: np.ndarray):
    counts = np.zeros(256, np.int64)
    low = np.full((256, 3), np.iinfo(np.int64).max, np.int64)
    high = np.zeros((256, 3), np.int64)
    columns = np.zeros((256, labels.shape[2]), np.int64)
    _label_stats(labels, counts, low, high, columns)
    return counts, low, high, columns


# --------------------------------------------------------------------------------------------
# Arithmetic of the reference's numpy 1.x


def percentile(ordered: np.ndarray, q: float, float32_step: bool = False) -> float:
    """numpy 1.25's ``np.percentile(values, 100 q)`` ("linear") of sorted values: the virtual
    index (n - 1) q, the lower value plus the step times the fraction, or the upper value minus
    the step times its complement when the fraction is at least 1/2. numpy 1.x takes the
    step of a float32 array in float32 and promotes only afterwards (``float32_step``); numpy 2
    would return a float32 and change the 7th digit, so the arithmetic is written out here."""
    n = ordered.size
    index = (n - 1) * q
    if index >= n - 1:
        return float(ordered[n - 1])
    below = math.floor(index)
    fraction = index - below
    a, b = float(ordered[below]), float(ordered[below + 1])
    step = float(np.float32(b) - np.float32(a)) if float32_step else b - a
    return b - step * (1 - fraction) if fraction >= 0.5 else a + step * fraction


def _directed(distances: np.ndarray) -> tuple[float, float]:
    """(95th percentile, maximum) of one direction's contour distances as ``_get_surface_
    distance`` lists them: float32 unless a zero was appended as a Python 0."""
    zeros = distances.size - np.count_nonzero(distances)
    ordered = np.sort(distances.astype(np.float64))
    return percentile(ordered, 95 / 100, float32_step=zeros == 0), float(ordered[-1])


def average(values: list) -> float:
    """``generate_cls_avg_dict``'s class average: a float64 sum in label order, divided."""
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


# --------------------------------------------------------------------------------------------
# The case


def evaluate(truth: np.ndarray, pred: np.ndarray, spacing_xyz, corrections=(), direction=None, betti1=False) -> dict:
    """The case's row of the reference's metrics.json (its ``case`` columns but the file
    names). ``truth``, ``pred``: 3-D uint8 label maps of labels in ``LABELS``; ``spacing_xyz``:
    the truth's spacing in ITK order; ``direction``: the truth's ITK direction (row-major),
    read by the correction ``topcow_lr_physical`` only; ``betti1``: the 2023 release's Betti-1
    error of the merged masks too (``B1err_MergedBin``)."""
    whole = (truth.shape, tuple(float(s) for s in spacing_xyz))
    truth, pred = np.ascontiguousarray(truth, np.uint8), np.ascontiguousarray(pred, np.uint8)
    truth_stats, pred_stats = _stats(truth), _stats(pred)
    labelled = [v for v in range(1, 256) if truth_stats[0][v] or pred_stats[0][v]]
    origin = np.zeros(3, np.int64)
    if labelled:  # everything outside the box of every labelled voxel is background in both
        origin = np.minimum(truth_stats[1][labelled].min(axis=0), pred_stats[1][labelled].min(axis=0))
        stop = np.maximum(truth_stats[2][labelled].max(axis=0), pred_stats[2][labelled].max(axis=0))
        window = tuple(slice(int(a), int(b)) for a, b in zip(origin, stop))
        truth, pred = np.ascontiguousarray(truth[window]), np.ascontiguousarray(pred[window])
    g = _Map(truth, truth_stats[0], truth_stats[1] - origin, truth_stats[2] - origin, truth_stats[3])
    p = _Map(pred, pred_stats[0], pred_stats[1] - origin, pred_stats[2] - origin, pred_stats[3])
    same, both = _agreement(truth, pred)
    row = _class_values(g, p, same, both, labelled, origin, whole, corrections)
    row["clDice"] = cldice(truth > 0, pred > 0) if labelled else 0
    if betti1:
        row["B1err_MergedBin"] = abs(betti.betti_numbers(pred > 0)[1] - betti.betti_numbers(truth > 0)[1])
    row["all_detection_dicts"] = {
        str(label): {"label": LABELS[label], "Detection": _detection(g, p, same, label)} for label in GROUP2
    }
    graphs = {"gt": g.edges(), "pred": p.edges()}
    row["all_graph_dicts"] = {
        region: {"gt_graph": graphs["gt"][region], "pred_graph": graphs["pred"][region]} for region in REGIONS
    }
    row["all_topo_dicts"] = _topology(g, p, same, graphs, origin, whole, direction, corrections)
    if not labelled and "topcow_empty_case" in corrections:
        for prefix, name in AVERAGES.items():
            row[f"{prefix}_{name}"] = row[f"{prefix}_{MERGED}"] = math.nan
        row["clDice"] = math.nan
        if betti1:
            row["B1err_MergedBin"] = math.nan
    return row


def _class_values(g: _Map, p: _Map, same, both: int, labelled: list[int], origin, whole, corrections) -> dict:
    """Dice, B0err, HD and HD95 per label, their class averages and the merged masks'."""
    penalty = _diagonal(whole) if "topcow_hd_diagonal" in corrections else HD_PENALTY
    values = {prefix: {} for prefix in AVERAGES}
    for label in labelled:
        if label in g.has and label in p.has:
            union = int(g.counts[label] + p.counts[label] - same[label])
            values["Dice"][label] = _dice(int(same[label]) / union)
            box = _union_box(g, p, [label], [label])
            values["HD95"][label], values["HD"][label] = _hausdorff(g.array, p.array, label, box, origin, whole[1])
        else:
            values["Dice"][label] = 0
            values["HD95"][label] = values["HD"][label] = penalty
        values["B0err"][label] = abs(int(p.b0[label]) - int(g.b0[label]))
    row = {}
    for prefix, name in AVERAGES.items():
        row.update({f"{prefix}_{LABELS[label]}": values[prefix][label] for label in labelled})
        row[f"{prefix}_{name}"] = average([values[prefix][label] for label in labelled]) if labelled else 0
    if not labelled:  # generate_cls_avg_dict: no label at all, every merged value 0
        row.update({f"{prefix}_{MERGED}": 0 for prefix in AVERAGES})
        return row
    n_truth, n_pred = int(g.counts.sum()), int(p.counts.sum())
    if n_truth and n_pred:
        row[f"Dice_{MERGED}"] = _dice(both / (n_truth + n_pred - both))
        box = _union_box(g, p, g.present, p.present)
        row[f"HD95_{MERGED}"], row[f"HD_{MERGED}"] = _hausdorff(g.array, p.array, None, box, origin, whole[1])
    else:
        row[f"Dice_{MERGED}"] = 0
        row[f"HD95_{MERGED}"] = row[f"HD_{MERGED}"] = penalty
    row[f"B0err_{MERGED}"] = abs(betti.components(p.array > 0) - betti.components(g.array > 0))
    return row


def _dice(jaccard: float) -> float:
    """``LabelOverlapMeasuresImageFilter.GetDiceCoefficient``: from the Jaccard index."""
    return 2.0 * jaccard / (1.0 + jaccard)


def _diagonal(whole) -> float:
    """The image's diagonal in mm: no two voxels are farther apart (``topcow_hd_diagonal``)."""
    shape, spacing_xyz = whole
    return math.sqrt(sum((n * s) ** 2 for n, s in zip(shape[::-1], spacing_xyz)))


def _union_box(g: _Map, p: _Map, truth_labels, pred_labels) -> tuple[np.ndarray, np.ndarray]:
    low = np.minimum(g.low[truth_labels].min(axis=0), p.low[pred_labels].min(axis=0))
    high = np.maximum(g.high[truth_labels].max(axis=0), p.high[pred_labels].max(axis=0))
    return low, high


def _hausdorff(truth, pred, label, box, origin, spacing_xyz) -> tuple[float, float]:
    """(HD95, HD) of the label's masks (the merged masks for None), both non-empty, inside
    ``box``: the box grown by one background voxel stands for the reference's padding, and
    its first voxel is at index ``origin + low`` of the padded image."""
    low, high = box
    window = tuple(slice(int(a), int(b)) for a, b in zip(low, high))
    shape = tuple(int(b - a) + 2 for a, b in zip(low, high))
    masks = []
    for labels in (truth, pred):
        mask = np.zeros(shape, np.bool_)
        mask[1:-1, 1:-1, 1:-1] = labels[window] > 0 if label is None else labels[window] == label
        masks.append(itk_distance.contour(mask))
    start = origin + low  # the padded index of the grown box's first voxel
    to_pred = itk_distance.distance_map(masks[1], spacing_xyz, start)[masks[0]]
    to_truth = itk_distance.distance_map(masks[0], spacing_xyz, start)[masks[1]]
    (a95, a100), (b95, b100) = _directed(to_pred), _directed(to_truth)
    return (b95 if b95 > a95 else a95), (b100 if b100 > a100 else a100)


def cldice(truth: np.ndarray, pred: np.ndarray):
    """clDice of two masks in (z, y, x) order, skeletonised in the reference's (x, y, z) order."""
    found = []
    for skeletonised, other in ((pred, truth), (truth, pred)):
        xyz = np.ascontiguousarray(skeletonised.transpose(2, 1, 0))
        voxels = skeleton.skeleton_voxels(np.flatnonzero(xyz), xyz.shape)
        inside = int(np.count_nonzero(other.transpose(2, 1, 0).ravel()[voxels])) if voxels.size else 0
        found.append(0 if voxels.size == 0 else float(np.float64(inside) / np.float64(voxels.size)))
    precision, sensitivity = found
    if precision + sensitivity == 0:
        return 0
    return 2 * precision * sensitivity / (precision + sensitivity)


def _detection(g: _Map, p: _Map, same, label: int) -> str:
    if label in g.has:
        if label not in p.has:
            return "FN"
        union = int(g.counts[label] + p.counts[label] - same[label])
        return "TP" if int(same[label]) / union >= IOU_THRESHOLD else "FN"
    return "FP" if label in p.has else "TN"


def _topology(g: _Map, p: _Map, same, graphs, origin, whole, direction, corrections) -> dict:
    truth, found, verdict = {}, {}, {}
    for region, labels in REGIONS.items():
        truth[region] = {"graph": graphs["gt"][region]}
        found[region] = {"graph": graphs["pred"][region]}
        for label in labels:
            truth[region][LABELS[label]] = {"b0": int(g.b0[label]), "neighbors": g.neighbours(label)}
            found[region][LABELS[label]] = {
                "detection": _detection(g, p, same, label),
                "b0": int(p.b0[label]),
                "neighbors": p.neighbours(label),
            }
        if "topcow_lr_physical" in corrections:
            flipped = _flipped_physically(p, region, origin, whole[1], direction)
        else:
            flipped = _flipped(p, region)
        found[region]["LR_flipped"] = flipped
        verdict[region] = not flipped and all(
            found[region][LABELS[label]]["detection"] in ("TP", "TN")
            and found[region][LABELS[label]]["neighbors"] == truth[region][LABELS[label]]["neighbors"]
            and found[region][LABELS[label]]["b0"] == truth[region][LABELS[label]]["b0"]
            for label in labels
        )
    return {"gt_topology": truth, "pred_topology": found, "match_verdict": verdict}


def _sides(p: _Map, region: str) -> tuple[int, int] | None:
    """``check_LR_flip.py``: (left, right) labels deciding a region's flip: the ICAs, else the
    ACAs (anterior), the PCAs (posterior); None when the prediction lacks one of them."""
    pairs = ((6, 4), (12, 11)) if region == "anterior" else ((3, 2),)
    return next(((left, right) for left, right in pairs if left in p.has and right in p.has), None)


def _flipped(p: _Map, region: str) -> bool:
    """The left label's median x index below the right one's (x: the image's first axis; the
    direction is not read, the images are taken as stored left-to-right in index order)."""
    sides = _sides(p, region)
    return sides is not None and p.twice_median_x(sides[0]) < p.twice_median_x(sides[1])


def _flipped_physically(p: _Map, region: str, origin, spacing_xyz, direction) -> bool:
    """``topcow_lr_physical``: the same test on each voxel's physical x (LPS: towards the
    patient's left) from the truth's direction and spacing, whatever order the image is
    stored in."""
    sides = _sides(p, region)
    if sides is None:
        return False
    matrix = np.eye(3) if direction is None else np.asarray(direction, np.float64).reshape(3, 3)
    row = matrix[0] * np.asarray(spacing_xyz, np.float64)  # physical x per index step along x, y, z

    def median_x(label):
        window = tuple(slice(int(a), int(b)) for a, b in zip(p.low[label], p.high[label]))
        z, y, x = np.nonzero(p.array[window] == label)
        index = (x + p.low[label][2] + origin[2], y + p.low[label][1] + origin[1], z + p.low[label][0] + origin[0])
        return float(np.median(row[0] * index[0] + row[1] * index[1] + row[2] * index[2]))

    return median_x(sides[0]) < median_x(sides[1])
