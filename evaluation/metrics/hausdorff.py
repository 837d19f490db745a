"""Per-instance symmetric Hausdorff distance with a cap, on tight bounding boxes.

For every truth id g, ``d_g = min(max(h(A, B), h(B, A)), cap)`` with ``A = truth == g``,
``B`` the prediction voxels assigned to g, ``h(X, Y) = max_{x in X} min_{y in Y} |x - y|`` in
physical units, and ``d_g = cap`` when B is empty (CellMap ``optimized_hausdorff_distances``).
The prediction is given as *pieces* (connected components) and the id each piece is assigned
to, which is how matching produces it; B is the union of the pieces assigned to g.

The reference (``utils/eval_utils/distance.py``) computes two float64 distance transforms with
their feature transforms per instance, over the union of both boxes padded by the cap, which for
a 256^3 crop is nearly the whole crop, 476 times. Here:

- padding is never needed: every point of Y lies inside the union box, and the nearest Y voxel
  of an X voxel outside Y always has a 6-neighbour outside Y inside that box (the next voxel
  towards the X voxel), so the distance from X to the *boundary* voxels of Y inside the box is
  the exact distance to Y;
- a box-gap lower bound that reaches the cap decides ``d_g = cap`` without anything else, a
  direction whose X lies inside Y is 0, and a first direction at the cap decides the second;
- on a box of up to SCAN_BOX voxels a compiled scan (``_scan_farthest``) finds the farthest X
  voxel outside Y and its distance at once: the exact smallest value of the reference's
  arithmetic over all of Y, axis by axis, in a few steps per voxel (past SCAN_STEPS, e.g. a
  few lone voxels in a large empty box, it gives the box to the k-d tree below);
- on larger boxes the farthest X voxel outside Y is found among its candidates by a k-d tree
  over Y's boundary voxels: all of them when they are few (a jittered nucleus leaves a thin
  crescent); otherwise either a compiled multi-threaded anisotropic EDT (the ``edt`` package,
  float32, distances only, no feature transform) locates the few voxels within a relative 1e-4
  of its maximum, or, without ``edt``, one voxel per 4^3 cell bounds the rest (the distance is
  1-Lipschitz), so only cells that could beat the best value found are searched;
- an unmatched piece whose id collides with a distant truth id leaves the union box mostly
  empty: small sets are then gathered from their own tight boxes and compared point to boundary
  point (``_hausdorff_sparse``: compiled, in order of z gap; the k-d tree past POINT_STEPS);
- a union box above DENSE_BOX (nucleus-sized objects; a split or merged nucleus, or a distant
  piece sharing the truth's id, makes it crop-sized) is never built: each set is taken on its
  own box grown by a voxel (``_hausdorff_own``), the target's boundary as the union of its
  parts' boundaries (the nearest target voxel is always among them). Outside voxels near the
  target (the crescent a shifted nucleus leaves) are measured by ``nearest``'s exact local
  offset search, a few dozen probes each; far ones (the other half of a split nucleus) by a
  branch and bound over cells, coarse to fine, each cell's point measured by the k-d tree and
  its diagonal bounding the rest (``_farthest``): thousands of measurements, not one per voxel;
- a set whose own box is above BOX_VOXELS (a cell spanning the crop) is held as two bit-packed
  masks of the union box (one bit per voxel) and searched slab by slab (``_directed_packed``),
  in two passes when its outside voxels are too many to keep: cell representatives first, then
  only the cells that could beat them.

The reported distance is always computed from the integer voxel offset to the nearest boundary
voxel with ``distance_transform_edt``'s own arithmetic (per axis ``(delta * vs) ** 2`` summed in
axis order, square root, float64, then float32), so the results agree with the reference to the
bit; the float32 EDT only says where to look. (Two offsets at exactly the same real distance can
differ in the last float64 bit of that sum, with non-integer voxel sizes; the compiled searches
take the smaller, the tree and the reference's feature transform either. That bit reaches the
float32 result only at a float32 rounding boundary; no test case has met one.)
"""

import functools
import math

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba

try:  # a compiled, multi-threaded anisotropic EDT; without it the k-d tree does everything
    import edt as _edt
except ImportError:  # pragma: no cover - edt is a dependency
    _edt = None

