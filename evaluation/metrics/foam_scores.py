"""TomoChallenge foam scores from one pass of counts over (label, boundary, prediction).

tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.metrics(vol, gt)``: foam Dice
with the background ignored, the voxel-wise recall of each void size class (the fraction of
its voxels predicted empty), the Dice of foam on the 6-neighbour boundary of the foam/non-foam
map, and the harmonic mean of the five.

The reference builds full-volume masks and loops over slices; here each z-slab contributes a
20-bin histogram of ``(label, on boundary, predicted foam)``, the boundary of a slab being
decided with one neighbouring slice on each side. Every score is a ratio of sums of those bins,
so slabs can be counted in any order, in parallel, and nothing full-size is ever allocated.
"""

import math
from dataclasses import dataclass

import numpy as np

from evaluation.metrics.foam_phantom import FOAM, LARGE, MEDIUM, SMALL
from evaluation.metrics.small_histogram import small_histogram

N_LABELS = 5
BINS = N_LABELS * 4  # key = label·4 + boundary·2 + predicted
SCORE_KEYS = ("harm_mean", "dice_foam", "sens_large", "sens_medium", "sens_small", "dice_edge")
SIZE_CLASSES = {"large": LARGE, "medium": MEDIUM, "small": SMALL}


def foam_boundary(material: np.ndarray, below: bool, above: bool) -> np.ndarray:
    """Voxels of the slab with a 6-neighbour of different ``material`` value inside the array.

    ``material`` holds the slab plus the neighbouring slice below (``below``) and above
    (``above``) when those exist in the volume; the result covers the slab only. The array
    border is no interface and nothing wraps around (the reference's shifted comparisons)."""
    lo = int(below)
    n = material.shape[0] - lo - int(above)
    core = material[lo:lo + n]
    edge = np.zeros(core.shape, dtype=bool)
    if material.shape[0] > 1:
        step = np.not_equal(material[1:], material[:-1])  # step[i]: slices i and i+1 differ
        upper = min(n, step.shape[0] - lo)
        np.logical_or(edge[:upper], step[lo:lo + upper], out=edge[:upper])
        first = max(0, 1 - lo)
        np.logical_or(edge[first:], step[lo + first - 1:lo + n - 1], out=edge[first:])
    for axis in (1, 2):
        ahead = [slice(None)] * 3
        behind = [slice(None)] * 3
        ahead[axis], behind[axis] = slice(1, None), slice(None, -1)
        ahead, behind = tuple(ahead), tuple(behind)
        step = np.not_equal(core[ahead], core[behind])
        np.logical_or(edge[ahead], step, out=edge[ahead])
        np.logical_or(edge[behind], step, out=edge[behind])
    return edge


def slab_counts(labels: np.ndarray, predicted: np.ndarray, below: bool, above: bool) -> np.ndarray:
    """The 20-bin histogram of one slab. ``labels``: uint8 ground truth of the slab with its
    neighbouring slices (see ``foam_boundary``); ``predicted``: the slab's 0/1 uint8 foam."""
    lo = int(below)
    core = labels[lo:labels.shape[0] - int(above)]
    if core.shape != predicted.shape:
        raise ValueError(f"slab shapes differ: {core.shape} vs {predicted.shape}")
    if core.size and int(core.max()) >= N_LABELS:
        raise ValueError(f"label volume holds value {int(core.max())}; expected 0 (background) to 4 (small void)")
    edge = foam_boundary(labels == FOAM, below, above)
    key = np.left_shift(core, np.uint8(2))
    key |= edge.view(np.uint8) << np.uint8(1)
    key |= predicted
    return small_histogram(key, BINS)


@dataclass(frozen=True)
class FoamCounts:
    """The histogram by name: ``n[l, e, p]`` voxels of label ``l``, on the boundary ``e``,
    predicted foam ``p``."""

    n: np.ndarray  # (5, 2, 2) int64

    @classmethod
    def from_histogram(cls, histogram: np.ndarray) -> "FoamCounts":
        return cls(np.asarray(histogram, dtype=np.int64).reshape(N_LABELS, 2, 2))

    def spec_counts(self) -> dict[str, int]:
        """The intermediate counts of the conformance kit, by its names."""
        n = self.n
        counts = {
            "tp_foam": n[FOAM, :, 1].sum(),
            "fp_foam": n[LARGE:, :, 1].sum(),
            "fn_foam": n[FOAM, :, 0].sum(),
        }
        for name, label in SIZE_CLASSES.items():
            counts[f"n_{name}"] = n[label].sum()
            counts[f"tp_{name}"] = n[label, :, 0].sum()
        counts.update(
            n_boundary=n[:, 1].sum(),
            n_boundary_foam=n[FOAM, 1].sum(),
            tp_edge=n[FOAM, 1, 1],
            fp_edge=n[:, 1, 1].sum() - n[FOAM, 1, 1],
            fn_edge=n[FOAM, 1, 0],
        )
        return {key: int(value) for key, value in counts.items()}


def _ratio(numerator: int, denominator: int) -> float:
    """IEEE division as numpy does it on the reference's integer sums: x/0 is inf, 0/0 NaN."""
    if denominator:
        return numerator / denominator
    return math.nan if numerator == 0 else math.inf


def harmonic_mean(scores, defined_only: bool = False) -> float:
    """``len / sum(1 / s)`` as the reference computes it: a zero score gives 0, an undefined
    (NaN) one gives NaN. ``defined_only`` (a phase option, not the reference) leaves NaN
    scores out, so a phantom without one void class still gets a rankable number."""
    values = [float(s) for s in scores if not (defined_only and math.isnan(s))]
    if not values:
        return math.nan
    if any(math.isnan(v) for v in values):
        return math.nan
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / float(np.sum(1 / np.asarray(values, dtype=np.float64)))


def foam_scores(counts: FoamCounts, defined_only: bool = False) -> dict[str, float]:
    """The six scores under the reference's names (its return order). Ratios are float64 on
    integer counts; ``dice_foam`` and ``dice_edge`` as ``2·tp / (2·tp + fp + fn)``."""
    c = counts.spec_counts()
    dice_foam = _ratio(2 * c["tp_foam"], 2 * c["tp_foam"] + c["fp_foam"] + c["fn_foam"])
    sens = {name: _ratio(c[f"tp_{name}"], c[f"n_{name}"]) for name in SIZE_CLASSES}
    dice_edge = _ratio(2 * c["tp_edge"], 2 * c["tp_edge"] + c["fp_edge"] + c["fn_edge"])
    parts = [dice_foam, sens["large"], sens["medium"], sens["small"], dice_edge]
    return {
        "harm_mean": harmonic_mean(parts, defined_only),
        "dice_foam": dice_foam,
        "sens_large": sens["large"],
        "sens_medium": sens["medium"],
        "sens_small": sens["small"],
        "dice_edge": dice_edge,
    }
