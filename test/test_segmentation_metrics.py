"""The segmentation suite's building blocks against independent computations, and the
properties its definitions must have: hand-computed small cases, symmetry where a definition
is symmetric, invariance to how classes are numbered."""

import math

import numpy as np
import pytest
from helpers import whole_array
from scipy import ndimage

from evaluation.metrics import grouped, surfels
from evaluation.metrics.nearest import PointSet, boundary, edge_points, offset_length, offsets
from evaluation.metrics.nearest import distances as nearest_distances
from evaluation.suites.segmentation import distances, instances, overlap, shape
from evaluation.suites.segmentation.surfaces import Box, surfel_surfaces, voxel_surfaces

SPACINGS = [(1.0, 1.0, 1.0), (2.5, 0.8, 0.8), (0.7, 1.3, 2.0)]


def blobs(rng, shape, density, grow):
    return ndimage.binary_dilation(rng.random(shape) < density, iterations=grow)


def point_set(marks: np.ndarray, spacing) -> PointSet:
    """Every non-zero element of ``marks`` as a point."""
    reach = offsets(tuple(float(s) for s in spacing)).reach
    grid = np.pad(marks, [(r, r) for r in reach])
    return PointSet.on(grid, np.flatnonzero(grid), reach)


def nearest(source_mask, target, spacing, source_labels=None):
    source = point_set(source_mask.astype(np.int64) if source_labels is None else source_labels, spacing)
    return nearest_distances(source, point_set(target, spacing), spacing, labelled=source_labels is not None)


# --------------------------------------------------------------------------------------------
# Kernels


@pytest.mark.parametrize("spacing", SPACINGS + [(1.5, 0.5), (1.0, 1.0)])
def test_nearest_equals_the_exact_distance_transform(spacing):
    """Within the search radius and beyond it (the KD-tree path)."""
    rng = np.random.default_rng(len(spacing) * 10 + int(spacing[0] * 10))
    shape = (18, 40, 33)[-len(spacing) :] if len(spacing) == 3 else (70, 64)
    for _ in range(4):
        source, target = blobs(rng, shape, 0.002, 3), blobs(rng, shape, 0.001, 2)
        expected = ndimage.distance_transform_edt(~target, sampling=spacing)[source]
        # Equal up to the last bit of ties: points at the same true distance along different
        # offsets ((2, 3, 2) and (2, 2, 3) steps of spacing (2.5, .8, .8)) sum their squares in
        # another order, and scipy's feature transform may pick the other one.
        np.testing.assert_allclose(nearest(source, target.astype(np.uint8), spacing), expected, rtol=1e-15, atol=0)


def test_labelled_nearest_only_accepts_the_same_label():
    rng = np.random.default_rng(3)
    target = ndimage.label(blobs(rng, (20, 30, 30), 0.003, 2))[0]
    sources = np.zeros(target.shape, np.int64)
    sources.reshape(-1)[::37] = rng.integers(1, target.max() + 2, sources[::1].size)[: sources.reshape(-1)[::37].size]
    found = nearest(None, target, (2.0, 1.0, 0.5), source_labels=sources)
    points, labels = np.argwhere(sources), sources[sources != 0]
    for label in np.unique(labels):
        chosen = labels == label
        if label > target.max():  # no target point of that label
            assert np.isinf(found[chosen]).all()
        else:
            expected = ndimage.distance_transform_edt(target != label, sampling=(2.0, 1.0, 0.5))[tuple(points[chosen].T)]
            np.testing.assert_allclose(found[chosen], expected, rtol=1e-15, atol=0)


def test_boundary_is_the_mask_minus_its_face_erosion():
    rng = np.random.default_rng(5)
    for size in ((9, 11, 7), (15, 12)):
        mask = rng.random(size) < 0.6
        assert np.array_equal(boundary(mask), mask & ~ndimage.binary_erosion(mask))
        labels = rng.integers(0, 4, size)
        expected = np.zeros(size, bool)
        for label in range(1, 4):
            expected |= (labels == label) & ~ndimage.binary_erosion(labels == label)
        assert np.array_equal(boundary(labels), expected)
        points = edge_points(labels, (1.0,) * labels.ndim)
        assert np.array_equal(points.coords(), np.argwhere(expected)) and np.array_equal(points.marks, labels[expected])


def test_offset_length_is_the_distance_transform_arithmetic():
    steps = np.array([[3, 4, 0], [0, 0, 5], [1, -1, 2]])
    assert offset_length(steps, (1.0, 1.0, 1.0)).tolist() == [5.0, 5.0, math.sqrt(6.0)]


