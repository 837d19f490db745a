"""Lesion candidates: the blobs of a detection map, and softmax maps turned into detection maps.

picai_eval 1.4.13 takes a *detection map*: every lesion candidate a blob of one confidence.
``picai_eval/analysis_utils.py: parse_detection_map`` labels the non-zero voxels with a full
3x3x3 structure (26-connectivity, components numbered by their first voxel in C raster order),
gives each blob the maximum voxel value as its confidence, and refuses a map with fewer blobs
than distinct non-zero values ("looks like a softmax"). A softmax map becomes a detection map
through report_guided_annotation 0.3.4's ``extract_lesion_candidates``
(``extract_lesion_candidates.py``): ``extract_lesion_candidates_static`` (threshold, blobs of
more than ``min_voxels_detection`` voxels, each set to its maximum or mean) and
``extract_lesion_candidates_dynamic`` (one candidate at a time from the highest remaining peak).

The reference works on whole volumes: one full-size mask per blob, a full-size static
extraction per dynamic iteration. Here one pass finds the non-zero voxels' bounding box and
everything else works on that crop, with one labelling and per-blob reductions over sorted
labels; the values are the reference's, voxel for voxel (docs/suites/detection.md).
"""

from dataclasses import dataclass

import cc3d
import numpy as np
from scipy import ndimage

from evaluation.errors import Unusable
from evaluation.suites.detection.options import Extraction

FULL26 = np.ones((3, 3, 3), dtype=bool)
FAILSAFE_PEAK = 0.01  # the dynamic search stops below this peak (max_prob_failsafe_stopping_threshold)


