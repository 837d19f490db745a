"""autoPET's per-case metrics, as each edition's evaluation script computes them: the Dice of
the raw values, the false-positive and false-negative lesion volumes in millilitres (``fpv_ml``,
``fnv_ml``), and, for autoPET IV's interactive task, the same at every click step with the area
under each curve and its last value.

The references (read, not copied; functions named where each rule lives):

* autoPET IV (2025), lab-midas/autoPETCTIV@80af68d9, ``evaluation_metrics/evaluation_metrics.py``:
  ``nii2numpy``, ``false_pos_pix``, ``false_neg_pix``, ``dice_score``, ``compute_metrics``,
  ``compute_interactive_metrics``, ``get_metrics``;
* autoPET III (2024), ClinicalDataScience/autoPETIII@9b3dd510,
  ``evaluation-metrics/evaluation_metrics.py``: ``count_false_positives``,
  ``count_false_negatives``, ``calc_dice_score``, ``compute_metrics``;
* autoPET I and II (2022, 2023), lab-midas/autoPET@468179b7, ``val_script.py``: ``con_comp``,
  ``false_pos_pix``, ``false_neg_pix``, ``dice_score``, ``compute_metrics``.

What they share: a lesion is an 18-connected component (faces and edges, not corners) of a run
of equal values, as cc3d labels any array; a predicted component touching no truth voxel is a
false positive, a truth component touched by no predicted voxel a false negative, each counting
all its voxels; a volume is that count times the voxel volume, the product of the header's three
``pixdim`` in float32, divided by 1000; the Dice is 2 sum(truth * prediction) / (sum(truth) +
sum(prediction)) over the values as read, in float64: no threshold, a value 2 counts double.
Where they differ (``Rules``):

* III and IV label the values truncated to integers (``astype(int)``: a 0.6 never forms a
  component), I–II the raw values (every distinct value its own components);
* III and IV give a lesion-free truth a NaN Dice and false-negative volume and an empty
  prediction a false-positive volume of 0 without labelling; I–II have no such guards (Dice 0,
  or 0/0 = NaN when both are empty; false-negative volume 0);
* IV and I–II read the voxel volume from the prediction's header (``compute_metrics`` reads
  both files into the same variable, the prediction last), III from the truth's;
* III multiplies a Python float count by the voxel volume (a float32 product under numpy 2),
  IV and I–II a numpy integer (a float64 product).

The float rounding of the voxel volume depends on the numpy the script runs with: numpy 2
divides the float32 product by 1000 in float32, numpy 1 in float64 (``numpy``: 2 or 1).

Computed without a pass per component: each side is labelled once inside the bounding box of
its non-zero values (cc3d), the components' sizes and whether the other side touches them are
two ``np.bincount`` over the box; integer inputs take one compiled pass for the Dice's sums and
both boxes. The truth of an interactive case is labelled once for all its steps.
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba
from evaluation.metrics.nearest import as_3d

NAN = float("nan")
STEPS = 11  # the interactive task's click steps: 0 (no click) to 10 click pairs


@dataclass(frozen=True)
class Rules:
    """An edition's per-case rules. ``truncate``: components of the values truncated to
    integers (III, IV), else of the raw values; ``guards``: an empty prediction's false-positive
    count is 0 and a lesion-free truth's Dice and false-negative count NaN (III, IV);
    ``volume_from``: whose header gives the voxel volume (``prediction`` or ``truth``);
    ``float_count``: the count is a Python float when multiplied (III)."""

    edition: str
    truncate: bool
    guards: bool
    volume_from: str
    float_count: bool


# the editions' per-case rules (the presets' ``rules``)
EDITIONS = {
    "autopet4": Rules("autopet4", truncate=True, guards=True, volume_from="prediction", float_count=False),
    "autopet3": Rules("autopet3", truncate=True, guards=True, volume_from="truth", float_count=True),
    "autopet1-2": Rules("autopet1-2", truncate=False, guards=False, volume_from="prediction", float_count=False),
}


REFERENCES = {
    "autopet4": "lab-midas/autoPETCTIV@80af68d9a190bccc27ce0b93d64934d7b42aaa00, evaluation_metrics/evaluation_metrics.py: "
    "compute_metrics, get_metrics",
    "autopet3": "ClinicalDataScience/autoPETIII@9b3dd5107366843f87bb7e8e298ae2b92b8f4908, "
    "evaluation-metrics/evaluation_metrics.py: compute_metrics",
    "autopet1-2": "lab-midas/autoPET@468179b78ccbefde251bee0a152d9194fc64d5d3, val_script.py: compute_metrics",
}
# the source of a listed phase's fpv_ml and fnv_ml (``lesion_volumes``)
LISTED_REFERENCE = (
    "lab-midas/autoPETCTIV@80af68d9a190bccc27ce0b93d64934d7b42aaa00, evaluation_metrics/evaluation_metrics.py: "
    "false_pos_pix, false_neg_pix (numpy 2)"
)
# The numpy each edition ran with when the phase says ``autopet_numpy: edition``: autoPET I and
# II predate numpy 2 (June 2024); III and IV pin nothing, so their scripts installed today run
# on numpy 2.
EDITION_NUMPY = {"autopet4": 2, "autopet3": 2, "autopet1-2": 1}

# Which cases each mean leaves out: ``nan`` the undefined values alone (pandas' mean, as the IV
# script's ``get_metrics`` averages its CSV; III and IV make a lesion-free case's Dice and
# false-negative volume NaN); ``autopet1``: lesion-free cases count for the false-positive
# volume only; ``autopet2``: for both volumes (the challenges' pages; the I–II script has no
# aggregation of its own, its lesion-free Dice is 0).
AGGREGATIONS = {"nan": (), "autopet1": ("dice", "fnv_ml"), "autopet2": ("dice",)}

# preset -> (per-case rules, aggregation, interactive)
PRESETS = {
    "autopet4": (EDITIONS["autopet4"], "nan", False),
    "autopet4-interactive": (EDITIONS["autopet4"], "nan", True),
    "autopet3": (EDITIONS["autopet3"], "nan", False),
    "autopet2": (EDITIONS["autopet1-2"], "autopet2", False),
    "autopet1": (EDITIONS["autopet1-2"], "autopet1", False),
}
SCORED = ("dice", "fpv_ml", "fnv_ml")  # the metric table's rows
COUNTED = ("fp_voxels", "fn_voxels", "voxel_volume_ml")
# the reference's CSV columns (get_metrics, get_interactive_metrics) for the suite's keys
COLUMNS = {"dice": "dice_sc", "fpv_ml": "false_pos_vol", "fnv_ml": "false_neg_vol"}
INTERACTIVE_COLUMNS = {
    "dice_auc": "dice_auc",
    "fpv_ml_auc": "fpv_auc",
    "fnv_ml_auc": "fnv_auc",
    "dice_final": "dice_final",
    "fpv_ml_final": "fpv_final",
    "fnv_ml_final": "fnv_final",
}


def voxel_volume_ml(pixdim, numpy: int) -> float:
    """``nii2numpy``: ``pixdim[1] * pixdim[2] * pixdim[3] / 1000`` on the header's float32
    values. The two products are float32 in both numpy generations; numpy 2 keeps the division
    in float32 (NEP 50: the Python 1000 is weak), numpy 1 promotes it to float64."""
    x, y, z = (np.float32(s) for s in pixdim)
    product = np.float32(np.float32(x * y) * z)
    if numpy == 2:
        return float(np.float32(product / np.float32(1000)))
    return float(np.float64(product) / 1000.0)


def volume_ml(count: int | None, voxel_volume: float, rules: Rules, numpy: int) -> float:
    """A voxel count times the voxel volume as the edition multiplies them; None (a count the
    reference returns as NaN) gives NaN. III's ``float(count) * voxel_vol`` is a float32
    product under numpy 2 (the Python float is weak against the float32 volume)."""
    if count is None:
        return NAN
    if rules.float_count and numpy == 2:
        return float(np.float32(np.float32(float(count)) * np.float32(voxel_volume)))
    return float(count) * voxel_volume


# --------------------------------------------------------------------------------------------
# One side's components


@dataclass(frozen=True)
class Side:
    """One array's components inside the bounding box of its labelled (non-zero) values:
    ``labels`` (cc3d's, 0 outside components), ``sizes`` (voxels per label, index 0 the rest
    of the box), ``n`` components; ``box`` None when nothing is labelled."""

    box: tuple[slice, ...] | None
    labels: np.ndarray | None = None
    sizes: np.ndarray | None = None
    n: int = 0


def label_input(values: np.ndarray, rules: Rules) -> np.ndarray:
    """What the edition hands to cc3d: III and IV ``astype(int)`` (truncation toward zero; on
    the non-negative values the grader accepts, an integer type holding them), I–II the values
    as read (cc3d labels runs of equal floats too)."""
    if values.dtype == bool:
        return values.view(np.uint8)
    if values.dtype.kind in "iu" or not rules.truncate:
        return values
    whole = np.trunc(values)
    top = float(whole.max()) if whole.size else 0.0
    kind = next((t for t in (np.uint8, np.uint16, np.uint32) if top <= np.iinfo(t).max), np.uint64)
    return whole.astype(kind)


def components(values: np.ndarray, box: tuple[slice, ...] | None) -> Side:
    """18-connected components (8 in 2-D, where edges are corners) of the equal-value runs of
    ``values`` inside ``box``: cc3d's ``connected_components(..., connectivity=18)`` on the
    whole array numbers the same components."""
    if box is None:
        return Side(None)
    import cc3d

    crop = np.ascontiguousarray(values[box])  # a copy: cc3d refuses read-only buffers
    labels, n = cc3d.connected_components(crop, connectivity=18 if crop.ndim == 3 else 8, return_N=True)
    return Side(box, labels, np.bincount(labels.ravel(), minlength=n + 1), int(n))


def untouched_voxels(side: Side, other: np.ndarray) -> int:
    """The voxels of ``side``'s components over which ``other`` sums to 0: ``(component_mask *
    other).sum() == 0`` of the references, which on non-negative values means no non-zero
    voxel of ``other`` inside the component (one shared voxel is a touch)."""
    if side.n == 0:
        return 0
    touched = np.bincount(side.labels[other[side.box] != 0], minlength=side.n + 1) > 0
    return int(side.sizes[1:][~touched[1:]].sum())


def nonzero_box(values: np.ndarray) -> tuple[slice, ...] | None:
    """The bounding box of the non-zero values, None when there is none."""
    found = []
    for axis in range(values.ndim):
        along = np.flatnonzero(np.any(values, axis=tuple(a for a in range(values.ndim) if a != axis)))
        if along.size == 0:
            return None
        found.append(slice(int(along[0]), int(along[-1]) + 1))
    return tuple(found)


# --------------------------------------------------------------------------------------------
# The Dice's sums and both boxes


@numba.njit(cache=True, nogil=True)
def _integer_pass(truth, pred, low, high):  # pragma: no cover - compiled
    """One pass over two integer arrays: sum(truth), sum(pred), sum(truth * pred) as exact
    integers, and the bounding box of each one's non-zero voxels (``low``/``high`` rows 0:
    truth, 1: prediction; ``high`` exclusive)."""
    depth, rows, columns = truth.shape
    st = np.int64(0)
    sp = np.int64(0)
    stp = np.int64(0)
    for z in range(depth):
        for y in range(rows):
            for x in range(columns):
                t = np.int64(truth[z, y, x])
                p = np.int64(pred[z, y, x])
                if t != 0:
                    st += t
                    stp += t * p
                    low[0, 0] = min(low[0, 0], z)
                    low[0, 1] = min(low[0, 1], y)
                    low[0, 2] = min(low[0, 2], x)
                    high[0, 0] = max(high[0, 0], z + 1)
                    high[0, 1] = max(high[0, 1], y + 1)
                    high[0, 2] = max(high[0, 2], x + 1)
                if p != 0:
                    sp += p
                    low[1, 0] = min(low[1, 0], z)
                    low[1, 1] = min(low[1, 1], y)
                    low[1, 2] = min(low[1, 2], x)
                    high[1, 0] = max(high[1, 0], z + 1)
                    high[1, 1] = max(high[1, 1], y + 1)
                    high[1, 2] = max(high[1, 2], x + 1)
    return st, sp, stp


def _integer_pass_numpy(truth, pred, low, high):
    """``_integer_pass`` in numpy, once the compiled kernels are off (``jit.run``)."""
    for row, values in enumerate((truth, pred)):
        box = nonzero_box(values)
        if box is not None:
            low[row], high[row] = [s.start for s in box], [s.stop for s in box]
    t, p = truth.astype(np.int64), pred.astype(np.int64)
    return int(t.sum()), int(p.sum()), int((t * p).sum())


def _small_integers(values: np.ndarray) -> bool:
    """Integers whose sums over any image fit int64 exactly (and float64, as the references
    sum them): at most 16 bits."""
    return values.dtype == bool or (values.dtype.kind in "iu" and values.dtype.itemsize <= 2)


def integer_sums(truth: np.ndarray, pred: np.ndarray):
    """(sum truth, sum pred, sum truth * pred, truth box, prediction box) of two small-integer
    arrays of one shape, in one compiled pass."""
    arrays = [as_3d(a.view(np.uint8) if a.dtype == bool else a) for a in (truth, pred)]
    low = np.full((2, 3), np.iinfo(np.int64).max, np.int64)
    high = np.zeros((2, 3), np.int64)
    st, sp, stp = jit.run(_integer_pass, _integer_pass_numpy, *arrays, low, high)
    shift = 3 - truth.ndim
    boxes = [tuple(slice(int(low[i, a]), int(high[i, a])) for a in range(shift, 3)) if high[i].any() else None for i in (0, 1)]
    return int(st), int(sp), int(stp), boxes[0], boxes[1]


# --------------------------------------------------------------------------------------------
# One case


@dataclass(frozen=True)
class Truth:
    """A truth prepared once for every prediction scored against it (the interactive steps):
    its values, their sum (float, as the references' float64 sum), its components (None where
    the edition does not label it: a lesion-free truth under the guards) and its box."""

    values: np.ndarray
    total: float
    side: Side | None
    float64: np.ndarray | None  # the values as float64, for the Dice of a float prediction


def prepare_truth(values: np.ndarray, rules: Rules) -> Truth:
    if _small_integers(values):
        total = float(np.count_nonzero(values) if values.dtype == bool else values.sum(dtype=np.int64))
        float64 = None
    else:
        float64 = values.astype(np.float64)
        total = float(float64.sum())
    if rules.guards and total == 0:
        return Truth(values, total, None, float64)
    labelled = label_input(values, rules)
    return Truth(values, total, components(labelled, nonzero_box(labelled)), float64)


def case_metrics(truth: Truth, pred: np.ndarray, voxel_volume: float, rules: Rules, numpy: int) -> dict:
    """Dice, false-positive and false-negative volumes (ml) and voxel counts of one prediction
    against a prepared truth; ``voxel_volume`` is the one the edition takes (``volume_from``).
    The order is ``compute_metrics``': false negatives, false positives, Dice; all three only
    read the arrays."""
    if _small_integers(truth.values) and _small_integers(pred):
        _, sp, stp, _, pred_box = integer_sums(truth.values, pred)
        pred_total, inter = float(sp), float(stp)
    else:
        p64 = pred.astype(np.float64)
        t64 = truth.float64 if truth.float64 is not None else truth.values.astype(np.float64)
        pred_total, inter = float(p64.sum()), float(np.multiply(t64, p64).sum())  # the references' float64 sums
        pred_box = None  # the labelled prediction's own box, below
    # a lesion-free truth under the guards: false_neg_pix returns NaN
    fn = None if truth.side is None else untouched_voxels(truth.side, pred)
    if rules.guards and pred_total == 0:  # false_pos_pix: an empty prediction has no false positive
        fp = 0
    else:
        labelled = label_input(pred, rules)
        box = pred_box if labelled is pred and pred_box is not None else nonzero_box(labelled)
        fp = untouched_voxels(components(labelled, box), truth.values)
    union = truth.total + pred_total
    # dice_score: NaN for a lesion-free truth under the guards; I–II: 0 / 0 when both are empty
    dice = NAN if (rules.guards and truth.total == 0) or union == 0 else (2.0 * inter) / union
    return {
        "dice": dice,
        "fpv_ml": volume_ml(fp, voxel_volume, rules, numpy),
        "fnv_ml": volume_ml(fn, voxel_volume, rules, numpy),
        "fp_voxels": fp,
        "fn_voxels": fn,
        "voxel_volume_ml": voxel_volume,
    }


# --------------------------------------------------------------------------------------------
# The interactive task


def auc(values) -> float:
    """``scipy.integrate.cumulative_trapezoid(values, np.arange(n))[-1]``: the trapezoids of unit
    width, (y[i] + y[i + 1]) / 2 in float64, summed left to right; NaN anywhere gives NaN. Over
    the 11 steps x runs from 0 to 10, so a Dice of 1 throughout has an area of 10."""
    y = np.asarray(values, np.float64)
    return float(np.cumsum((y[1:] + y[:-1]) / 2.0)[-1])


def interactive_summary(steps: list[dict]) -> dict:
    """``compute_interactive_metrics``' six values from the per-step ones: the area under the
    Dice, false-positive and false-negative volume curves and the last step's values."""
    found = {}
    for key in ("dice", "fpv_ml", "fnv_ml"):
        found[f"{key}_auc"] = auc([s[key] for s in steps])
    for key in ("dice", "fpv_ml", "fnv_ml"):
        found[f"{key}_final"] = steps[-1][key]
    return found


# --------------------------------------------------------------------------------------------
# The metric table's function (a listed phase's metrics fpv_ml and fnv_ml)


def lesion_volumes(m) -> dict:
    """autoPET IV's false-positive and false-negative volumes of one (case, class), on its
    masks: 18-connected components (8 in 2-D), the voxel volume from the spacing (in mm, x
    first as ``pixdim``) as IV computes it under numpy 2; no component labelled for an empty
    prediction (0 ml), NaN for an empty truth (``empty_values`` gives another value)."""
    ref, pred = (mask.view(np.uint8) for mask in m.masks)
    spacing = tuple(m.spacing)[::-1] + (1.0,) * (3 - len(m.spacing))
    rules = EDITIONS["autopet4"]
    return {
        key: value
        for key, value in case_metrics(prepare_truth(ref, rules), pred, voxel_volume_ml(spacing, 2), rules, 2).items()
        if key in ("fpv_ml", "fnv_ml")
    }