@pytest.mark.parametrize("percent", [0, 5, 50, 95, 99.5, 100])
def test_grouped_percentile_is_numpys_to_the_bit(percent):
    rng = np.random.default_rng(int(percent * 10))
    groups = rng.integers(0, 40, 3000)
    values = np.round(rng.random(3000) * 20, 1) * rng.choice([1.0, math.sqrt(2)], 3000)
    ids, starts, counts, ordered = whole_array.sort_groups(groups, values)
    found = grouped.percentile_linear(ordered, starts, counts, percent)
    assert found.tolist() == [np.percentile(values[groups == g], percent) for g in ids]


def test_float32_quantile_interpolates_in_float32():
    values = np.array([1.0, 2.0, 4.0, 8.0], np.float64)
    found = grouped.quantile_float32(values, np.array([0]), np.array([4]), 0.95)[0]
    rank = np.float32(0.95) * np.float32(3)
    assert found == np.float32(4.0) + (rank - np.float32(2)) * np.float32(4.0) or abs(found - 7.4) < 1e-5
    assert found.dtype == np.float32


def test_surfel_areas_of_complementary_codes_agree_and_scale_with_spacing():
    unit, scaled = surfels.area_table((1.0, 1.0, 1.0)), surfels.area_table((2.0, 2.0, 2.0))
    assert np.allclose(unit, unit[::-1], rtol=0, atol=1e-15)  # code c and 255 - c
    assert np.allclose(scaled, 4 * unit, rtol=1e-15)
    assert unit[0b00000001] == pytest.approx(math.sqrt(3) / 8)  # one corner cut: a triangle of legs 1/2
    assert unit[0b00001111] == pytest.approx(1.0)  # half the cube: a unit square
    assert surfels.area_table((1.5, 0.5))[0b0011] == 0.5


# --------------------------------------------------------------------------------------------
# Hand-computed small cases


def two_points(distance_axis: int = 1, gap: int = 5, shape=(32, 32)):
    ref, pred = np.zeros(shape, bool), np.zeros(shape, bool)
    ref[10, 10] = True
    position = [10, 10]
    position[distance_axis] += gap
    pred[tuple(position)] = True
    return ref, pred


def test_two_single_pixels_five_apart():
    ref, pred = two_points()
    box = Box.of(ref, pred, (1.0, 1.0))
    voxels = voxel_surfaces(box)
    for reducer in (distances.panoptica, distances.metricsreloaded):
        found = reducer(voxels, [95], [1.0, 5.0], (1.0, 1.0))
        assert (found["hd"], found["hd95"], found["assd"], found["masd"]) == (5.0, 5.0, 5.0, 5.0)
        assert (found["nsd_1"], found["nsd_5"]) == (0.0, 1.0)
    assert overlap.metricsreloaded(0, 1, 1, 1022, [1])["dice"] == 0.0
    corners = distances.deepmind(surfel_surfaces(box, surfels.area_table((1.0, 1.0))), [95], [5.0], (1.0, 1.0))
    assert corners["hd"] == 5.0 and corners["surface_ref"] == 4  # the 4 corners of a pixel


def test_disk_overlap_counts():
    ref = np.zeros((20, 20), bool)
    ref[5:15, 5:15] = True
    pred = np.roll(ref, 2, axis=1)
    tp, fp, fn = 80, 20, 20
    assert overlap.plain(tp, fp, fn, 400 - 120, [1])["dice"] == 0.8
    assert overlap.panoptica(tp, fp, fn, 280, [1])["iou"] == 80 / 120
    found = distances.metricsreloaded(voxel_surfaces(Box.of(ref, pred, (1.0, 1.0))), [100], [2.0], (1.0, 1.0))
    assert found["hd"] == found["hd100"] == 2.0 and found["nsd_2"] == 1.0


def test_empty_conventions_per_library():
    empty = voxel_surfaces(Box.of(np.zeros((5, 5), bool), np.zeros((5, 5), bool), (1.0, 1.0)))
    assert distances.metricsreloaded(empty, [95], [1.0], (1.0, 1.0))["hd"] == 0.0
    assert distances.metricsreloaded(empty, [95], [1.0], (1.0, 1.0))["nsd_1"] == 1.0
    assert distances.panoptica(empty, [95], [1.0], (1.0, 1.0))["hd"] is None
    assert math.isnan(distances.monai(empty, [95], [1.0], (1.0, 1.0))["hd"])
    assert overlap.metricsreloaded(0, 0, 0, 25, [1])["dice"] == 1.0
    assert overlap.panoptica(0, 0, 0, 25, [1])["dice"] == 0.0
    assert math.isnan(overlap.monai(0, 0, 0, 25, [1])["dice"])
    assert math.isnan(overlap.deepmind(0, 0, 0, 25, [1])["dice"])


