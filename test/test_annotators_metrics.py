"""The annotators suite's building blocks against independently computed values: brute-force
point distances, scikit-image dilation, a plain EM implementation of STAPLE written from the
conformance SPEC (section 4), hand-counted boundaries, and the statistics module."""

import math
import statistics

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from skimage import morphology

from evaluation.metrics.staple import staple
from evaluation.metrics.surface import PointSet, distances, surface_points
from evaluation.suites.annotators.aggregate import column_stats
from evaluation.suites.annotators.masks import dilate, footprint
from evaluation.suites.annotators.scoring import Settings, score_image

TOOL = Settings(staple_threshold=0.5, surface_distance="all_pixels")  # the tool's own settings


def _blobs(rng, shape, count=3, p=0.02):
    """Random sparse seeds grown into blobs: masks with several components and holes."""
    masks = []
    for _ in range(count):
        seeds = rng.random(shape) < p
        masks.append(
            morphology.dilation(seeds.reshape(-1, *shape[-2:]), np.ones((1, 3, 3), bool)).reshape(shape).astype(np.uint8)
        )
    return masks


def _brute(a: np.ndarray, b: np.ndarray):
    pa, pb = np.argwhere(a), np.argwhere(b)
    d = cdist(pa, pb)
    ab, ba = d.min(axis=1), d.min(axis=0)
    return max(ab.max(), ba.max()), (ab.mean() + ba.mean()) / 2, (ab.sum() + ba.sum()) / (ab.size + ba.size)


@pytest.mark.parametrize("shape", [(1, 40, 50), (5, 20, 24)])
def test_distances_equal_brute_force_nearest_points(shape):
    rng = np.random.default_rng(7)
    a, b = _blobs(rng, shape, count=2)
    for surface in ("all_pixels", "boundary"):
        got = distances(PointSet.of(a, surface), PointSet.of(b, surface))
        hd, mean_of_means, pooled = _brute(surface_points(a, surface), surface_points(b, surface))
        assert got.hausdorff == hd
        assert got.mean_of_means == pytest.approx(mean_of_means, rel=1e-12)
        assert got.pooled == pytest.approx(pooled, rel=1e-12)


def test_score_image_distances_equal_brute_force():
    """score_image's distances (KD-trees of boundaries, zero inside) against all point pairs."""
    shape = (1, 64, 64)
    masks = [np.zeros(shape, np.uint8) for _ in range(3)]
    for m, (r, c) in zip(masks, [(20, 22), (21, 24), (19, 21)]):
        m[0, r : r + 12, c : c + 9] = 1
    model = np.zeros(shape, np.uint8)
    model[0, 23:33, 25:40] = 1
    model[0, 50, 5] = 1  # a far false positive: large distances
    row = score_image(dict(zip(("A0", "A1", "A2"), masks)), model, TOOL)
    for name, mask in zip(("A0", "A1", "A2"), masks):
        hd, msd, _ = _brute(mask, model)
        assert row[f"{name}_hausdorff"] == hd
        assert row[f"{name}_msd"] == pytest.approx(msd, rel=1e-12)
    pairs = [_brute(masks[i], masks[j]) for i in range(3) for j in range(i + 1, 3)]
    assert row["annotators_agree_hausdorff"] == pytest.approx(np.mean([p[0] for p in pairs]), rel=1e-12)


def test_boundary_of_a_square_and_a_border_pixel():
    mask = np.zeros((1, 8, 8), np.uint8)
    mask[0, 2:6, 2:6] = 1  # 16 pixels, 4 interior
    mask[0, 0, 7] = 1  # alone on the image border: boundary
    points = surface_points(mask, "boundary")
    assert int(points.sum()) == 12 + 1
    assert not points[0, 3, 3] and points[0, 2, 3] and points[0, 0, 7]
    assert np.array_equal(surface_points(mask[0], "boundary"), points[0])  # one slice = the 2-D image
    assert np.array_equal(surface_points(mask, "all_pixels"), mask.astype(bool))


@pytest.mark.parametrize(("radius", "shape"), [(3, "disk"), (1, "square"), (2, "disk")])
def test_dilation_equals_scikit_image_slice_by_slice(radius, shape):
    rng = np.random.default_rng(radius)
    mask = (rng.random((3, 30, 33)) < 0.01).astype(np.uint8)
    mask[1, 0, 0] = mask[2, 29, 32] = 1  # corners: the border handling matters
    element = morphology.disk(radius) if shape == "disk" else np.ones((2 * radius + 1,) * 2, np.uint8)
    expected = np.stack([morphology.dilation(s, footprint=element) for s in mask])
    assert np.array_equal(dilate(mask, footprint(radius, shape)), expected)