Box = tuple[slice, ...]
# Boxes of up to this many voxels are scanned by the compiled kernel (two float64 arrays of the
# box), unless it would take more than SCAN_STEPS steps per voxel (lines of voxels far from the
# other set: a few single voxels in a large empty box); the k-d tree then takes over.
SCAN_BOX = 1 << 20
SCAN_STEPS = 16
DENSE_BOX = SCAN_BOX  # union boxes of up to this many voxels are searched whole (``_plan``)
POINT_STEPS = 256  # the compiled search among far-apart sets' points: steps per point before the tree
# A union box this many times larger than the boxes of its parts is searched with a k-d tree.
SPARSE_BOX_FACTOR = 32
# Outside voxels up to which all are looked up in the tree; beyond, candidates first.
DIRECT_QUERIES = 5_000
# The EDT locates candidates when the outside voxels are more than this share of the box.
EDT_SHARE = 1 / 24
# Candidates of the float32 EDT: squared distances within this relative margin of its maximum
# (its error is about 1e-7 relative; the margin is 500 times that).
EDT_MARGIN = 1e-4
CELL = 2  # edge of the cells of the Lipschitz bound of large boxes' two passes, in voxels
LEVELS = (16, 8, 4, 2)  # edges of the cells of the branch and bound over outside voxels, coarse to fine
FEW_POINTS = 256  # outside voxels the branch and bound measures one by one
THREADS = 1  # threads for the EDT and the tree queries (set by the caller for its task)
# A union box of more voxels is handled as bit-packed masks, slab by slab (a Voronoi-like cell
# can span a 1000^3 crop: its masks and their derived arrays would take gigabytes).
BOX_VOXELS = 8 << 20
SLAB_PLANES = 32  # planes unpacked at a time (a multiple of CELL)
KEEP_POINTS = 4 << 20  # outside voxels kept between the two passes over a large box
# The local search (``_local``) looks this far around each voxel (in the smallest spacing); it
# takes a set when it answers this share of an evenly spread sample of it of this many voxels.
LOCAL_RADIUS = 6.0
LOCAL_SHARE = 0.9
LOCAL_SAMPLE = 256


def label_boxes(labels: np.ndarray) -> dict[int, Box]:
    """Bounding box of every non-zero id in one pass."""
    if labels.size == 0 or not labels.any():
        return {}
    from scipy import ndimage  # here, not at import: importing it takes 0.4 s

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
    return math.prod(s.stop - s.start for s in box)


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


def inner_boundary(target: np.ndarray) -> np.ndarray:
    """The voxels of ``target`` with a 6-neighbour outside it inside the array (the array's own
    border counts as inside: valid for a box that holds both sets, see the module docstring)."""
    inner = target.copy()
    for axis in range(target.ndim):
        low = [slice(None)] * target.ndim
        high = [slice(None)] * target.ndim
        low[axis], high[axis] = slice(1, None), slice(None, -1)
        inner[tuple(low)] &= target[tuple(high)]
        inner[tuple(high)] &= target[tuple(low)]
    return target & ~inner


def coordinates(mask: np.ndarray) -> np.ndarray:
    """``np.argwhere(mask)`` (rows in raster order), an order of magnitude faster for 3-D masks."""
    flat = np.flatnonzero(mask)
    return np.stack(np.unravel_index(flat, mask.shape), axis=1) if mask.ndim > 1 else flat[:, None]


def _kd_tree(points: np.ndarray):
    """A k-d tree over ``points`` (unbalanced: built twice as fast, and queried faster on these
    surface-like point sets); scipy.spatial is imported on first use (0.2 s)."""
    from scipy.spatial import cKDTree

    return cKDTree(points, balanced_tree=False)


class _Nearest:
    """Exact distances from voxels to a set, as ``distance_transform_edt`` computes them: the
    nearest of the set's boundary voxels by a k-d tree, then the reference's arithmetic."""

    def __init__(self, boundary: np.ndarray, voxel_size: np.ndarray):
        self.boundary, self.vs = boundary, voxel_size
        self.tree = _kd_tree(boundary * voxel_size)

    def __call__(self, points: np.ndarray) -> np.ndarray:
        if len(points) == 0:
            return np.zeros(0)
        _, nearest = self.tree.query(points * self.vs, workers=THREADS)
        return _distance(self.boundary[nearest] - points, self.vs)