def test_metricsreloaded_avdr_wraps_around_unless_corrected():
    """1307 truth voxels, 1372 predicted: uint64 1307 - 1372 is 2**64 - 65, which float64 rounds
    to 2**64 (the kit's bin2d_disks_iso); with the correction the true ratio."""
    tp, fp, fn = 1200, 172, 107
    assert overlap.metricsreloaded(tp, fp, fn, 5000, [1])["abs_volume_difference"] == 2.0**64 / 1307
    corrected = overlap.metricsreloaded(tp, fp, fn, 5000, [1], ("avdr_wraparound",))["abs_volume_difference"]
    assert corrected == 65 / 1307
    assert overlap.metricsreloaded(tp, fn, fp, 5000, [1])["abs_volume_difference"] == 65 / 1372  # no wrap


def test_panoptica_global_zero_tp_rules(tmp_path):
    """Two single pixels five apart: panoptica's functions give ASSD 5, its pipeline's
    global_bin_assd infinity; only the families that follow panoptica change."""
    from evaluation import phase as phases
    from evaluation.suites.segmentation.options import Options
    from evaluation.suites.segmentation.scoring import score_arrays

    ref, pred = two_points()
    metrics = ["dice", "iou", "assd", "hd", "nsd", "cldice", "volume_difference", "centre_distance"]

    def scored(**extra):
        settings = {"classes": [1], "metrics": metrics, "definition": "panoptica", **extra}
        options = Options.from_phase(phases.Phase(tmp_path, "segmentation", settings))
        return score_arrays(ref.astype(np.uint8), pred.astype(np.uint8), (1.0, 1.0), options)["classes"]["1"]

    plain, pipeline = scored(), scored(panoptica_global=True)
    assert plain["assd"] == plain["hd"] == 5.0 and plain["volume_difference"] == 0.0
    assert (pipeline["dice"], pipeline["iou"], pipeline["cldice"], pipeline["assd"]) == (0.0, 0.0, 0.0, math.inf)
    assert math.isnan(pipeline["volume_difference"])
    assert pipeline["hd"] is pipeline["nsd_min_spacing"] is pipeline["centre_distance"] is None  # panoptica's default tolerance
    mixed = scored(panoptica_global=True, definitions={"distance": "metricsreloaded"})
    assert mixed["assd"] == mixed["hd"] == 5.0 and mixed["dice"] == 0.0


def test_multiclass_measures_of_a_perfect_and_a_swapped_map():
    from evaluation.suites.segmentation import multiclass

    table = np.diag([50, 30, 20])  # truth slot x prediction slot
    assert multiclass.measures(table) == {"mcc": 1.0, "weighted_kappa": 1.0, "balanced_accuracy": 1.0, "expected_cost": 0.0}
    table = np.array([[50, 3, 0], [2, 0, 30], [0, 20, 1]])
    swapped = multiclass.measures(table)
    truth, pred = (
        np.repeat(np.nonzero(table)[0], table[np.nonzero(table)]),
        np.repeat(np.nonzero(table)[1], table[np.nonzero(table)]),
    )
    one_hot_truth, one_hot_pred = np.eye(3)[truth], np.eye(3)[pred]
    cov = [
        sum(np.cov(a[:, f], b[:, f])[0, 1] for f in range(3))
        for a, b in ((one_hot_pred, one_hot_truth), (one_hot_pred, one_hot_pred), (one_hot_truth, one_hot_truth))
    ]
    assert swapped["mcc"] == pytest.approx(cov[0] / math.sqrt(cov[1] * cov[2]), rel=1e-14)
    assert swapped["balanced_accuracy"] == pytest.approx((50 / 53 + 0 / 32 + 1 / 21) / 3, rel=1e-15)  # recall per truth label
    absent = multiclass.measures(np.array([[50, 0, 0], [0, 30, 0], [0, 0, 0]]))
    assert math.isnan(absent["balanced_accuracy"]) and math.isnan(absent["expected_cost"])


# --------------------------------------------------------------------------------------------
# Properties


SYMMETRIC = {
    "panoptica": ["hd", "hd95", "assd", "nsd_1"],
    "metricsreloaded": ["hd", "hd95", "assd", "masd", "nsd_1"],
    "monai": ["hd", "hd95", "assd", "nsd_1"],
    "deepmind": ["hd", "hd95", "assd", "masd", "nsd_1"],
}


@pytest.mark.parametrize("spacing", SPACINGS)
@pytest.mark.parametrize("definition", sorted(SYMMETRIC))
def test_symmetric_definitions_do_not_care_which_mask_is_the_reference(definition, spacing):
    rng = np.random.default_rng(11)
    a, b = blobs(rng, (16, 30, 30), 0.004, 3), blobs(rng, (16, 30, 30), 0.004, 3)
    results = []
    for ref, pred in ((a, b), (b, a)):
        box = Box.of(ref, pred, spacing)
        surfaces = surfel_surfaces(box, surfels.area_table(spacing)) if definition == "deepmind" else voxel_surfaces(box)
        results.append(getattr(distances, definition)(surfaces, [95], [1.0], spacing))
    for key in SYMMETRIC[definition]:
        assert results[0][key] == pytest.approx(results[1][key], rel=1e-12, abs=1e-12), key
    assert results[0]["asd_ref_to_pred"] == pytest.approx(results[1]["asd_pred_to_ref"], rel=1e-12)


