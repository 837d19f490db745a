"""Per-instance symmetric Hausdorff distance with a cap, on tight bounding boxes.

For every truth id g, ``d_g = min(max(h(A, B), h(B, A)), cap)`` with ``A = truth == g``,
``B`` the prediction voxels assigned to g, ``h(X, Y) = max_{x in X} min_{y in Y} |x - y|`` in
physical units, and ``d_g = cap`` when B is empty (CellMap ``optimized_hausdorff_distances``).
The prediction is given as *pieces* (connected components) and the id each piece is assigned
to, which is how matching produces it; B is the union of the pieces assigned to g.

The reference computes two float64 distance transforms per instance over the union of both
boxes padded by the cap, which for a 256^3 crop is nearly the whole crop, 476 times. Padding
is never needed: every point of Y lies inside the union box, so a distance transform of ~Y
restricted to that box already gives the exact distance from each point of X to Y. A box-gap
lower bound that reaches the cap decides ``d_g = cap`` without any transform, and a direction
whose X lies inside Y is 0.

When the union box is mostly empty (an unmatched piece whose id collides with a distant truth
id), nearest neighbours replace the transform: a k-d tree over the target's boundary voxels
(the nearest target voxel of an outside point always has a 6-neighbour outside the target),
queried with the source voxels outside the target, each set gathered from its own tight boxes.

Either way the distance of the farthest point is computed from its integer voxel offset with
``distance_transform_edt``'s own arithmetic (per axis ``(delta * vs) ** 2`` summed in axis
order, square root), so the float32 results agree with the reference to the bit.
"""

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

Box = tuple[slice, ...]
# A union box this many times larger than the boxes of its parts is searched with a k-d tree.
SPARSE_BOX_FACTOR = 32


def label_boxes(labels: np.ndarray) -> dict[int, Box]:
    """Bounding box of every non-zero id in one pass."""
    if labels.size == 0 or not labels.any():
        return {}
    top = int(labels.max())
    if top <= max(labels.size, 1 << 24):
        found = ndimage.find_objects(labels, max_label=top)
        return {i + 1: box for i, box in enumerate(found) if box is not None}
    ids, dense = np.unique(labels, return_inverse=True)
    found = ndimage.find_objects(dense.reshape(labels.shape), max_label=ids.size - 1)
    return {int(ids[i + 1]): box for i, box in enumerate(found) if box is not None}


def _union(boxes: list[Box]) -> Box:
    return tuple(slice(min(b[d].start for b in boxes), max(b[d].stop for b in boxes)) for d in range(len(boxes[0])))


def _volume(box: Box) -> int:
    return int(np.prod([s.stop - s.start for s in box]))


def _origin(box: Box) -> np.ndarray:
    return np.array([s.start for s in box])


def box_gap(first: Box, second: Box, voxel_size: np.ndarray) -> float:
    """A lower bound on the symmetric Hausdorff distance of two sets from their boxes alone.

    The set point on a box face is at least as far from the other set as that face is from
    the other box on that axis; the product is evaluated as ``delta * vs`` like the distance
    transform, so ``gap >= cap`` implies the reference's distance is >= cap as well."""
    gaps = []
    for p, q, vs in zip(first, second, voxel_size):
        gaps += [(q.start - p.start) * vs, (p.start - q.start) * vs, (p.stop - q.stop) * vs, (q.stop - p.stop) * vs]
    return max(gaps)


def _distance(offsets: np.ndarray, voxel_size: np.ndarray) -> np.ndarray:
    """``distance_transform_edt``'s value for integer voxel offsets (rows)."""
    return np.sqrt(np.add.reduce((offsets.astype(np.float64) * voxel_size) ** 2, axis=1))


def _directed_dense(source: np.ndarray, target: np.ndarray, voxel_size: np.ndarray) -> float:
    """max over source voxels of the distance to the nearest target voxel (target non-empty)."""
    outside = source & ~target
    if not outside.any():
        return 0.0
    distance = ndimage.distance_transform_edt(~target, sampling=voxel_size)
    return float(distance[outside].max())


def _directed_tree(outside: np.ndarray, boundary: np.ndarray, voxel_size: np.ndarray) -> float:
    """max over the ``outside`` points of the distance to the nearest ``boundary`` point."""
    if outside.size == 0:
        return 0.0
    _, nearest = cKDTree(boundary * voxel_size).query(outside * voxel_size)
    return float(_distance(boundary[nearest] - outside, voxel_size).max())


class _Assignment:
    """Which prediction pieces make up B_g, and whether a voxel belongs to B_g."""

    def __init__(self, pieces: np.ndarray, piece_ids: np.ndarray):
        self.pieces = pieces
        self.piece_ids = np.asarray(piece_ids)
        self.boxes = label_boxes(pieces)
        numbers = np.array(sorted(self.boxes), dtype=np.int64)
        targets = self.piece_ids[numbers] if numbers.size else numbers
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]

    def pieces_of(self, g: int) -> np.ndarray:
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return self._numbers[lo:hi]

    def mask(self, box: Box, g: int) -> np.ndarray:
        return self.piece_ids[self.pieces[box]] == g

    def at(self, points: np.ndarray, g: int) -> np.ndarray:
        return self.piece_ids[self.pieces[tuple(points.T)]] == g