def _farthest(points: np.ndarray, nearest: _Nearest, cap: float) -> float:
    """max over ``points`` of the exact distance, or a value >= cap as soon as one is seen.
    Many points: branch and bound over cells, coarse to fine (LEVELS, in voxels): one point
    per cell is measured, and no voxel of the cell can be farther than that point's distance
    + the cell's diagonal (the distance is 1-Lipschitz), so only cells that could beat the best
    distance measured go on to the next level; the last survivors are measured one by one. A
    far set (half a nucleus away from the other half) is decided by a few thousand
    measurements instead of one per voxel; the work per level is a few passes over the
    survivors' coordinates, axis by axis."""
    if len(points) <= DIRECT_QUERIES:
        return float(nearest(points).max()) if len(points) else 0.0
    columns = [np.ascontiguousarray(points[:, axis]) for axis in range(points.shape[1])]
    chosen = np.arange(len(points))
    best = 0.0
    for cell in LEVELS:
        if len(chosen) <= FEW_POINTS:
            break
        cells = [column[chosen] // cell for column in columns]
        key = np.zeros(len(chosen), np.int64)
        for c in cells:
            low, extent = int(c.min()), int(c.max() - c.min()) + 1
            key *= extent
            key += c - low
        size = int(key.max()) + 1
        if size <= 8 * len(chosen) + 4096:  # a dense table of the cells: no sort
            rep = np.full(size, -1, np.int64)
            rep[key] = np.arange(len(chosen))
            occupied = np.flatnonzero(rep >= 0)
            measured = nearest(points[chosen[rep[occupied]]])
            at_cell = np.empty(size)
            at_cell[occupied] = measured
            at = at_cell[key]
        else:
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            measured = nearest(points[chosen[first]])
            at = measured[inverse.ravel()]
        best = max(best, float(measured.max()))
        if best >= cap:
            return best
        # margins for the rounding of the reference arithmetic
        diagonal = math.sqrt(float(np.sum(((cell - 1) * nearest.vs) ** 2)))
        chosen = chosen[at + diagonal * (1 + 1e-9) + 1e-9 * best > best]
    return max(best, float(nearest(points[chosen]).max())) if len(chosen) else best


@numba.njit(inline="always")
def _square(a):
    return a * a


@numba.njit(inline="always")
def _axis1_min(g, z, y, x, vy):
    """min over y' of ``g[z, y', x] + ((y - y') * vy) ** 2`` and the steps taken: outward
    from y while the term alone is below the best value (``g >= 0`` and rounding is
    monotone, so no farther y' can give less)."""
    ny = g.shape[1]
    best = g[z, y, x]
    d = 1
    while True:
        t = _square(d * vy)
        if t >= best or (y < d and y + d >= ny):
            return best, d
        if y >= d:
            best = min(best, g[z, y - d, x] + t)
        if y + d < ny:
            best = min(best, g[z, y + d, x] + t)
        d += 1


def _scan_farthest(source, target, vs, cap, budget):
    """``_scan_kernel`` with its work arrays (allocated here: a kernel that allocates arrays
    takes twice as long to compile, which the first run after an install pays)."""
    nz, ny, nx = target.shape
    work = np.empty((nz, ny, nx)), np.empty((nz, ny, nx)), np.empty((ny, nx), np.int64)
    return _scan_kernel(source, target, vs, cap, budget, *work)


@numba.njit(cache=True, nogil=True)
def _scan_kernel(source, target, vs, cap, budget, g, h, last):
    """max over the voxels of ``source & ~target`` of their distance to ``target`` (3-D,
    both on one box), or -1.0 after more than ``budget`` steps; a value >= cap as soon as
    one is found.

    The squared distance is the smallest over all target voxels of the reference's
    arithmetic ``((dz * vz) ** 2 + (dy * vy) ** 2) + (dx * vx) ** 2`` (module docstring),
    exactly: the first term from each column's nearest target voxel, then axis by axis the
    smallest sum of the previous axes' minimum and the new term, which is the smallest sum
    over all target voxels because ``fl(a + t)`` never decreases as ``a`` grows. Axis 1's
    minima are computed only where axis 2 reads them, and a voxel is dropped as soon as it
    cannot beat the largest distance found."""
    nz, ny, nx = target.shape
    for y in range(ny):
        for x in range(nx):
            last[y, x] = -1
    for z in range(nz):  # axis 0: down, then up
        for y in range(ny):
            for x in range(nx):
                if target[z, y, x]:
                    last[y, x] = z
                g[z, y, x] = math.inf if last[y, x] < 0 else _square((z - last[y, x]) * vs[0])
    for y in range(ny):
        for x in range(nx):
            last[y, x] = -1
    for z in range(nz - 1, -1, -1):
        for y in range(ny):
            for x in range(nx):
                if target[z, y, x]:
                    last[y, x] = z
                if last[y, x] >= 0:
                    g[z, y, x] = min(g[z, y, x], _square((last[y, x] - z) * vs[0]))
    for z in range(nz):  # axis 1's minima where axis 2 has asked for them
        for y in range(ny):
            for x in range(nx):
                h[z, y, x] = -1.0
    top, steps = 0.0, 0
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                if not source[z, y, x] or target[z, y, x]:
                    continue
                d = 0
                best = math.inf
                while best > top:
                    t = _square(d * vs[2])
                    if t >= best or (x < d and x + d >= nx):
                        break
                    for at in (x - d, x + d):
                        if 0 <= at < nx:
                            if h[z, y, at] < 0:
                                h[z, y, at], taken = _axis1_min(g, z, y, at, vs[1])
                                steps += taken
                            best = min(best, h[z, y, at] + t)
                    d += 1
                steps += d
                if steps > budget:
                    return -1.0
                if best > top:
                    top = best
                    if math.sqrt(top) >= cap:
                        return math.sqrt(top)
    return math.sqrt(top)


@numba.njit(cache=True, nogil=True)
def _points_farthest(outside, boundary, vs, cap, budget):
    """max over the ``outside`` points (rows) of the smallest reference-arithmetic distance
    to a ``boundary`` point (rows sorted by z), or -1.0 after more than ``budget`` steps; a
    value >= cap as soon as one is found. Each point visits the boundary points in order of
    their z gap, stopping when the gap's term alone reaches the best distance (no later
    point can be nearer) or the best falls to the largest distance found (the point
    cannot raise it)."""
    m = boundary.shape[0]
    top, steps = 0.0, 0
    for i in range(outside.shape[0]):
        z, y, x = outside[i, 0], outside[i, 1], outside[i, 2]
        lo, hi = 0, m
        while lo < hi:  # the first boundary point at or past z (no np.searchsorted: it doubles the compile time)
            mid = (lo + hi) // 2
            if boundary[mid, 0] < z:
                lo = mid + 1
            else:
                hi = mid
        lo = hi - 1
        best = math.inf
        while best > top and (lo >= 0 or hi < m):
            below = lo >= 0 and (hi >= m or z - boundary[lo, 0] <= boundary[hi, 0] - z)
            j = lo if below else hi
            t = _square((boundary[j, 0] - z) * vs[0])
            if t >= best:
                break
            best = min(best, (t + _square((boundary[j, 1] - y) * vs[1])) + _square((boundary[j, 2] - x) * vs[2]))
            if below:
                lo -= 1
            else:
                hi += 1
            steps += 1
        if steps > budget:
            return -1.0
        if best > top:
            top = best
            if math.sqrt(top) >= cap:
                return math.sqrt(top)
    return math.sqrt(top)


def _search(kernel, *args) -> float | None:
    """A compiled search's distance, or None without numba or where it spent its budget."""
    found = jit.run(kernel, lambda *_: -1.0, *args)
    return None if found < 0 else found


def _scanned(source: np.ndarray, target: np.ndarray, voxel_size: np.ndarray, cap: float) -> float | None:
    """``_scan_farthest``'s distance, or None where it does not apply or gives up."""
    if source.ndim != 3 or target.size > SCAN_BOX:
        return None
    vs = np.ascontiguousarray(voxel_size, np.float64)
    budget = int(SCAN_STEPS * target.size)
    return _search(_scan_farthest, np.ascontiguousarray(source), np.ascontiguousarray(target), vs, float(cap), budget)


def warm_up(background: bool = False) -> None:
    """Compile (or load from numba's cache) the two searches once, e.g. in a parent process
    before it forks a worker per task (``background``: see ``jit.warm_up``)."""

    def compile_all():
        _scan_farthest(np.ones((1, 1, 2), bool), np.eye(1, 2, dtype=bool)[None], np.ones(3), 1.0, 1)
        _points_farthest(np.zeros((1, 3), np.int64), np.ones((1, 3), np.int64), np.ones(3), 1.0, 1)

    jit.warm_up("Hausdorff searches", compile_all, [__file__], background=background)


def _directed_dense(source: np.ndarray, target: np.ndarray, voxel_size: np.ndarray, cap: float = math.inf) -> float:
    """max over source voxels of the distance to the nearest target voxel (target non-empty),
    both masks on one box that holds both sets."""
    scanned = _scanned(source, target, voxel_size, cap)
    if scanned is not None:
        return scanned
    outside = source & ~target
    count = int(np.count_nonzero(outside))
    if count == 0:
        return 0.0
    nearest = _Nearest(coordinates(inner_boundary(target)), voxel_size)
    if _edt is not None and count > DIRECT_QUERIES and count > EDT_SHARE * target.size:
        squared = _edt.edtsq(
            np.ascontiguousarray(~target, dtype=np.uint8),
            anisotropy=tuple(float(v) for v in voxel_size),
            black_border=False,
            parallel=THREADS,
        )
        top = float(squared[outside].max())
        if math.sqrt(top) * (1 - EDT_MARGIN) > cap:
            return math.sqrt(top)  # at the cap whatever the last bits
        outside &= squared >= np.float32(top * (1 - EDT_MARGIN))
        return float(nearest(coordinates(outside)).max())
    return _farthest(coordinates(outside), nearest, cap)


def _directed_points(outside: np.ndarray, boundary: np.ndarray, voxel_size: np.ndarray, cap: float) -> float:
    """max over the ``outside`` points of the distance to the nearest ``boundary`` point (a
    value >= cap may stand for any larger one): compiled, or by a k-d tree where the points lie
    too close in z for the compiled search (more than POINT_STEPS steps per point)."""
    if outside.size == 0:
        return 0.0
    if outside.shape[1] == 3:
        by_z = np.ascontiguousarray(boundary[np.argsort(boundary[:, 0], kind="stable")], np.int64)
        vs = np.ascontiguousarray(voxel_size, np.float64)
        budget = POINT_STEPS * (len(outside) + len(boundary))
        found = _search(_points_farthest, np.ascontiguousarray(outside, np.int64), by_z, vs, float(cap), budget)
        if found is not None:
            return found
    _, nearest = _kd_tree(boundary * voxel_size).query(outside * voxel_size, workers=THREADS)
    return float(_distance(boundary[nearest] - outside, voxel_size).max())


class ArraySets:
    """The two labellings ``capped_hausdorff_sets`` compares, as arrays: truth ids in ``truth``
    (boxes in ``truth_boxes``), prediction pieces 1..n in ``pieces`` (boxes in ``piece_boxes``)
    and the id each piece is assigned to in ``piece_ids``; boxes not given are found in one pass
    over the array. Any other provider of the same methods (boxes and masks read
    on demand) gives the same distances."""

    def __init__(self, truth: np.ndarray, pieces: np.ndarray, piece_ids, truth_boxes: dict | None = None, piece_boxes=None):
        self.truth, self.pieces, self.shape = truth, pieces, truth.shape
        self.piece_ids = np.asarray(piece_ids)
        self.truth_boxes = label_boxes(truth) if truth_boxes is None else truth_boxes
        self.boxes = label_boxes(pieces) if piece_boxes is None else piece_boxes
        numbers = np.array(sorted(self.boxes), dtype=np.int64)
        targets = self.piece_ids[numbers] if numbers.size else numbers
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]

    def parts(self, g: int) -> np.ndarray:
        """The pieces assigned to g (B_g is their union), ascending."""
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return self._numbers[lo:hi]

    def truth_box(self, g: int) -> Box:
        return self.truth_boxes[g]

    def part_box(self, p: int) -> Box:
        return self.boxes[int(p)]

    def truth_mask(self, box: Box, g: int) -> np.ndarray:
        return self.truth[box] == g

    def b_mask(self, box: Box, g: int, parts) -> np.ndarray:
        """The voxels of ``parts`` (pieces assigned to g) on ``box``: compared with each piece's
        number, which is cheaper than looking every voxel's id up."""
        view = self.pieces[box]
        out = view == parts[0]
        for p in parts[1:]:
            out |= view == p
        return out

    def points_a(self, g: int, box: Box) -> np.ndarray:
        return coordinates(self.truth[box] == g) + _origin(box)

    def points_b(self, g: int, parts) -> np.ndarray:
        return np.concatenate([coordinates(self.pieces[self.boxes[p]] == p) + _origin(self.boxes[p]) for p in parts])

    def packed_masks(self, requests) -> dict:
        """g -> bit-packed masks (A, B) on the box, for each (g, parts, box) requested."""
        return {g: (pack(self.truth_mask(box, g)), pack(self.b_mask(box, g, parts))) for g, parts, box in requests}

    def in_a(self, points: np.ndarray, g: int) -> np.ndarray:
        return self.truth[tuple(points.T)] == g

    def in_b(self, points: np.ndarray, g: int) -> np.ndarray:
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


