"""Metric primitives against hand-computed values and properties."""

import math

import cc3d
import numpy as np
import pytest
from helpers import whole_array
from helpers.hausdorff_reference import capped_hausdorff_padded_roi

from evaluation.metrics import binary
from evaluation.metrics.hausdorff import directed, planning, scans
from evaluation.metrics.hausdorff.boxes import box_gap, inner_boundary, label_boxes
from evaluation.metrics.matching import min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import binary_counts, contingency
from evaluation.metrics.voi import rand_voi


def test_contingency_counts_pairs_in_ascending_order():
    a = np.array([3, 3, 0, 1, 1, 1])
    b = np.array([0, 2, 2, 2, 2, 9])
    table = contingency(a, b)
    assert list(zip(table.a.tolist(), table.b.tolist(), table.count.tolist())) == [
        (0, 2, 1),
        (1, 2, 2),
        (1, 9, 1),
        (3, 0, 1),
        (3, 2, 1),
    ]
    only_a = contingency(a, b, where=a > 0)
    assert only_a.count.sum() == 5


def test_contingency_sparse_huge_ids_take_the_sorting_path():
    a = np.array([2**40, 2**40, 7], dtype=np.uint64)
    b = np.array([2**33, 1, 1], dtype=np.uint64)
    table = contingency(a, b)
    assert list(zip(table.a.tolist(), table.b.tolist(), table.count.tolist())) == [(7, 1, 1), (2**40, 1, 1), (2**40, 2**33, 1)]


def test_binary_scores_by_hand():
    counts = binary_counts(np.array([1, 1, 0, 0]) > 0, np.array([1, 0, 1, 0]) > 0)
    assert (counts.tp, counts.fp, counts.fn, counts.tn) == (1, 1, 1, 1)
    assert binary.iou(counts) == pytest.approx(1 / 3)
    assert binary.dice_as_scipy(counts) == pytest.approx(0.5)
    assert binary.accuracy(counts) == 0.5
    empty = binary_counts(np.zeros(4, bool), np.zeros(4, bool))
    assert binary.iou(empty) == 1.0 and math.isnan(binary.dice_as_scipy(empty))


def test_binary_scores_are_symmetric():
    rng = np.random.default_rng(1)
    t, p = rng.random(1000) > 0.6, rng.random(1000) > 0.3
    forward, backward = binary_counts(t, p), binary_counts(p, t)
    assert binary.iou(forward) == binary.iou(backward)
    assert binary.dice_as_scipy(forward) == binary.dice_as_scipy(backward)


def test_rand_voi_by_hand():
    # Foreground of the truth: pairs (1,1)x2, (1,2)x1, (2,2)x2; the truth-0 voxel is ignored.
    truth = np.array([1, 1, 1, 2, 2, 0])
    pred = np.array([1, 1, 2, 2, 2, 5])
    scores = rand_voi(contingency(truth, pred, where=truth > 0))
    h = lambda *p: -sum(x * math.log2(x) for x in p)  # noqa: E731
    h_ab, h_a, h_b = h(0.4, 0.2, 0.4), h(0.6, 0.4), h(0.4, 0.6)
    assert scores["rand_split"] == pytest.approx(9 / 13) and scores["rand_merge"] == pytest.approx(9 / 13)
    assert scores["voi_split"] == pytest.approx(h_ab - h_a, abs=1e-15)
    assert scores["voi_merge"] == pytest.approx(h_ab - h_b, abs=1e-15)
    assert scores["nvi_split"] == pytest.approx((h_ab - h_a) / h_ab)
    assert scores["nid"] == pytest.approx(1 - (h_a + h_b - h_ab) / max(h_a, h_b))


def test_rand_voi_of_empty_truth_is_undefined_but_voi_zero():
    scores = rand_voi(contingency(np.zeros(4, int), np.array([0, 1, 1, 0]), where=np.zeros(4, bool)))
    assert scores["voi_split"] == 0.0 and scores["voi_merge"] == 0.0
    assert all(math.isnan(scores[k]) for k in ("rand_split", "rand_merge", "nvi_split", "nvi_merge", "nid"))