def test_overlap_scores_are_symmetric_and_directed_ones_swap():
    for reducer in overlap.DEFINITIONS.values():
        first, second = reducer(50, 7, 13, 930, [1]), reducer(50, 13, 7, 930, [1])
        assert first["dice"] == pytest.approx(second["dice"]) and first["iou"] == pytest.approx(second["iou"])
        assert first["precision"] == pytest.approx(second["recall"], rel=1e-6)


def test_matching_does_not_depend_on_instance_ids():
    rng = np.random.default_rng(2)
    ref = ndimage.label(blobs(rng, (40, 40), 0.01, 2))[0]
    pred = ndimage.label(np.roll(ref > 0, 1, axis=0))[0]
    permuted = np.zeros(pred.max() + 1, np.int64)
    permuted[1:] = rng.permutation(np.arange(100, 100 + pred.max()))
    counts = []
    for labels in (pred, permuted[pred]):
        ov = instances.Overlaps.of(ref, labels)
        counts.append(len(instances.greedy(ov, ov.iou(), 0.5, strict=False).pairs))
    assert counts[0] == counts[1]


def test_greedy_and_optimal_differ_on_an_ambiguous_pair():
    """P1 overlaps G1 (IoU 0.4) and G2 (0.3); P2 overlaps G1 only (0.36): greedy gives P1 to G1
    and leaves G2 alone, the optimal assignment matches both."""
    ref = np.zeros((1, 40), np.int32)
    pred = np.zeros((1, 40), np.int32)
    ref[0, 0:10], ref[0, 10:20] = 1, 2
    pred[0, 4:14], pred[0, 0:4] = 1, 2
    ov = instances.Overlaps.of(ref, pred)
    scores = ov.iou()
    assert len(instances.greedy(ov, scores, 0.25, strict=False).pairs) == 1
    assert len(instances.optimal(ov, scores, 0.25, strict=False).pairs) == 2


def test_label_permutation_does_not_change_class_results(tmp_path):
    """Renumbering the classes (and the phase's class list with them) changes nothing."""
    from evaluation import phase as phases
    from evaluation.suites.segmentation.inputs import CaseTask
    from evaluation.suites.segmentation.options import Options
    from evaluation.suites.segmentation.scoring import score_case

    rng = np.random.default_rng(4)
    truth = rng.integers(0, 4, (12, 20, 20)).astype(np.uint8)
    truth = ndimage.median_filter(truth, 3)
    pred = np.roll(truth, 1, axis=2)
    mapping = np.array([0, 3, 1, 2], np.uint8)
    found = []
    for name, classes, t, p in (
        ("a", {"x": 1, "y": 2, "z": 3}, truth, pred),
        ("b", {"x": 3, "y": 1, "z": 2}, mapping[truth], mapping[pred]),
    ):
        np.save(tmp_path / f"{name}_t.npy", t)
        np.save(tmp_path / f"{name}_p.npy", p)
        options = Options.from_phase(
            phases.Phase(
                tmp_path,
                "segmentation",
                {
                    "classes": classes,
                    "metrics": ["dice", "hd", "hd_percentile", "nsd", "cldice"],
                    "instance_metrics": ["detection", "dice"],
                },
            )
        )
        found.append(
            score_case(CaseTask("c", str(tmp_path / f"{name}_t.npy"), str(tmp_path / f"{name}_p.npy"), "c.npy", options))[
                "classes"
            ]
        )
    assert found[0] == found[1]


def test_cldice_of_a_thin_line_is_one_when_identical():
    line = np.zeros((9, 30), bool)
    line[4, 3:27] = True
    assert shape.cldice(line, line)["cldice"] == 1.0
    assert shape.boundary_iou(line, line, 1) == 1.0


@pytest.mark.parametrize("size", [(7, 9, 8), (11, 13)])
def test_corner_points_are_the_neighbourhood_codes_of_the_surfels(size):
    from evaluation.metrics.surfels import corner_points

    mask = np.random.default_rng(len(size)).random(size) < 0.5
    codes = whole_array.corner_codes(mask)
    full = (1 << (1 << mask.ndim)) - 1
    expected = np.argwhere((codes != 0) & (codes != full))
    points = corner_points(mask, (1.0,) * mask.ndim)
    assert np.array_equal(points.coords(), expected) and np.array_equal(points.marks, codes[tuple(expected.T)])