def _hausdorff_sparse(sets, g: int, box_a: Box, parts, vs: np.ndarray, cap: float) -> float:
    points_a = sets.points_a(g, box_a)
    points_b = sets.points_b(g, parts)
    a_outside_b = points_a[~sets.in_b(points_a, g)]
    b_outside_a = points_b[~sets.in_a(points_b, g)]
    forward = _directed_points(a_outside_b, _boundary(points_b, sets.in_b, sets.shape, g), vs, cap)
    if forward >= cap:
        return forward
    return max(forward, _directed_points(b_outside_a, _boundary(points_a, sets.in_a, sets.shape, g), vs, cap))


def _plan(sets, g: int, vs: np.ndarray, cap: float):
    """How ``d_g`` is found: (value, None) when decided without looking at voxels, else
    (None, (parts, box_a, union box, mode)), mode one of

    - ``sparse``: small sets far apart (the union box mostly empty): point to point;
    - ``dense``: a union box of up to DENSE_BOX voxels (the compiled scan takes it whole);
    - ``own``: each set on its own box (up to BOX_VOXELS each), never on the union box, which
      a piece far from its truth (an unmatched component whose id is the truth's) makes huge;
    - ``packed``: sets too large for their own boxes: bit-packed masks of the union box."""
    parts = sets.parts(g)
    if len(parts) == 0:
        return cap, None
    box_a, part_boxes = sets.truth_box(g), [sets.part_box(p) for p in parts]
    box_b = _union(part_boxes)
    if box_gap(box_a, box_b, vs) >= cap:
        return cap, None
    box = _union([box_a, box_b])
    own = _volume(box_a) + sum(map(_volume, part_boxes))
    if _volume(box) > SPARSE_BOX_FACTOR * own and own <= SCAN_BOX:
        mode = "sparse"
    elif _volume(box) <= DENSE_BOX:
        mode = "dense"
    elif max(_volume(box_a), *map(_volume, part_boxes)) <= BOX_VOXELS:
        mode = "own"
    else:
        mode = "packed"
    return None, (parts, box_a, box, mode)