def test_matching_prefers_more_matches_over_higher_iou():
    # GT1 overlaps P1 (0.5) and P2 (0.4); GT2 overlaps P1 (0.45). Two matches beat one better one.
    gt, pred = np.array([1, 1, 2]), np.array([1, 2, 1])
    iou = np.array([0.5, 0.4, 0.45], dtype=np.float32)
    assert min_cost_flow_matching(2, 2, gt, pred, iou, 1_000_000) == {2: 1, 1: 2}


def test_matching_picks_the_higher_iou_for_one_gt():
    mapping = min_cost_flow_matching(1, 2, np.array([1, 1]), np.array([1, 2]), np.array([0.2, 0.7], np.float32), 1_000_000)
    assert mapping == {2: 1}


def test_pair_iou_is_float32():
    iou = pair_iou32(np.array([1.0]), np.array([3.0]), np.array([1.0]))
    assert iou.dtype == np.float32 and iou[0] == np.float32(1 / 3)


def capped_hausdorff(a, b, ids, voxel_size, cap):
    """The fast path on two label images (each id of ``b`` its own piece)."""
    return whole_array.capped_hausdorff(a, b, whole_array.identity(b), ids, voxel_size, cap)


def _points(shape, *coordinates, value=1):
    volume = np.zeros(shape, np.uint32)
    for c in coordinates:
        volume[c] = value
    return volume


def test_hausdorff_of_two_voxels_is_their_distance():
    a = _points((1, 8, 8), (0, 0, 0))
    b = _points((1, 8, 8), (0, 3, 4))
    assert capped_hausdorff(a, b, [1], (1, 1, 1), cap=100.0)[0] == 5.0
    assert capped_hausdorff(a, b, [1], (1, 2, 2), cap=100.0)[0] == 10.0
    assert capped_hausdorff(a, b, [1], (1, 1, 1), cap=3.0)[0] == 3.0
    assert capped_hausdorff(a, np.zeros_like(b), [1], (1, 1, 1), cap=7.5)[0] == 7.5


def test_hausdorff_maximum_can_lie_inside_a_region():
    """A filled square against its own outline: the farthest point is the centre."""
    a = np.zeros((1, 7, 7), np.uint8)
    a[0, 1:6, 1:6] = 1
    b = a.copy()
    b[0, 2:5, 2:5] = 0
    assert capped_hausdorff(a, b, [1], (1, 1, 1), cap=100.0)[0] == 2.0


def test_hausdorff_is_symmetric_and_stored_as_float32():
    a = _points((4, 9, 9), (0, 0, 0), (3, 8, 1))
    b = _points((4, 9, 9), (1, 4, 4))
    forward = capped_hausdorff(a, b, [1], (10, 4, 4), cap=1e3)
    assert forward.dtype == np.float32
    assert forward[0] == capped_hausdorff(b, a, [1], (10, 4, 4), cap=1e3)[0]
    # the farther A voxel (3, 8, 1) is (2, 4, 3) voxels = (20, 16, 12) nm from B
    assert forward[0] == np.float32(math.sqrt(20**2 + 16**2 + 12**2))


def _blobs(rng, shape, count, radius):
    volume = np.zeros(shape, np.uint32)
    grid = np.indices(shape)
    for label in range(1, count + 1):
        centre = [rng.integers(0, s) for s in shape]
        r = rng.uniform(1, radius, size=3)
        inside = sum(((g - c) / rr) ** 2 for g, c, rr in zip(grid, centre, r)) <= 1
        volume[inside] = label
    return volume


@pytest.mark.parametrize("seed", range(4))
def test_fast_hausdorff_equals_the_reference_algorithm(seed):
    """Tight boxes + box-gap shortcut give bit-identical float32 values to the padded-ROI
    algorithm of the reference, including colliding ids and far-apart pairs."""
    rng = np.random.default_rng(seed)
    shape = (20, 28, 24)
    a, b = _blobs(rng, shape, 9, 6), _blobs(rng, shape, 11, 6)
    ids = np.unique(a)[1:]
    vs = [(8, 8, 8), (10, 4, 4), (3.24, 3.24, 2.5), (1, 1, 1)][seed]
    cap = min(v * s for v, s in zip(vs, shape)) / 2
    fast = capped_hausdorff(a, b, ids, vs, cap)
    slow = capped_hausdorff_padded_roi(a, b, ids, vs, cap)
    assert fast.tobytes() == slow.tobytes()
    # pieces assigned to random truth ids, several pieces per id (as after matching)
    pieces, n = cc3d.connected_components(b, return_N=True)
    piece_ids = np.concatenate([[0], rng.integers(1, 10, size=n)])
    fast = whole_array.capped_hausdorff(a, pieces, piece_ids, ids, vs, cap)
    assert fast.tobytes() == capped_hausdorff_padded_roi(a, piece_ids[pieces], ids, vs, cap).tobytes()


