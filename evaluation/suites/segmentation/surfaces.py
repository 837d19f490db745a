"""One distance pass per (case, class): both directed distance lists, from which every
distance metric of every definition is reduced.

Two kinds of surface, because the libraries disagree on what a surface is:

* ``voxels``: the boundary voxels (mask minus its face-connected erosion, the image edge
  counting as background), distances between voxel centres. panoptica
  (``panoptica/metrics/_surface_distances.py: _surface_distance_pair``), MetricsReloaded
  (``MetricsReloaded/metrics/pairwise_measures.py: BinaryPairwiseMeasures.border_distance``)
  and MONAI by default (``monai/metrics/utils.py: get_mask_edges``, ``get_surface_distance``).
* ``surfels``: voxel-corner surface elements weighted by area, distances between corners
  (surface-distance ``compute_surface_distances``; MONAI ``use_subvoxels=True``).

Everything is computed inside the bounding box of the two masks: outside it both are
background, so boundaries, corner codes and nearest points are the same as on the image.
"""

from dataclasses import dataclass

import numpy as np

from evaluation.metrics import surfels
from evaluation.metrics.nearest import boundary, nearest, offset_length


@dataclass(frozen=True)
class Surfaces:
    """Directed distances of one (case, class): ``ref`` holds, for every reference surface
    element, the distance to the nearest prediction element (``inf`` when the prediction has
    none); ``pred`` the other way. ``*_area`` weight the elements (surfels only).
    ``*_virtual``: when the other mask is empty, the distance of each element to the voxel
    (-1, 0, ..., 0), which is what a feature transform without any feature point reports
    (panoptica and MetricsReloaded read those numbers, see ``distances``)."""

    kind: str
    ref: np.ndarray
    pred: np.ndarray
    ref_area: np.ndarray | None = None
    pred_area: np.ndarray | None = None
    ref_virtual: np.ndarray | None = None
    pred_virtual: np.ndarray | None = None

    @property
    def ref_empty(self) -> bool:
        return self.ref.size == 0

    @property
    def pred_empty(self) -> bool:
        return self.pred.size == 0


@dataclass(frozen=True)
class Box:
    """The masks of one class inside the bounding box of their union, where that box starts
    in the image, and the image's spacing."""

    ref: np.ndarray
    pred: np.ndarray
    origin: tuple[int, ...]
    spacing: tuple[float, ...]

    @classmethod
    def of(cls, ref: np.ndarray, pred: np.ndarray, spacing, offset=None) -> "Box":
        """The box of ``ref | pred``; ``offset``: where these arrays start in the image."""
        offset = (0,) * ref.ndim if offset is None else tuple(offset)
        union = ref | pred
        if not union.any():
            return cls(ref[tuple(slice(0, 0) for _ in ref.shape)], pred[tuple(slice(0, 0) for _ in ref.shape)],
                       offset, tuple(spacing))
        window = bounding_box(union)
        return cls(ref[window], pred[window], tuple(o + s.start for o, s in zip(offset, window)), tuple(spacing))


def bounding_box(mask: np.ndarray) -> tuple[slice, ...]:
    window = []
    for axis in range(mask.ndim):
        present = np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis)))
        window.append(slice(int(present[0]), int(present[-1]) + 1))
    return tuple(window)


def voxel_surfaces(box: Box) -> Surfaces:
    ref_edge, pred_edge = boundary(box.ref), boundary(box.pred)
    ref_points, pred_points = np.argwhere(ref_edge), np.argwhere(pred_edge)
    return Surfaces(
        "voxels",
        _directed(ref_points, pred_edge, pred_points, box.spacing),
        _directed(pred_points, ref_edge, ref_points, box.spacing),
        ref_virtual=_virtual(ref_points, box) if not len(pred_points) else None,
        pred_virtual=_virtual(pred_points, box) if not len(ref_points) else None,
    )


def surfel_surfaces(box: Box, areas: np.ndarray) -> Surfaces:
    """Corner surfels; ``areas`` maps a neighbourhood code to its area (``surfels.area_table``
    or MONAI's float32 version)."""
    ref_codes, pred_codes = surfels.corner_codes(box.ref), surfels.corner_codes(box.pred)
    ref_edge, pred_edge = surfels.is_surfel(ref_codes), surfels.is_surfel(pred_codes)
    ref_points, pred_points = np.argwhere(ref_edge), np.argwhere(pred_edge)
    return Surfaces(
        "surfels",
        _directed(ref_points, pred_edge, pred_points, box.spacing),
        _directed(pred_points, ref_edge, ref_points, box.spacing),
        ref_area=areas[ref_codes[ref_edge]],
        pred_area=areas[pred_codes[pred_edge]],
    )


def _directed(points: np.ndarray, target: np.ndarray, target_points: np.ndarray, spacing) -> np.ndarray:
    if not len(target_points):
        return np.full(len(points), np.inf)
    return nearest(points, target, spacing, target_points=target_points)


def _virtual(points: np.ndarray, box: Box) -> np.ndarray:
    virtual = np.zeros(len(box.origin), np.int64)
    virtual[0] = -1
    return offset_length(points + np.asarray(box.origin) - virtual, box.spacing)


def monai_area_table(spacing: tuple[float, ...]) -> np.ndarray:
    """MONAI's table (``monai/metrics/utils.py: create_table_neighbour_code_to_surface_area``):
    the same areas computed in float32 in 3-D (float32 normals times float32 spacing
    products); the 2-D lengths stay float64."""
    if len(spacing) == 2:
        return surfels.area_table(spacing)
    scale = np.array([spacing[1] * spacing[2], spacing[0] * spacing[2], spacing[0] * spacing[1]], np.float32)
    table = np.zeros(256, np.float32)
    for code, vectors in enumerate(surfels.triangle_area_vectors()):
        scaled = vectors.astype(np.float32) * scale
        table[code] = np.sqrt((scaled * scaled).sum(axis=1, dtype=np.float32)).sum(dtype=np.float32)
    return table
