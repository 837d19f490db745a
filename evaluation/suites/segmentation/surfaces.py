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
from evaluation.metrics.nearest import PointSet, both_ways, edge_points, offset_length


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
    ref_area_rank: np.ndarray | None = None  # dense rank of each area among the table's values (for sorting)
    pred_area_rank: np.ndarray | None = None

    @property
    def ref_empty(self) -> bool:
        return self.ref.size == 0

    @property
    def pred_empty(self) -> bool:
        return self.pred.size == 0


@dataclass(frozen=True)
class Box:
    """One class inside the bounding box of its voxels in both maps: the two label maps'
    views of the box, which of their labels belong to the class (``membership``: a lookup
    table, ``default`` for labels beyond it), where the box starts in the image, and the
    image's spacing. Masks are built only where a metric needs one (``masks``)."""

    truth: np.ndarray
    pred: np.ndarray
    membership: np.ndarray
    default: int
    origin: tuple[int, ...]
    spacing: tuple[float, ...]

    @classmethod
    def of(cls, ref: np.ndarray, pred: np.ndarray, spacing) -> "Box":
        """A box of two masks (the whole arrays)."""
        return cls(ref, pred, np.array([0, 1], np.uint8), 0, (0,) * ref.ndim, tuple(float(s) for s in spacing))

    def masks(self) -> tuple[np.ndarray, np.ndarray]:
        return tuple(self._member(m) for m in (self.truth, self.pred))

    def pred_mask(self) -> np.ndarray:
        return self._member(self.pred)

    def _member(self, labels: np.ndarray) -> np.ndarray:
        inside = labels < self.membership.size
        return np.where(inside, self.membership[np.where(inside, labels, 0)], self.default).astype(bool)


def membership(labels: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """(lookup table, default) marking a class's labels; no labels: every non-zero label (the
    foreground of instance maps)."""
    if not labels:
        return np.zeros(1, np.uint8), 1
    table = np.zeros(max(labels) + 1, np.uint8)
    table[list(labels)] = 1
    return table, 0


def bounding_box(mask: np.ndarray) -> tuple[slice, ...]:
    window = []
    for axis in range(mask.ndim):
        present = np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis)))
        window.append(slice(int(present[0]), int(present[-1]) + 1))
    return tuple(window)


def voxel_surfaces(box: Box) -> Surfaces:
    ref, pred, to_pred, to_ref = both_ways(
        lambda: edge_points(box.truth, box.spacing, box.membership, box.default),
        lambda: edge_points(box.pred, box.spacing, box.membership, box.default),
        box.spacing,
    )
    return Surfaces(
        "voxels",
        to_pred,
        to_ref,
        ref_virtual=_virtual(ref, box) if not pred.size else None,
        pred_virtual=_virtual(pred, box) if not ref.size else None,
    )


def surfel_surfaces(box: Box, areas: np.ndarray) -> Surfaces:
    """Corner surfels; ``areas`` maps a neighbourhood code to its area (``surfels.area_table``
    or MONAI's float32 version)."""
    ref, pred, to_pred, to_ref = both_ways(
        lambda: surfels.corner_points(box.truth, box.spacing, box.membership, box.default),
        lambda: surfels.corner_points(box.pred, box.spacing, box.membership, box.default),
        box.spacing,
    )
    rank = np.unique(areas, return_inverse=True)[1]
    return Surfaces(
        "surfels",
        to_pred,
        to_ref,
        ref_area=areas[ref.marks],
        pred_area=areas[pred.marks],
        ref_area_rank=rank[ref.marks],
        pred_area_rank=rank[pred.marks],
    )


def _virtual(points: PointSet, box: Box) -> np.ndarray:
    virtual = np.zeros(len(box.origin), np.int64)
    virtual[0] = -1
    return offset_length(points.coords() + np.asarray(box.origin) - virtual, box.spacing)


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
