"""Metrics of a mask's shape rather than its overlap or surface distances: clDice and its
topology precision/sensitivity, boundary IoU, and the distance between centres of mass."""

import math

import numpy as np

from evaluation.metrics import portable
from evaluation.metrics.nearest import boundary
from evaluation.suites.segmentation.keys import number_key
from evaluation.suites.segmentation.surfaces import bounding_box

NAN = float("nan")


def skeleton(mask: np.ndarray) -> np.ndarray:
    """``skimage.morphology.skeletonize`` (2-D: Zhang-Suen, 3-D: Lee), as both panoptica
    (``panoptica/metrics/cldice.py: _get_skeleton``) and MetricsReloaded
    (``MetricsReloaded/utility/utils.py: compute_skeleton``) call it. The thinning only looks
    at 3x3(x3) neighbourhoods and treats the outside as background, so the mask's bounding box
    grown by one voxel gives the same skeleton as the whole image."""
    from skimage.morphology import skeletonize  # on first use: a heavy import

    out = np.zeros(mask.shape, bool)
    if mask.any():
        window = tuple(slice(max(s.start - 1, 0), s.stop + 1) for s in bounding_box(mask))
        out[window] = skeletonize(mask[window])
    return out


def cldice(ref: np.ndarray, pred: np.ndarray) -> dict:
    """clDice = 2xy/(x+y) with x the share of the reference skeleton inside the prediction
    (MetricsReloaded ``topology_sensitivity``, panoptica ``tprec``) and y the share of the
    prediction skeleton inside the reference (``topology_precision``); an empty skeleton makes
    its share nan (``pairwise_measures.py: centreline_dsc``, ``cldice.py:
    _compute_centerline_dice_coefficient``)."""
    ref_skeleton, pred_skeleton = skeleton(ref), skeleton(pred)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.sum(pred & ref_skeleton) / np.sum(ref_skeleton)
        y = np.sum(ref & pred_skeleton) / np.sum(pred_skeleton)
        value = 2 * x * y / (x + y)
    return {"cldice": float(value), "topology_sensitivity": float(x), "topology_precision": float(y)}


def boundary_iou(ref: np.ndarray, pred: np.ndarray, width: float) -> float:
    """MetricsReloaded ``BinaryPairwiseMeasures.boundary_iou``: the IoU of the two masks' inner
    bands, the voxels nearer than ``width`` (in voxels, whatever the spacing) to their own
    boundary; 1 when both masks are empty."""
    if not ref.any() and not pred.any():
        return 1.0
    reach = int(np.ceil(width)) - 1
    steps = np.indices((2 * reach + 1,) * ref.ndim).reshape(ref.ndim, -1).T - reach
    ball = np.zeros((2 * reach + 1,) * ref.ndim, bool)
    ball[tuple((steps + reach).T)] = np.sqrt((steps.astype(np.float64) ** 2).sum(axis=1)) < width
    from scipy import ndimage

    bands = [ndimage.binary_dilation(boundary(m), structure=ball) & m if reach else boundary(m) for m in (ref, pred)]
    return float(np.sum(bands[0] & bands[1]) / np.sum(bands[0] | bands[1]))


def centre_distance(ref: np.ndarray, pred: np.ndarray, spacing, definition: str) -> float:
    """Distance between the centres of mass in spacing units. panoptica ``CEDI``
    (``center_distance.py``): nan when a mask is empty; MetricsReloaded ``com_dist``: -1. Both
    references take the norm with the BLAS (``np.linalg.norm``, ``np.dot``), whose result
    depends on the processor; ``portable`` gives the one without fused multiply-adds."""
    if not ref.any() or not pred.any():
        return -1.0 if definition == "metricsreloaded" else NAN
    from scipy import ndimage

    difference = np.subtract(ndimage.center_of_mass(pred), ndimage.center_of_mass(ref))
    if definition == "metricsreloaded":
        return math.sqrt(portable.dot(np.square(-difference), np.square(np.asarray(spacing, np.float64))))
    return portable.norm(np.multiply(difference, spacing))


# --------------------------------------------------------------------------------------------
# The metric table's functions (a ``Measured`` -> its keys)


def cldice_measure(m) -> dict:
    return cldice(*m.masks)


def boundary_iou_measure(m) -> dict:
    return {f"boundary_iou_{number_key(d)}": boundary_iou(*m.masks, d) for d in m.options.boundary_iou_distances}


def cedi(m) -> dict:
    """panoptica's ``CEDI``, also the centre distance of the definitions that have none."""
    return {"centre_distance": centre_distance(*m.masks, m.spacing, "panoptica")}


def com_dist(m) -> dict:
    """MetricsReloaded's ``com_dist``."""
    return {"centre_distance": centre_distance(*m.masks, m.spacing, "metricsreloaded")}