def _grown(box: Box, shape) -> Box:
    """``box`` one voxel larger on every side, within the crop: it holds every 6-neighbour of
    the set it bounds that the distances can need (module docstring)."""
    return tuple(slice(max(s.start - 1, 0), min(s.stop + 1, n)) for s, n in zip(box, shape))


def _within(mask: np.ndarray, box: Box, other: Box) -> np.ndarray:
    """``mask`` (on ``box``) on the box ``other``, False outside ``box``."""
    out = np.zeros(tuple(s.stop - s.start for s in other), bool)
    source, target = [], []
    for s, o in zip(box, other):
        lo, hi = max(s.start, o.start), min(s.stop, o.stop)
        if hi <= lo:
            return out
        source.append(slice(lo - s.start, hi - s.start))
        target.append(slice(lo - o.start, hi - o.start))
    out[tuple(target)] = mask[tuple(source)]
    return out


def _local(points: np.ndarray, box: Box, target_on, shape, vs: np.ndarray) -> np.ndarray | None:
    """The exact distance of each point (rows, all inside ``box``) to the nearest target voxel
    within LOCAL_RADIUS, -1 where there is none so near (``nearest``'s search: the integer
    offsets in order of their length in the reference's arithmetic, the first one that lands on
    the target is the nearest). ``target_on(region)``: the target's mask on a box of the crop
    (of ``shape``). None where the compiled search cannot run."""
    from evaluation.metrics import nearest

    table = nearest.offsets(tuple(float(v) for v in vs), LOCAL_RADIUS)
    reach = table.reach
    low = np.array([s.start - r for s, r in zip(box, reach)])
    grid = np.zeros(tuple(s.stop - s.start + 2 * r for s, r in zip(box, reach)), np.uint8)
    region = tuple(slice(max(int(lo), 0), min(s.stop + r, n)) for lo, s, r, n in zip(low, box, reach, shape))
    grid[tuple(slice(g.start - int(lo), g.stop - int(lo)) for g, lo in zip(region, low))] = target_on(region)
    strides = np.array(grid.strides, np.int64)
    out = np.empty(len(points))
    bases = np.ascontiguousarray((points - low) @ strides, np.int64)
    failed = []
    jit.run(
        nearest._search_any, lambda *_: failed.append(True), grid.reshape(-1), bases, table.steps @ strides, table.length, out
    )
    return None if failed else out


