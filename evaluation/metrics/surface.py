"""Symmetric point-set distances between binary masks: Hausdorff and mean surface distance.

Two definitions of the point set of a mask are offered, because the literature and the tools
disagree on what "surface distance" means:

* ``all_pixels`` -- every foreground pixel (MMV-Lab/string_vessel_project@c90f9ec,
  ``core/evaluation.py: get_surface_points`` returns ``np.argwhere(mask)``). Equal to
  SimpleITK's ``HausdorffDistanceImageFilter`` average distance.
* ``boundary`` -- foreground pixels with a face-connected background neighbour (the mask minus
  its erosion by the cross-shaped element, pixels on the image border counting as boundary),
  the contour used by the tool's own documentation and by most surface-distance libraries.

Distances are Euclidean in pixel units, as in the tool. The tool queries a KD-tree of *all*
target pixels for *all* source pixels (and runs ``directed_hausdorff`` on the same sets). Two
facts make most of that work unnecessary while giving the same numbers:

* a source point inside the target set is at distance 0;
* the target pixel nearest to a point outside the target is a boundary pixel of the target
  (if it were interior, its neighbour one step towards the point would be in the set and
  strictly closer), so a KD-tree of the target's boundary answers exactly.

The distances of one direction are laid out in ``np.argwhere`` order (row-major), as the tool
has them, so means are summed in the same order and agree to the last bit; each distance is
``sqrt`` of an integer sum of squares, as in the tool.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import ndimage  # type: ignore[import-untyped]  # scipy has no type information
from scipy.spatial import cKDTree  # type: ignore[import-untyped]  # scipy has no type information


def boundary(mask: np.ndarray) -> np.ndarray:
    """Foreground pixels with a face-connected background neighbour or on the image border.

    A stack of one slice is treated as the 2-D image it is: a 3-D erosion would see background
    above and below and make every pixel a boundary pixel (the depth-1 quirk of later
    MONAI-based versions of the tool, commits dd924df to 73d7bf2 of its ``core/evaluation.py``)."""
    mask = mask.astype(bool, copy=False)
    squeezed: npt.NDArray[np.bool_] = mask.reshape([n for n in mask.shape if n != 1] or [1])
    structure = ndimage.generate_binary_structure(squeezed.ndim, 1)
    eroded: npt.NDArray[np.bool_] = ndimage.binary_erosion(squeezed, structure, border_value=0)
    return (squeezed & ~eroded).reshape(mask.shape)


def surface_points(mask: np.ndarray, surface: str) -> np.ndarray:
    """The boolean point set of ``mask`` under the chosen definition."""
    if surface == "all_pixels":
        return mask.astype(bool, copy=False)
    if surface == "boundary":
        return boundary(mask)
    raise ValueError(f"unknown surface definition {surface!r}")


@dataclass
class PointSet:
    """A mask's point set and a KD-tree of the set's boundary (None when the set is empty)."""

    points: np.ndarray
    tree: cKDTree | None

    @property
    def empty(self) -> bool:
        return self.tree is None

    @classmethod
    def of(cls, mask: np.ndarray, surface: str) -> "PointSet":
        points = surface_points(mask, surface)
        if not points.any():
            return cls(points, None)
        edge = points if surface == "boundary" else boundary(points)
        return cls(points, cKDTree(np.argwhere(edge)))


@dataclass(frozen=True)
class Distances:
    """Symmetric distances between two non-empty point sets A and B."""

    hausdorff: float  # max of the two directed maxima
    mean_of_means: float  # (mean d(A, B) + mean d(B, A)) / 2, the tool's MSD
    pooled: float  # (sum d(A, B) + sum d(B, A)) / (|A| + |B|), the documented ASSD


def directed(source: PointSet, target: PointSet) -> np.ndarray:
    """Distance from every source point (row-major order) to the nearest target point."""
    inside = target.points[source.points]
    out = np.zeros(inside.size, dtype=np.float64)
    outside = ~inside
    if outside.any():
        assert target.tree is not None  # the sets are not empty (``distances``)
        out[outside] = target.tree.query(np.argwhere(source.points & ~target.points))[0]
    return out


def distances(a: PointSet, b: PointSet) -> Distances:
    """Directed distances both ways (both sets non-empty)."""
    a_to_b, b_to_a = directed(a, b), directed(b, a)
    return Distances(
        hausdorff=float(max(a_to_b.max(), b_to_a.max())),
        mean_of_means=float((np.mean(a_to_b) + np.mean(b_to_a)) / 2),
        pooled=float((a_to_b.sum() + b_to_a.sum()) / (a_to_b.size + b_to_a.size)),
    )