def _farthest_by_brute_force(source, target, vs):
    """max over source voxels outside target of the smallest reference-arithmetic distance
    (``distance_transform_edt``'s formula) to any target voxel, every pair evaluated."""
    outside, inside = np.argwhere(source & ~target), np.argwhere(target)
    if len(outside) == 0:
        return 0.0
    offsets = (outside[:, None, :] - inside[None, :, :]).reshape(-1, 3)
    squared = np.add.reduce((offsets.astype(np.float64) * np.asarray(vs, np.float64)) ** 2, axis=1)
    return float(np.sqrt(squared.reshape(len(outside), len(inside)).min(axis=1)).max())


@pytest.mark.parametrize("seed", range(40))
def test_compiled_scan_is_the_smallest_reference_distance_exactly(seed):
    """The compiled scan's squared distance is the float minimum, over all target voxels, of
    ((dz vz)^2 + (dy vy)^2) + (dx vx)^2 in that order: equal to every pair evaluated, to the bit,
    for random sets and anisotropic non-integer voxel sizes (where rounding orders matter)."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.integers(1, 11)) for _ in range(3))
    vs = np.array([(8.0, 8.0, 8.0), (1.74, 2.0, 2.0), (3.0, 1.0, 7.5), (0.3, 0.7, 0.11)][seed % 4])
    source = rng.random(shape) < rng.uniform(0.05, 0.6)
    target = rng.random(shape) < rng.uniform(0.01, 0.3)
    target.flat[rng.integers(0, target.size)] = True
    expected = _farthest_by_brute_force(source, target, vs)
    assert scans._scan_farthest(source, target, vs, math.inf, 10**9) == expected
    # with a cap: stops at the first distance >= cap, never below a larger true maximum
    cap = expected / 2 if expected else 1.0
    found = scans._scan_farthest(source, target, vs, cap, 10**9)
    assert found == expected if expected < cap else found >= cap


@pytest.mark.parametrize("seed", range(30))
def test_branch_and_bound_finds_the_farthest_voxel_exactly(seed, monkeypatch):
    """``farthest`` over cells coarse to fine (each cell's point measured, the cell's diagonal
    bounding the rest) gives the largest smallest distance to the bit, for sets far apart or
    overlapping, in any voxel size; with a cap, a value at or above it."""
    monkeypatch.setattr(directed, "DIRECT_QUERIES", 0)
    monkeypatch.setattr(directed, "FEW_POINTS", seed % 5)
    monkeypatch.setattr(directed, "LEVELS", ((16, 8, 4, 2), (5, 3, 2), (7,), (4, 4, 1))[seed % 4])
    rng = np.random.default_rng(seed)
    vs = np.array([(8.0, 8.0, 8.0), (1.74, 2.0, 2.0), (3.0, 1.0, 7.5), (0.3, 0.7, 0.11)][seed % 4])
    shape = tuple(int(n) for n in rng.integers(12, 40, 3))
    grid = np.indices(shape)
    source, target = np.zeros(shape, bool), np.zeros(shape, bool)
    for mask, count in ((source, rng.integers(1, 4)), (target, rng.integers(1, 4))):
        for _ in range(count):
            centre, radii = rng.uniform(0, shape), rng.uniform(1, 9, 3)
            mask |= sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1
    if not target.any():
        target[0, 0, 0] = True
    expected = _farthest_by_brute_force(source, target, vs)
    nearest = directed.Nearest(np.argwhere(inner_boundary(target)), vs)
    points = np.argwhere(source & ~target)
    assert directed.farthest(points, nearest, math.inf) == expected
    cap = expected / 2 if expected else 1.0
    found = directed.farthest(points, nearest, cap)
    assert found == expected if expected < cap else found >= cap


def test_compiled_scan_gives_up_past_its_budget_and_the_tree_answers():
    """A lone target voxel in a corner: every line of the box is far from it, the scan exceeds
    its budget of steps per voxel and the k-d tree gives the same distance."""
    target = np.zeros((40, 40, 40), bool)
    target[0, 0, 0] = True
    source = ~target
    vs = np.array([1.74, 2.0, 2.0])
    assert scans._scan_farthest(source, target, vs, math.inf, scans.SCAN_STEPS * target.size) == -1.0
    assert scans.scanned(source, target, vs, math.inf) is None
    assert directed.directed_dense(source, target, vs) == _farthest_by_brute_force(source, target, vs)


@pytest.mark.parametrize("seed", range(20))
def test_compiled_point_search_is_the_smallest_reference_distance_exactly(seed):
    """Between point sets (rows; the boundary sorted by z, as the caller sorts it): the largest
    of the smallest reference-arithmetic distances, to the bit, as every pair evaluated."""
    rng = np.random.default_rng(seed)
    vs = np.array([(8.0, 8.0, 8.0), (1.74, 2.0, 2.0), (3.0, 1.0, 7.5), (0.3, 0.7, 0.11)][seed % 4])
    outside = rng.integers(0, 30, size=(int(rng.integers(1, 200)), 3))
    boundary = rng.integers(0, 30, size=(int(rng.integers(1, 200)), 3))
    boundary = boundary[np.argsort(boundary[:, 0], kind="stable")]
    offsets = (outside[:, None, :] - boundary[None, :, :]).reshape(-1, 3).astype(np.float64)
    squared = np.add.reduce((offsets * vs) ** 2, axis=1).reshape(len(outside), len(boundary))
    expected = float(np.sqrt(squared.min(axis=1)).max())
    assert scans.points_farthest(outside, boundary, vs, math.inf, 10**9) == expected
    assert scans.points_farthest(outside, boundary, vs, math.inf, 0) == -1.0


def test_box_gap_is_a_lower_bound():
    a = _points((1, 1, 20), (0, 0, 0))
    b = _points((1, 1, 20), (0, 0, 15))
    boxes_a, boxes_b = label_boxes(a), label_boxes(b)
    assert box_gap(boxes_a[1], boxes_b[1], np.array([1.0, 1.0, 2.0])) == 30.0


@pytest.mark.parametrize("search", ["compiled", "tree"])
@pytest.mark.parametrize("vs", [(8, 8, 8), (10, 4, 4), (3.24, 3.24, 2.5)])
def test_far_apart_pairs_take_the_point_path_with_identical_values(vs, search, monkeypatch):
    """Small sets far apart in a large volume (the colliding-id case) are measured between
    their points (compiled, or by a k-d tree past the compiled search's budget) instead of over
    their huge union box: same float32 bits."""
    if search == "tree":
        monkeypatch.setattr(directed, "POINT_STEPS", 0)
    calls = []
    sparse = planning.hausdorff_sparse
    monkeypatch.setattr(planning, "hausdorff_sparse", lambda *args: calls.append(1) or sparse(*args))
    rng = np.random.default_rng(7)
    a, b = np.zeros((60, 70, 80), np.uint16), np.zeros((60, 70, 80), np.uint16)
    for g in range(1, 6):
        z, y, x = rng.integers(0, 10, 3)
        a[z : z + 4, y : y + 3, x : x + 5] = g
        b[z + 1 : z + 3, y : y + 4, x + 1 : x + 6] = g
        z, y, x = rng.integers(45, 55, 3)
        b[z : z + 3, y : y + 2, x : x + 4] = g  # a second, distant part with the same id
    ids = np.arange(1, 6)
    cap = 1e6
    pieces, n = cc3d.connected_components(b, return_N=True)  # each id: a near and a distant piece
    piece_ids = np.zeros(n + 1, np.int64)
    piece_ids[pieces.ravel()] = b.ravel()
    fast = whole_array.capped_hausdorff(a, pieces, piece_ids, ids, vs, cap)
    assert fast.tobytes() == capped_hausdorff_padded_roi(a, b, ids, vs, cap).tobytes()
    assert len(calls) == 5