def _members(labels_at, points: np.ndarray, shape, g: int) -> np.ndarray:
    """For each point, whether it is in the set (``labels_at(points) == g``), out of bounds = no."""
    inside = np.all((points >= 0) & (points < np.asarray(shape)), axis=1)
    result = np.zeros(len(points), dtype=bool)
    result[inside] = labels_at(points[inside], g)
    return result


def _boundary(points: np.ndarray, labels_at, shape, g: int) -> np.ndarray:
    """The points of a set that have a 6-neighbour outside it."""
    on_boundary = np.zeros(len(points), dtype=bool)
    unit = np.eye(points.shape[1], dtype=points.dtype)
    for step in np.concatenate([unit, -unit]):
        on_boundary |= ~_members(labels_at, points + step, shape, g)
    return points[on_boundary]


def _hausdorff_sparse(truth, assignment: _Assignment, g: int, box_a: Box, parts: np.ndarray, vs: np.ndarray) -> float:
    truth_at = lambda p, i: truth[tuple(p.T)] == i  # noqa: E731
    points_a = np.argwhere(truth[box_a] == g) + _origin(box_a)
    points_b = np.concatenate(
        [np.argwhere(assignment.pieces[assignment.boxes[p]] == p) + _origin(assignment.boxes[p]) for p in parts]
    )
    a_outside_b = points_a[~assignment.at(points_a, g)]
    b_outside_a = points_b[~truth_at(points_b, g)]
    forward = _directed_tree(a_outside_b, _boundary(points_b, assignment.at, truth.shape, g), vs)
    backward = _directed_tree(b_outside_a, _boundary(points_a, truth_at, truth.shape, g), vs)
    return max(forward, backward)


def capped_hausdorff(truth: np.ndarray, pieces: np.ndarray, piece_ids, ids, voxel_size, cap: float) -> np.ndarray:
    """float32 ``d_g`` for each truth id in ``ids``; ``pieces`` labels the prediction's pieces
    1..n and ``piece_ids[p]`` is the id piece p is assigned to (``piece_ids[0] == 0``)."""
    vs = np.asarray(voxel_size, dtype=np.float64)[-truth.ndim :]
    boxes_a = label_boxes(truth)
    assignment = _Assignment(pieces, piece_ids)
    out = np.empty(len(ids), dtype=np.float32)
    for i, g in enumerate(int(x) for x in ids):
        parts = assignment.pieces_of(g)
        if parts.size == 0:
            out[i] = cap
            continue
        box_a, part_boxes = boxes_a[g], [assignment.boxes[int(p)] for p in parts]
        box_b = _union(part_boxes)
        if box_gap(box_a, box_b, vs) >= cap:
            out[i] = cap
            continue
        box = _union([box_a, box_b])
        if _volume(box) > SPARSE_BOX_FACTOR * (_volume(box_a) + sum(map(_volume, part_boxes))):
            d = _hausdorff_sparse(truth, assignment, g, box_a, parts, vs)
        else:
            in_a, in_b = truth[box] == g, assignment.mask(box, g)
            d = max(_directed_dense(in_a, in_b, vs), _directed_dense(in_b, in_a, vs))
        out[i] = min(d, cap)
    return out


def identity(labels: np.ndarray) -> np.ndarray:
    """``piece_ids`` for a label image used directly as its own pieces."""
    return np.arange(int(labels.max()) + 1 if labels.size else 1)


def capped_hausdorff_padded_roi(a: np.ndarray, b: np.ndarray, ids, voxel_size, cap: float) -> np.ndarray:
    """The reference's own algorithm on two label images (ROI = union box padded by
    ceil(cap / vs) + 2, two full transforms per id). Orders of magnitude slower; kept as the
    executable specification that tests and ``bench/`` compare the fast path against."""
    vs = np.asarray(voxel_size, dtype=np.float64)[-a.ndim :]
    pad = np.ceil(cap / vs).astype(int) + 2
    boxes_a, boxes_b = label_boxes(a), label_boxes(b)
    out = np.empty(len(ids), dtype=np.float32)
    for i, g in enumerate(int(x) for x in ids):
        box = _union([boxes_a[g], boxes_b.get(g, boxes_a[g])])
        roi = tuple(slice(max(0, s.start - p), min(n, s.stop + p)) for s, p, n in zip(box, pad, a.shape))
        in_a, in_b = a[roi] == g, b[roi] == g
        if not in_b.any():
            out[i] = cap
            continue
        fwd = ndimage.distance_transform_edt(~in_b, sampling=vs)[in_a].max()
        bwd = ndimage.distance_transform_edt(~in_a, sampling=vs)[in_b].max()
        out[i] = min(max(fwd, bwd), cap)
    return out