def _staple_em(raters, iterations=100):
    """SPEC section 4, literally: scanline-order sums in float64."""
    d = np.stack([r.ravel() == 1 for r in raters])
    w = d.mean(axis=0)
    g = w.mean()
    p = q = None
    for it in range(iterations):
        p_new = np.array([w[di].sum() / w.sum() for di in d])
        q_new = np.array([(1 - w[~di]).sum() / (1 - w).sum() for di in d])
        alpha = np.prod(np.where(d, p_new[:, None], 1 - p_new[:, None]), axis=0)
        beta = np.prod(np.where(d, 1 - q_new[:, None], q_new[:, None]), axis=0)
        w = g * alpha / (g * alpha + (1 - g) * beta)
        if it > 0 and np.all((p_new - p) ** 2 <= 1e-14) and np.all((q_new - q) ** 2 <= 1e-14):
            p, q = p_new, q_new
            break
        p, q = p_new, q_new
    return w.reshape(raters[0].shape), p, q, it


def test_staple_equals_the_em_of_the_spec():
    rng = np.random.default_rng(11)
    truth = _blobs(rng, (1, 48, 48), count=1, p=0.03)[0]
    raters = [truth.copy() for _ in range(4)]
    for k, r in enumerate(raters):  # each rater flips a different number of pixels
        flip = rng.random(r.shape) < 0.01 * (k + 1)
        r[flip] = 1 - r[flip]
    got = staple(raters)
    w, p, q, iterations = _staple_em(raters)
    assert got.iterations == iterations
    assert got.sensitivity == pytest.approx(list(p), rel=1e-9)
    assert got.specificity == pytest.approx(list(q), rel=1e-9)
    assert np.allclose(got.probability, w, rtol=1e-9, atol=1e-12)


def test_staple_with_an_empty_and_with_identical_raters():
    mask = np.zeros((1, 16, 16), np.uint8)
    mask[0, 4:9, 3:12] = 1
    empty = staple([mask, np.zeros_like(mask), mask])
    assert empty.sensitivity[1] == 0.0 and empty.specificity[1] == 1.0
    same = staple([mask, mask, mask])
    assert same.sensitivity == [1.0] * 3 and same.specificity == [1.0] * 3
    assert np.array_equal(same.probability > 0.5, mask.astype(bool))


def test_stack_of_identical_slices_scores_like_one_slice():
    """Distances are 3-D in a stack; copies of one slice have the same nearest points."""
    rng = np.random.default_rng(5)
    masks = _blobs(rng, (1, 32, 32), count=4, p=0.015)
    one = score_image(dict(zip("ABC", masks[:3])), masks[3], TOOL)
    two = score_image({k: np.concatenate([m, m]) for k, m in zip("ABC", masks[:3])}, np.concatenate([masks[3]] * 2), TOOL)
    for key, value in one.items():
        if key.endswith(("_jaccard", "_dice", "_hausdorff", "_msd")) or key == "counts" or key == "Model_count":
            assert two[key] == value or two[key] == pytest.approx(value, rel=1e-12), key
    assert two["staple_fg_pixels"] == 2 * one["staple_fg_pixels"]


def test_all_annotators_and_model_empty():
    empty = np.zeros((1, 10, 10), np.uint8)
    row = score_image({"A": empty, "B": empty}, empty, TOOL)
    assert row["A_jaccard"] == row["Staple_jaccard"] == row["annotators_agree_jaccard"] == 1.0
    assert row["A_hausdorff"] == row["annotators_model_agree_msd"] == 0.0
    assert math.isnan(row["A_sensivity"]) and math.isnan(row["B_specificity"])  # STAPLE of nothing
    assert row["staple_fg_pixels"] == 0


def test_column_stats_skip_missing_values():
    values = [0.25, None, 1.5, math.nan, 3.0]
    present = [0.25, 1.5, 3.0]
    got = column_stats(values)
    assert got["mean"] == pytest.approx(statistics.fmean(present), rel=1e-15)
    assert got["std"] == pytest.approx(statistics.stdev(present), rel=1e-12)
    assert got["variance"] == pytest.approx(statistics.variance(present), rel=1e-12)
    assert (got["min"], got["max"]) == (0.25, 3.0)
    assert math.isnan(column_stats([2.0])["std"]) and all(math.isnan(v) for v in column_stats([None]).values())
