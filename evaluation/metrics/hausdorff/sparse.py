"""Small sets far apart, compared point to point instead of over their union box.

An unmatched piece whose id collides with a distant truth id leaves the union box mostly empty:
small sets are then gathered from their own tight boxes and compared point to boundary point
(``hausdorff_sparse``: compiled, in order of z gap; the k-d tree past ``directed``'s
POINT_STEPS). A set's boundary is found from its points alone, by asking the provider whether
each 6-neighbour belongs to the set (``Sets.in_a``, ``Sets.in_b``).
"""

from collections.abc import Callable

import numpy as np

from evaluation.metrics.hausdorff.boxes import Box
from evaluation.metrics.hausdorff.directed import directed_points
from evaluation.metrics.hausdorff.sets import Parts, Sets

LabelsAt = Callable[[np.ndarray, int], np.ndarray]  # (points, g) -> whether each is in g's set


def _members(labels_at: LabelsAt, points: np.ndarray, shape: tuple[int, ...], g: int) -> np.ndarray:
    """For each point, whether it is in the set (``labels_at(points) == g``), out of bounds = no."""
    inside = np.all((points >= 0) & (points < np.asarray(shape)), axis=1)
    result = np.zeros(len(points), dtype=bool)
    result[inside] = labels_at(points[inside], g)
    return result


def _boundary(points: np.ndarray, labels_at: LabelsAt, shape: tuple[int, ...], g: int) -> np.ndarray:
    """The points of a set that have a 6-neighbour outside it."""
    on_boundary = np.zeros(len(points), dtype=bool)
    unit = np.eye(points.shape[1], dtype=points.dtype)
    for step in np.concatenate([unit, -unit]):
        on_boundary |= ~_members(labels_at, points + step, shape, g)
    return points[on_boundary]


def hausdorff_sparse(sets: Sets, g: int, box_a: Box, parts: Parts, vs: np.ndarray, cap: float) -> float:
    """``d_g`` from the points of A and B and their boundaries (a value at or above the cap may
    stand for any larger one)."""
    points_a = sets.points_a(g, box_a)
    points_b = sets.points_b(g, parts)
    a_outside_b = points_a[~sets.in_b(points_a, g)]
    b_outside_a = points_b[~sets.in_a(points_b, g)]
    forward = directed_points(a_outside_b, _boundary(points_b, sets.in_b, sets.shape, g), vs, cap)
    if forward >= cap:
        return forward
    return max(forward, directed_points(b_outside_a, _boundary(points_a, sets.in_a, sets.shape, g), vs, cap))
