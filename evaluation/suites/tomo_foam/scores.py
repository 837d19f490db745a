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

from evaluation.metrics.means import harmonic_mean
from evaluation.metrics.small_histogram import small_histogram
from evaluation.suites.tomo_foam.phantom import FOAM, LARGE, MEDIUM, SMALL

N_LABELS = 5
BINS = N_LABELS * 4  # key = label·4 + boundary·2 + predicted
SCORE_KEYS = ("harm_mean", "dice_foam", "sens_large", "sens_medium", "sens_small", "dice_edge")
SIZE_CLASSES = {"large": LARGE, "medium": MEDIUM, "small": SMALL}
_COUNTED = np.ones(BINS, dtype=bool)
_COUNTED[:2] = False  # background off the boundary enters no score


_BLOCK_ROWS = 32  # rows per block: a slab's block of every temporary stays in the CPU cache


def _along(axis: int, part: slice) -> tuple[slice, ...]:
    index = [slice(None)] * 3
    index[axis] = part
    return tuple(index)


def foam_boundary(material: np.ndarray, halo: tuple[tuple[bool, bool], ...]) -> np.ndarray:
    """Voxels with a 6-neighbour of different ``material`` value inside the array.

    ``material`` is a block of the volume plus, for each axis, one neighbouring layer before
    and after it where ``halo[axis]`` says the volume has one (``(before, after)``); the result
    covers the block without those layers. The array border is no interface and nothing wraps
    around (the reference's shifted comparisons ``gt[:-1] != gt[1:]`` along each axis)."""
    core = tuple(slice(int(lo), n - int(hi)) for (lo, hi), n in zip(halo, material.shape))
    edge = np.zeros(material[core].shape, dtype=bool)
    for axis, (lo, _) in enumerate(halo):
        lo, n = int(lo), edge.shape[axis]
        line = material[core[:axis] + (slice(None),) + core[axis + 1 :]]  # with this axis's halo
        if line.shape[axis] < 2:
            continue
        step = np.not_equal(line[_along(axis, slice(1, None))], line[_along(axis, slice(None, -1))])
        upper = min(n, step.shape[axis] - lo)  # neighbour after: step index lo + c
        target = edge[_along(axis, slice(0, upper))]
        np.logical_or(target, step[_along(axis, slice(lo, lo + upper))], out=target)
        first = 1 - lo  # neighbour before: step index lo + c - 1
        target = edge[_along(axis, slice(first, n))]
        np.logical_or(target, step[_along(axis, slice(lo + first - 1, lo + n - 1))], out=target)
    return edge


def slab_counts(labels: np.ndarray, predicted: np.ndarray, below: bool, above: bool) -> np.ndarray:
    """The 20-bin histogram of one slab. ``labels``: uint8 ground truth of the slab plus the
    slice below (``below``) and above (``above``) when the volume has them; ``predicted``: the
    slab's 0/1 uint8 foam. Counted in blocks of rows that stay in cache."""
    lo = int(below)
    core = labels[lo : labels.shape[0] - int(above)]
    if core.shape != predicted.shape:
        raise ValueError(f"slab shapes differ: {core.shape} vs {predicted.shape}")
    if core.size and int(core.max()) >= N_LABELS:
        raise ValueError(f"label volume holds value {int(core.max())}; expected 0 (background) to 4 (small void)")
    ny = core.shape[1]
    histogram = np.zeros(BINS, dtype=np.int64)
    for y0 in range(0, ny, _BLOCK_ROWS):
        y1 = min(y0 + _BLOCK_ROWS, ny)
        before, after = y0 > 0, y1 < ny
        block = labels[:, y0 - before : y1 + after]
        edge = foam_boundary(block == FOAM, ((below, above), (before, after), (False, False))).view(np.uint8)
        key = np.left_shift(core[:, y0:y1], np.uint8(2))
        np.left_shift(edge, np.uint8(1), out=edge)
        key |= edge
        key |= predicted[:, y0:y1]
        histogram += small_histogram(key, BINS, _COUNTED)
    return histogram


@dataclass(frozen=True)
class FoamCounts:
    """The histogram by name: ``n[l, e, p]`` voxels of label ``l``, on the boundary ``e``,
    predicted foam ``p`` (``n[0, 0]``, background off the boundary, is not counted: no score
    uses it)."""

    n: np.ndarray  # (5, 2, 2) int64

    @classmethod
    def from_histogram(cls, histogram: np.ndarray) -> "FoamCounts":
        return cls(np.asarray(histogram, dtype=np.int64).reshape(N_LABELS, 2, 2))

    def spec_counts(self) -> dict[str, int]:
        """The integer counts behind the scores (``counts`` in metrics.json): ``metrics``'s own
        ``tp_foam``, ``fp_foam``, ``fn_foam``, ``tp_<class>``, ``tp_edge``, ``fp_edge``,
        ``fn_edge``, plus each void class's voxels and the boundary's."""
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