def label26(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """26-connected components of a boolean 3-D mask, numbered by first voxel in C raster
    order, as ``scipy.ndimage.label`` with a 3x3x3 structure numbers them."""
    labels, count = cc3d.connected_components(np.ascontiguousarray(mask, dtype=np.uint8), connectivity=26, return_N=True)
    return labels, int(count)


def bounding_box(mask: np.ndarray) -> tuple[slice, ...] | None:
    """The tight box of a boolean volume's true voxels (None if there is none): one pass over
    the volume (a projection along axis 0); the first axis is found on the small block."""
    if mask.size == 0:
        return None
    projection = mask.any(axis=0)
    rest = []
    for axis in range(projection.ndim):
        others = tuple(a for a in range(projection.ndim) if a != axis)
        hit = np.flatnonzero(projection.any(axis=others) if others else projection)
        if hit.size == 0:
            return None
        rest.append(slice(int(hit[0]), int(hit[-1]) + 1))
    block = mask[(slice(None), *rest)]
    hit = np.flatnonzero(block.reshape(block.shape[0], -1).any(axis=1))
    return (slice(int(hit[0]), int(hit[-1]) + 1), *rest)


@dataclass(frozen=True)
class Foreground:
    """A volume's non-zero voxels: their box, the mask and values inside it (raster order)."""

    box: tuple[slice, ...] | None
    mask: np.ndarray | None
    values: np.ndarray

    @classmethod
    def of(cls, volume: np.ndarray) -> "Foreground":
        nonzero = volume if volume.dtype == bool else volume != 0  # NaN is non-zero
        box = bounding_box(nonzero)
        if box is None:
            return cls(None, None, volume[:0].ravel())
        mask = nonzero[box]
        return cls(box, mask, volume[box][mask])

    def maximum(self) -> float:
        """The volume's maximum, picai_eval's case confidence 'max' (``np.max`` of the whole,
        non-negative map: 0 when it is empty)."""
        return float(self.values.max()) if self.values.size else 0.0


@dataclass(frozen=True)
class Candidates:
    """A detection map's blobs: labels on the foreground box (0 outside any blob), their
    count, each blob's confidence (its maximum, a float32 value as a Python float) and the
    map's maximum."""

    box: tuple[slice, ...] | None
    labels: np.ndarray | None
    count: int
    confidences: list[float]
    maximum: float = 0.0


def segments(labels: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values sorted by label, stably, so each blob's values keep their raster order; the
    start of each label's run; its end), for per-blob reductions without a Python loop."""
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    ids = np.arange(1, int(ordered[-1]) + 1) if ordered.size else np.zeros(0, np.int64)
    return values[order], np.searchsorted(ordered, ids, side="left"), np.searchsorted(ordered, ids, side="right")


def blobs(volume: np.ndarray, display: str, constant_blobs: bool = False, ground: Foreground | None = None) -> Candidates:
    """The candidates of a non-negative, finite float32 detection map (``ground``: its
    foreground, if already found); refuses a map that ``parse_detection_map`` refuses (fewer
    blobs than distinct values), and with ``constant_blobs`` (a correction) any map with a
    blob of more than one value."""
    ground = ground if ground is not None else Foreground.of(volume)
    if ground.box is None:
        return Candidates(None, None, 0, [])
    labels, count = label26(ground.mask)
    flat = labels[ground.mask].astype(np.int64)
    ordered, starts, ends = segments(flat, ground.values)
    highest = np.maximum.reduceat(ordered, starts)
    distinct = np.unique(ground.values).size
    if count < distinct:
        refuse_softmax(display, count, distinct)
    if constant_blobs:
        uneven = int(np.count_nonzero(np.minimum.reduceat(ordered, starts) != highest))
        if uneven:
            raise Unusable(
                f"{display}: {uneven} of its {count} lesion candidates hold more than one value; a detection map gives "
                "each candidate (a connected blob) one confidence: set every voxel of a blob to the blob's confidence"
            )
    return Candidates(ground.box, labels, count, [float(c) for c in highest], ground.maximum())


def refuse_softmax(display: str, count: int, distinct: int) -> None:
    raise Unusable(
        f"{display}: is not a detection map: its {count} connected blob(s) hold {distinct} different values, so some "
        "blob is not of one constant confidence (this looks like a softmax or probability map); submit a detection map, "
        "each lesion candidate one blob of one value, e.g. made with extract_lesion_candidates (report_guided_annotation)"
    )


# --------------------------------------------------------------------------------------------
# Softmax -> detection map (report_guided_annotation 0.3.4)


@dataclass(frozen=True)
class Static:
    """One static extraction on the box of the voxels that pass the threshold: the crop's
    labels and, per kept blob (more than ``min_voxels_detection`` voxels), its label and
    confidence (float64, before the cast to the map's type)."""

    box: tuple[slice, ...] | None
    labels: np.ndarray | None
    kept: list[tuple[int, float]]


def static(softmax: np.ndarray, threshold, settings: Extraction) -> Static:
    """``extract_lesion_candidates_static`` on a finite, non-negative map: voxels below
    ``threshold`` (compared in the map's type, as NumPy compares an array with a Python
    number) are background; 26-connected blobs of more than ``min_voxels_detection`` voxels
    are kept, each with the maximum (or, for the -mean modes, the mean) of its positive
    values in raster order, optionally rounded."""
    passing = ~(softmax < threshold) & (softmax != 0)
    box = bounding_box(passing)
    if box is None:
        return Static(None, None, [])
    crop = passing[box]
    labels, count = label26(crop)
    if count == 0:
        return Static(box, labels, [])
    flat = labels[crop].astype(np.int64)
    ordered, starts, ends = segments(flat, softmax[box][crop].astype(np.float64))
    sizes = ends - starts
    kept = []
    if not settings.mean:  # every kept voxel is positive: a blob's maximum is its run's maximum
        highest = np.maximum.reduceat(ordered, starts)
        for label in np.flatnonzero(sizes > settings.min_voxels_detection) + 1:
            kept.append((int(label), _rounded(highest[label - 1], settings)))
    else:
        for label in np.flatnonzero(sizes > settings.min_voxels_detection) + 1:
            run = ordered[starts[label - 1] : ends[label - 1]]
            kept.append((int(label), _rounded(np.mean(run[run > 0]), settings)))
    return Static(box, labels, kept)


def _rounded(confidence, settings: Extraction):
    decimals = settings.max_prob_round_decimals
    return confidence if decimals is None else np.round(confidence, decimals)


def render(shape: tuple[int, ...], dtype, found: Static) -> np.ndarray:
    """The static extraction's detection map: each kept blob's voxels set to its confidence
    (cast to the map's type), everything else 0."""
    out = np.zeros(shape, dtype=dtype)
    if found.box is None or not found.kept:
        return out
    table = np.zeros(int(found.labels.max()) + 1, dtype=np.float64)
    keep = np.zeros(table.size, dtype=bool)
    for label, confidence in found.kept:
        table[label], keep[label] = confidence, True
    inside = keep[found.labels]
    crop = out[found.box]
    crop[inside] = table[found.labels[inside]]
    return out


def extract(softmax: np.ndarray, settings: Extraction) -> np.ndarray:
    """``extract_lesion_candidates(softmax, threshold=...)[0]``: the detection map of a
    finite, non-negative float32 softmax map. 'dynamic-fast' thresholds once at the maximum
    divided by ``dynamic_threshold_factor`` (the division in the map's type), a number
    thresholds there, the dynamic modes search peak by peak."""
    if settings.mode == "dynamic":
        return dynamic(softmax, settings)
    if settings.mode == "dynamic-fast":
        threshold = float(np.max(softmax) / settings.dynamic_threshold_factor) if softmax.size else 0.0
    else:
        threshold = float(settings.threshold)
    return render(softmax.shape, softmax.dtype, static(softmax, threshold, settings))


def dynamic(softmax: np.ndarray, settings: Extraction) -> np.ndarray:
    """``extract_lesion_candidates_dynamic``: while fewer than ``num_lesions_to_extract``
    candidates are kept and the working map's peak p is at least 0.01, statically extract at
    p / factor; the candidate is the first blob (raster order) at the extraction's maximum q.
    It is kept unless ``remove_adjacent_lesion_candidates`` and it touches (26-neighbourhood)
    a kept candidate; either way its voxels leave the working map. When no blob is large
    enough (q = 0), version 2 removes the voxels above the threshold and goes on, version 1
    takes the reference's path (``_no_candidate_v1``)."""
    work = softmax.copy()
    out = np.zeros_like(softmax)
    kept = 0
    while kept < settings.num_lesions_to_extract:
        peak = np.max(work)
        if peak < FAILSAFE_PEAK:
            break
        threshold = peak / settings.dynamic_threshold_factor
        found = static(work, threshold, settings)
        values = [softmax.dtype.type(c) for _, c in found.kept]
        best = max(values) if values else softmax.dtype.type(0)
        if best == 0:
            if settings.version >= 2:
                work = work * ~(work > threshold)
                continue
            kept += _no_candidate_v1(work, out, found, best, settings)
            continue
        label = min(lbl for (lbl, _), value in zip(found.kept, values) if value == best)
        box, mask = _blob(found, label)
        if not (settings.remove_adjacent_lesion_candidates and touches(box, mask, out > 0)):
            region = out[box]
            region[mask] += best
            kept += 1
        region = work[box]
        region[mask] = 0
    return out


def _blob(found: Static, label: int) -> tuple[tuple[slice, ...], np.ndarray]:
    """A static blob as (its own box in the volume, its mask in that box)."""
    whole = found.labels == label
    local = bounding_box(whole)
    box = tuple(slice(b.start + m.start, b.start + m.stop) for b, m in zip(found.box, local))
    return box, whole[local]


def _no_candidate_v1(work: np.ndarray, out: np.ndarray, found: Static, best, settings: Extraction) -> int:
    """Version 1 with no large enough blob: the reference's candidate is then the first
    component of the static map's *zero-valued* voxels (usually the whole background),
    recorded with confidence 0 (counted toward the limit, nothing drawn) unless it touches a
    kept candidate, and removed from the working map, which usually ends the search. Whole-
    volume work, as the reference's, on a path only a tiny isolated peak reaches."""
    static_map = render(work.shape, work.dtype, found)
    labels, _ = label26(static_map == best)
    mask = labels == 1
    counted = 0
    if not (settings.remove_adjacent_lesion_candidates and touches(_whole(mask), mask, out > 0)):
        out += static_map * mask
        counted = 1
    work *= ~mask
    return counted


def _whole(mask: np.ndarray) -> tuple[slice, ...]:
    return tuple(slice(0, n) for n in mask.shape)


def touches(box: tuple[slice, ...], mask: np.ndarray, existing: np.ndarray) -> bool:
    """Whether a blob (``mask`` in ``box``) overlaps or is 26-adjacent to a voxel of
    ``existing``: the blob's one-voxel dilation, on the box grown by one voxel."""
    low = [max(s.start - 1, 0) for s in box]
    high = [min(s.stop + 1, n) for s, n in zip(box, existing.shape)]
    region = existing[tuple(slice(a, b) for a, b in zip(low, high))]
    if not region.any():
        return False
    grown = np.zeros(region.shape, dtype=bool)
    grown[tuple(slice(s.start - a, s.stop - a) for s, a in zip(box, low))] = mask
    return bool((ndimage.binary_dilation(grown, structure=FULL26) & region).any())
