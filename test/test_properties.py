"""Property-based tests of the metric primitives (hypothesis): invariances that must hold for
any input, checked against simple oracles."""

import numpy as np
from helpers.hausdorff_reference import capped_hausdorff_padded_roi
from helpers.whole_array import capped_hausdorff, identity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evaluation.metrics import binary
from evaluation.metrics.matching import min_cost_flow_matching, pair_iou32
from evaluation.metrics.overlap import binary_counts, contingency
from evaluation.metrics.voi import rand_voi
from evaluation.suites.cellmap.options import Limits
from evaluation.suites.cellmap.v2 import score_instance

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
labels_1d = arrays(np.uint16, st.integers(1, 60), elements=st.integers(0, 6))


def volumes(max_label=5, shape=(6, 7, 8)):
    return arrays(np.uint16, shape, elements=st.integers(0, max_label))


@SETTINGS
@given(st.data())
def test_contingency_matches_an_oracle(data):
    a = data.draw(labels_1d)
    b = data.draw(arrays(np.uint16, a.shape, elements=st.integers(0, 6)))
    table = contingency(a, b)
    pairs, counts = np.unique(np.stack([a, b]).T, axis=0, return_counts=True)
    assert table.a.tolist() == pairs[:, 0].tolist() and table.b.tolist() == pairs[:, 1].tolist()
    assert table.count.tolist() == counts.tolist()


@SETTINGS
@given(labels_1d, st.data())
def test_binary_scores_are_symmetric_and_bounded(a, data):
    b = data.draw(arrays(np.uint16, a.shape, elements=st.integers(0, 6)))
    forward, backward = binary_counts(a > 0, b > 0), binary_counts(b > 0, a > 0)
    assert binary.iou(forward) == binary.iou(backward)
    assert 0 <= binary.iou(forward) <= 1 and 0 <= binary.accuracy(forward) <= 1
    if (a > 0).any():
        assert binary.iou(binary_counts(a > 0, a > 0)) == 1.0
        assert binary.iou(binary_counts(a > 0, np.zeros_like(a, bool))) == 0.0


@SETTINGS
@given(labels_1d, st.data())
def test_rand_voi_ignores_how_prediction_labels_are_numbered(truth, data):
    pred = data.draw(arrays(np.uint16, truth.shape, elements=st.integers(0, 6)))
    permutation = np.array(data.draw(st.permutations(range(7))), dtype=np.uint16) + 10
    renamed = permutation[pred]
    first = rand_voi(contingency(truth, pred, where=truth > 0))
    second = rand_voi(contingency(truth, renamed, where=truth > 0))
    for key in first:
        assert np.isclose(first[key], second[key], rtol=1e-12, atol=1e-15, equal_nan=True), key


@SETTINGS
@given(labels_1d)
def test_a_perfect_prediction_has_no_variation_of_information(truth):
    scores = rand_voi(contingency(truth, truth, where=truth > 0))
    assert abs(scores["voi_split"]) < 1e-12 and abs(scores["voi_merge"]) < 1e-12


@SETTINGS
@given(st.data())
def test_matching_is_one_to_one_over_overlapping_pairs(data):
    n_gt, n_pred = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    pairs = sorted(data.draw(st.sets(st.tuples(st.integers(1, n_gt), st.integers(1, n_pred)), min_size=1, max_size=12)))
    gt, pred = np.array(pairs).T
    iou = np.array(data.draw(st.lists(st.floats(0.01, 1.0), min_size=len(pairs), max_size=len(pairs))), np.float32)
    mapping = min_cost_flow_matching(n_gt, n_pred, gt, pred, iou, 1_000_000)
    assert len(set(mapping.values())) == len(mapping)
    assert all((g, p) in set(pairs) for p, g in mapping.items())
    # maximal: no overlapping pair with both sides free is left out
    assert not any(g not in mapping.values() and p not in mapping for g, p in pairs)


@SETTINGS
@given(volumes(), volumes(), st.sampled_from([(1.0, 1.0, 1.0), (10.0, 4.0, 4.0), (3.24, 3.24, 2.5)]))
def test_fast_hausdorff_is_the_reference_algorithm(a, b, vs):
    ids = np.unique(a)[1:]
    cap = min(v * s for v, s in zip(vs, a.shape)) / 2
    fast = capped_hausdorff(a, b, identity(b), ids, vs, cap)
    assert fast.tobytes() == capped_hausdorff_padded_roi(a, b, ids, vs, cap).tobytes()
    assert (capped_hausdorff(a, a, identity(a), ids, vs, cap) == 0).all()


@SETTINGS
@given(volumes(max_label=4, shape=(8, 8, 8)), st.data())
def test_instance_scores_do_not_depend_on_prediction_numbering(pred, data):
    truth = np.zeros(pred.shape, np.uint32)
    truth[1:4, 1:4, 1:4], truth[5:8, 4:8, 0:3] = 1, 2
    permutation = np.array(data.draw(st.permutations(range(1, 5))), dtype=np.uint32) * 7
    renamed = np.concatenate([[0], permutation])[pred]
    assert score_instance(pred, truth, (8, 8, 8), Limits.reference()) == score_instance(
        renamed, truth, (8, 8, 8), Limits.reference()
    )
    perfect = score_instance(truth.copy(), truth, (8, 8, 8), Limits.reference())
    assert perfect["combined_score"] == 1.0 and perfect["mean_accuracy"] == 1.0


def test_pair_iou_of_identical_sets_is_one():
    assert pair_iou32(np.array([5.0]), np.array([5.0]), np.array([5.0]))[0] == 1.0