def _directed_own(points: np.ndarray, box: Box, target_on, shape, vs: np.ndarray, boundary, cap: float) -> float:
    """max over ``points`` (rows inside ``box``) of the distance to the target: by the local
    search when a sample of them lies near the target (a shifted nucleus leaves a thin crescent
    a voxel or three from it: a few dozen probes a point instead of a k-d tree query), else,
    and for the few beyond the search's reach, by ``_farthest`` over the k-d tree of the
    target's ``boundary()`` points."""
    if len(points) == 0:
        return 0.0
    sample = points[:: max(1, len(points) // LOCAL_SAMPLE)]
    probe = _local(sample, box, target_on, shape, vs)
    if probe is None or np.count_nonzero(probe < 0) > (1 - LOCAL_SHARE) * len(sample):
        return _farthest(points, _Nearest(boundary(), vs), cap)
    measured = _local(points, box, target_on, shape, vs)
    best = float(measured.max())
    if best >= cap:
        return best
    beyond = points[measured < 0]
    return max(best, _farthest(beyond, _Nearest(boundary(), vs), cap)) if len(beyond) else best


def _hausdorff_own(sets, g: int, box_a: Box, parts, vs: np.ndarray, cap: float) -> float:
    """``d_g`` from each set on its own box (grown by a voxel), never on their union: A's
    boundary and A minus B on A's box; each part's boundary (the boundary of B lies within
    theirs, and theirs within B: the nearest voxel of B is found among them) and the part minus
    A on the part's box; then the farthest outside voxel each way (``_directed_own``)."""
    shape = sets.shape
    at_a = _grown(box_a, shape)
    a = sets.truth_mask(at_a, g)
    outside = coordinates(a & ~sets.b_mask(at_a, g, parts)) + _origin(at_a)
    grown = [(p, _grown(sets.part_box(p), shape)) for p in parts]

    def b_boundary():
        return np.concatenate([coordinates(inner_boundary(sets.b_mask(at_p, g, [p]))) + _origin(at_p) for p, at_p in grown])

    d = _directed_own(outside, at_a, lambda region: sets.b_mask(region, g, parts), shape, vs, b_boundary, cap)
    del outside
    a_boundary = functools.cache(lambda: coordinates(inner_boundary(a)) + _origin(at_a))
    for p, at_p in grown:
        if d >= cap:
            break
        b = sets.b_mask(at_p, g, [p])
        inside_out = coordinates(b & ~_within(a, at_a, at_p)) + _origin(at_p)
        d = max(d, _directed_own(inside_out, at_p, lambda region: _within(a, at_a, region), shape, vs, a_boundary, cap))
    return d


def _one(sets, g: int, how, vs: np.ndarray, cap: float) -> float:
    """``d_g`` before its float32 rounding, as ``_plan`` planned it (not for large boxes:
    ``_packed_pair``)."""
    parts, box_a, box, mode = how
    if mode == "sparse":
        d = _hausdorff_sparse(sets, g, box_a, parts, vs, cap)
    elif mode == "own":
        d = _hausdorff_own(sets, g, box_a, parts, vs, cap)
    else:
        in_a, in_b = sets.truth_mask(box, g), sets.b_mask(box, g, parts)
        d = _directed_dense(in_a, in_b, vs, cap)
        if d < cap:
            d = max(d, _directed_dense(in_b, in_a, vs, cap))
    return min(d, cap)


def _unpack(packed: np.ndarray, z0: int, z1: int, width: int) -> np.ndarray:
    return np.unpackbits(packed[z0:z1], axis=-1, count=width).view(bool)


def _directed_packed(source: np.ndarray, target: np.ndarray, shape, vs: np.ndarray, cap: float) -> float:
    """``_directed_dense`` on bit-packed masks (planes packed along x) of a box of ``shape``,
    SLAB_PLANES planes at a time: the target's boundary (each slab with the planes next to it),
    then the outside voxels, all kept when at most KEEP_POINTS, else one per CELL^3 cell and a
    second pass over the cells that could beat the best of them (1-Lipschitz bound)."""
    depth, width = shape[0], shape[2]
    step = SLAB_PLANES
    found = []
    for z0 in range(0, depth, step):
        z1 = min(z0 + step, depth)
        lo, hi = max(z0 - 1, 0), min(z1 + 1, depth)
        edge = inner_boundary(_unpack(target, lo, hi, width))[z0 - lo : z0 - lo + (z1 - z0)]
        found.append(coordinates(edge) + np.array([z0, 0, 0]))
    boundary = np.concatenate(found)
    if len(boundary) == 0:  # the target fills the box: nothing is outside it
        return 0.0
    nearest = _Nearest(boundary, vs)
    del found, boundary

    def outside():
        for z0 in range(0, depth, step):
            z1 = min(z0 + step, depth)
            mask = _unpack(source, z0, z1, width) & ~_unpack(target, z0, z1, width)
            yield coordinates(mask) + np.array([z0, 0, 0])

    grid = tuple(-(-n // CELL) for n in shape)
    kept, reps, keys, total = [], [], [], 0
    for points in outside():
        if len(points) == 0:
            continue
        total += len(points)
        if kept is not None:
            kept.append(points)
            if total > KEEP_POINTS:
                kept = None
        cell = np.ravel_multi_index(tuple((points // CELL).T), grid)
        unique, first = np.unique(cell, return_index=True)
        reps.append(points[first])
        keys.append(unique)
    if total == 0:
        return 0.0
    if kept is not None:
        return _farthest(np.concatenate(kept), nearest, cap)
    at_reps = nearest(np.concatenate(reps))
    best = float(at_reps.max())
    if best >= cap:
        return best
    rho = math.sqrt(float(np.sum(((CELL - 1) * vs) ** 2)))
    open_cells = np.concatenate(keys)[at_reps + rho * (1 + 1e-9) > best]  # sorted: slabs in order, keys sorted in each
    for points in outside():
        if len(points):
            cell = np.ravel_multi_index(tuple((points // CELL).T), grid)
            chosen = points[np.isin(cell, open_cells, assume_unique=False)]
            if len(chosen):
                best = max(best, float(nearest(chosen).max()))
    return best


def _packed_pair(packed_a: np.ndarray, packed_b: np.ndarray, shape, vs: np.ndarray, cap: float) -> float:
    d = _directed_packed(packed_a, packed_b, shape, vs, cap)
    if d < cap:
        d = max(d, _directed_packed(packed_b, packed_a, shape, vs, cap))
    return min(d, cap)


def pack(mask: np.ndarray) -> np.ndarray:
    """A 3-D boolean mask as planes of bits packed along x (``_directed_packed``'s input)."""
    return np.packbits(mask, axis=-1)


def capped_hausdorff_sets(sets, ids, voxel_size, cap: float, threads: int = 1) -> np.ndarray:
    """float32 ``d_g`` for each truth id in ``ids``, the sets given by ``sets`` (``ArraySets``
    or a provider with the same methods, safe to call from ``threads`` threads at once: the
    instances are independent, and numpy, the k-d tree, the EDT and the zarr reader release the
    interpreter while they work)."""
    vs = np.asarray(voxel_size, dtype=np.float64)[-len(sets.shape) :]
    keys = [int(x) for x in ids]
    values, hows = [None] * len(keys), [None] * len(keys)
    large = []
    for i, g in enumerate(keys):
        values[i], hows[i] = _plan(sets, g, vs, cap)
        if hows[i] is not None and hows[i][3] == "packed":
            large.append((i, g, hows[i][0], hows[i][2]))
    # large boxes one at a time, their masks built in as few passes as their memory allows
    for batch in _batches(large):
        packed = sets.packed_masks([(g, parts, box) for _, g, parts, box in batch])
        for i, g, _, box in batch:
            values[i] = _packed_pair(*packed.pop(g), tuple(s.stop - s.start for s in box), vs, cap)
    # in raster order of their boxes: neighbours share the chunks the streamed sets decode
    rest = sorted((i for i, v in enumerate(values) if v is None), key=lambda i: [s.start for s in sets.truth_box(keys[i])])
    if threads > 1 and len(rest) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hausdorff") as pool:
            for i, value in zip(rest, pool.map(lambda i: _one(sets, keys[i], hows[i], vs, cap), rest)):
                values[i] = value
    else:
        for i in rest:
            values[i] = _one(sets, keys[i], hows[i], vs, cap)
    return np.array(values, dtype=np.float64).astype(np.float32) if values else np.empty(0, np.float32)


PACKED_BYTES = 256 << 20  # bit-packed masks built in one pass over the crop


def _batches(large):
    batch, size = [], 0
    for item in large:
        need = 2 * _volume(item[3]) // 8
        if batch and size + need > PACKED_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += need
    if batch:
        yield batch
