"""FISBe primitives against independently known values: scikit-image's full-array thinning,
a dense full-volume evaluation written independently (``helpers/fisbe_dense.py``), hand-computed
examples, and the reference's documented tie and crash rules."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import fisbe_dense
from helpers import fisbe_synthetic as syn
from helpers.whole_array import skeletonize_full
from scipy import ndimage
from skimage.morphology import skeletonize

from evaluation.metrics import jit, lee_thinning
from evaluation.metrics.centerline import cldice, greedy_match
from evaluation.metrics.skeleton import skeleton_voxels
from evaluation.metrics.sparse_labels import SparseLabels
from evaluation.readers.label_stacks import Channel, nonzero
from evaluation.report import sanitize as to_json
from evaluation.suites.fisbe import image as fisbe_image
from evaluation.suites.fisbe.aggregate import combine_sets, pool
from evaluation.suites.fisbe.image import unify
from evaluation.suites.fisbe.inputs import crops, natural_key
from evaluation.suites.fisbe.many_to_many import LazyHeap, many_to_many, split_merge_counts
from evaluation.suites.fisbe.options import read_split_file


def random_masks(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        shape = tuple(rng.integers(3, 22, 3))
        mask = rng.random(shape) < rng.uniform(0.05, 0.7)
        kind = trial % 4
        if kind == 0:
            mask = ndimage.binary_opening(mask)
        elif kind == 1:
            mask = ndimage.binary_dilation(mask)
        elif kind == 2:
            mask = ndimage.binary_closing(mask, iterations=2)
        yield mask


@pytest.mark.skipif(not lee_thinning.available(), reason="numba missing")
def test_voxel_list_thinning_equals_scikit_image():
    for mask in random_masks(0, 400):
        box = np.pad(mask, 1)
        assert np.array_equal(lee_thinning.thin_box(box), np.flatnonzero(skeletonize(box)))


_READ_ONLY_PROBE = r"""
import importlib.util, json, os, sys, tempfile
install = sys.argv[1]
real_access = os.access
def access(path, mode, *args, **kwargs):  # the install is read-only (chmod proves nothing to root)
    if os.path.abspath(path).startswith(install) and mode & os.W_OK:
        return False
    return real_access(path, mode, *args, **kwargs)
os.access = access
env, tmp = dict(os.environ), sorted(os.listdir(tempfile.gettempdir()))
spec = importlib.util.spec_from_file_location("lee_thinning", os.path.join(install, "lee_thinning.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
unchanged = dict(os.environ) == env and sorted(os.listdir(tempfile.gettempdir())) == tmp and "numba" not in sys.modules
module.warm_up()
print(json.dumps({"unchanged": unchanged, "compiled": module.available(), "cache": os.environ.get("NUMBA_CACHE_DIR")}))
"""


@pytest.mark.skipif(not lee_thinning.available(), reason="numba missing")
def test_importing_lee_thinning_from_a_read_only_install_has_no_side_effect(tmp_path):
    """The module copied into a folder it may not write to (as in the container), holding a
    cache file from the image's build: importing it changes neither the environment nor the
    temporary folder and does not import numba; the first compile then moves numba's cache to
    the temporary folder, seeded with the install's cache files."""
    install = tmp_path / "install"
    (install / "__pycache__").mkdir(parents=True)
    shutil.copy(lee_thinning.__file__, install / "lee_thinning.py")
    (install / "__pycache__" / "lee_thinning._thin-1.py311.nbi").write_bytes(b"built with the image")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-B", "-c", _READ_ONLY_PROBE, str(install)],
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(scratch)},
        cwd=tmp_path,
        check=True,
    )
    result = json.loads(done.stdout)
    assert result == {"unchanged": True, "compiled": True, "cache": str(scratch / "evaluation-numba-cache")}
    (seeded,) = (scratch / "evaluation-numba-cache").iterdir()
    cached = sorted(p.name for p in seeded.iterdir())
    assert "lee_thinning._thin-1.py311.nbi" in cached  # copied from the install
    assert any(name.startswith("lee_thinning._thin-") and name.endswith(".nbc") for name in cached)  # compiled there


def test_box_skeleton_equals_full_volume_skeleton():
    """Thinning on the instance's box (one voxel of margin) is thinning on the whole volume,
    also for masks touching the volume's faces and for thin tubes."""
    rng = np.random.default_rng(1)
    masks = list(random_masks(2, 60))
    shape = (30, 60, 60)
    masks += [np.isin(np.arange(np.prod(shape)), syn.tube(rng, shape, 80, r)).reshape(shape) for r in (1, 2, 3)]
    for mask in masks:
        assert np.array_equal(skeleton_voxels(np.flatnonzero(mask), mask.shape), np.flatnonzero(skeletonize_full(mask)))


def _channels(stack):
    return [Channel(np.flatnonzero(c), c.reshape(-1)[np.flatnonzero(c)].astype(np.int64)) for c in stack]


@pytest.mark.parametrize("seed", range(24))
def test_sparse_evaluation_equals_dense_full_volume_evaluation(seed):
    """Random crossing neurons, label-image or overlapping-stack predictions, dim subsets and
    partly mode: every value (types included) equals the dense computation's."""
    rng = np.random.default_rng(seed)
    shape = (24, 48, 48)
    truth = syn.neurons(rng, shape, int(rng.integers(1, 6)), length=(40, 120), radius=(1, 2))
    predicted = syn.prediction(rng, shape, truth, false_positives=int(rng.integers(0, 3)), fragments=1)
    gt = syn.gt_stack(shape, truth)
    pred = syn.gt_stack(shape, predicted, np.int32) if seed % 3 == 0 else syn.label_image(shape, predicted)[None]
    dims = sorted(rng.choice(np.arange(1, len(truth) + 1), size=int(rng.integers(0, len(truth) + 1)), replace=False).tolist())
    partly = seed % 2 == 1
    dense = fisbe_dense.evaluate(gt, pred, dims, partly)
    g, mapped = unify(_channels(gt), shape, dims=dims)
    p, _ = unify(_channels(pred), shape, remove_small=800)
    fast = fisbe_image.evaluate(g, p, mapped, partly)
    assert to_json(fast) == to_json(dense)
    assert type(fast["general"]["avg_gt_skel_coverage"]) is type(dense["general"]["avg_gt_skel_coverage"])


# --------------------------------------------------------------------------------------------
# Matching, heap, clDice


def test_greedy_match_ties_by_value_then_gt_then_prediction():
    loc = np.zeros((4, 4), np.float32)
    loc[1, 2] = loc[2, 2] = np.float32(0.8)  # tie on prediction 2: the lower GT row wins
    loc[1, 1] = loc[2, 1] = np.float32(0.6)
    loc[3, 3] = np.float32(0.9)
    tp, gts, preds = greedy_match(loc, 0.5)
    assert tp == 3 and gts.tolist() == [3, 1, 2] and preds.tolist() == [3, 2, 1]


def test_threshold_is_strict_in_float32():
    loc = np.zeros((2, 2), np.float32)
    loc[1, 1] = np.float32(0.5)
    assert greedy_match(loc, 0.5)[0] == 0
    loc[1, 1] = np.nextafter(np.float32(0.5), np.float32(1))
    assert greedy_match(loc, 0.5)[0] == 1


def test_cldice_is_float32_harmonic_mean_with_zero_for_empty():
    precision = np.array([[0, 0], [0, 0.5]], np.float32)
    recall = np.array([[0, 0], [0, 1.0]], np.float32)
    result = cldice(precision, recall)
    assert result.dtype == np.float32 and result[0, 0] == 0 and result[1, 1] == np.float32(2 * 0.5 / 1.5)


def test_lazy_heap_revival_and_consumed_keys():
    heap = LazyHeap()
    heap.push("a", -0.9)
    heap.push("b", -0.5)
    heap.push("c", -0.5)
    assert heap.pop_live() == "a"
    heap.invalidate("a")  # consumed: nothing to invalidate
    heap.invalidate("b")
    heap.push("b", -0.4)  # revived with a new version
    assert heap.pop_live() == "c"  # equal priorities: earlier push first; stale "b" entry skipped
    assert heap.pop_live() == "b"
    assert heap.pop_live() is None


def test_many_to_many_without_overlaps_is_thresholding():
    recall = np.zeros((3, 4), np.float32)
    recall[1, 1:] = [0.6, 0.3, 0.0]  # GT 1 split over predictions 1 and 2
    recall[2, 2] = 0.5  # prediction 2 also covers GT 2: a merge
    matches = many_to_many(recall, 0.1, overlaps=False, hits=[])
    assert matches == {0: [0, 1], 1: [1]}
    assert split_merge_counts(matches, 3) == (1, 1)


# --------------------------------------------------------------------------------------------
# Preprocessing


def _channel(values, start=0):
    values = np.asarray(values, np.int64)
    index = np.arange(start, start + values.size, dtype=np.int64)
    return Channel(index[values > 0], values[values > 0])


def test_small_ids_removed_over_all_channels_at_most_800():
    a = _channel([5] * 500 + [7] * 801)
    b = _channel([5] * 300 + [9] * 800, start=2000)  # id 5: 500 + 300 = 800 voxels in total: removed
    labels, _ = unify([a, b], (1, 1, 4000), remove_small=800)
    assert labels.count == 1 and labels.voxel_counts()[1] == 801


def test_empty_channels_dropped_binary_channels_numbered_and_ids_offset():
    empty = Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))
    labels, _ = unify([_channel([1, 1, 0]), empty, _channel([0, 1, 1])], (1, 1, 3))
    assert labels.count == 2 and labels.channel.tolist() == [0, 0, 1]
    assert labels.voxels(1).tolist() == [0, 1] and labels.voxels(2).tolist() == [1, 2] and labels.overlaps()
    labels, dims = unify([_channel([4, 9, 0]), _channel([9, 0, 300])], (1, 1, 3), dims=[9, 300])
    assert labels.count == 4 and dims == [2, 4]  # 4->1, 9->2 (first channel holding 9), then 9->3, 300->4


def test_all_empty_stack_is_one_empty_channel_and_wide_ids_do_not_overflow():
    empty = Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))
    labels, _ = unify([empty, empty], (2, 2, 2))
    assert labels.count == 0
    many = [_channel([1], start=i) for i in range(300)]  # 300 binary channels: ids up to 300
    labels, _ = unify(many, (1, 1, 300))
    assert labels.count == 300 and labels.voxels(300).tolist() == [299]


def test_sparse_labels_hits_and_shared_voxels():
    labels = SparseLabels.from_pairs((1, 1, 10), [3, 1, 3, 5], [2, 1, 1, 2], 2)
    positions, ids = labels.hits(np.array([0, 3, 5]))
    assert positions.tolist() == [1, 1, 2] and ids.tolist() == [1, 2, 2]
    assert labels.shared_voxels().tolist() == [3] and labels.subset([2]).voxels(1).tolist() == [3, 5]


def test_centre_crop_offsets():
    gt, pred = crops((10, 20, 30), (14, 21, 30), "p.hdf")
    assert gt == (slice(0, 10), slice(0, 20), slice(0, 30)) and pred == (slice(2, 12), slice(0, 20), slice(0, 30))
    gt, pred = crops((12, 20, 30), (10, 20, 27), "p.hdf")
    assert gt == (slice(1, 11), slice(0, 20), slice(1, 28))
    with pytest.raises(Exception, match="larger than the image in some axes"):
        crops((10, 20, 30), (12, 18, 30), "p.hdf")


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.uint32, np.int64, np.float32])
def test_word_scan_equals_flatnonzero(dtype):
    rng = np.random.default_rng(3)
    for size in (0, 1, 7, 8, 64, 1001, 4096):
        flat = (rng.random(size) < 0.05).astype(dtype) * 3
        assert nonzero(flat).tolist() == np.flatnonzero(flat).tolist()


def test_natural_order_and_split_file(tmp_path):
    assert sorted(["img10", "img2", "img1"], key=natural_key) == ["img1", "img2", "img10"]
    split = tmp_path / "split.txt"
    split.write_text("(1) samples for FlyLight completely:\ntrain:\na\n\n(2) samples for FlyLight partly:\ntest:\nb\nc\n")
    assert read_split_file(split) == {"b", "c"}


def test_pooled_f1_uses_summed_counts_not_mean_of_f1():
    def image(tp, fp, fn, covs):
        table = {"AP_TP": tp, "AP_FP": fp, "AP_FN": fn}
        general = {
            "Num GT": tp + fn,
            "Num Pred": tp + fp,
            "FM": 0,
            "FS": 0,
            "TP_05": tp,
            "TP_05_cldice": [0.5] * tp,
            "gt_skel_coverage": covs,
            "GT_dim": 0,
            "TP_05_dim": 0,
            "gt_covs_dim": [],
            "GT_overlap": 0,
            "TP_05_overlap": 0,
            "gt_covs_overlap": [],
        }
        return {"general": general, "confusion_matrix": {fisbe_image.table_name(t): table for t in fisbe_image.POOLED_THRESHOLDS}}

    pooled = pool([image(1, 0, 0, [1.0]), image(0, 3, 1, [0.0])])
    # F1 = 2*1 / (2*1 + 3 + 1) = 1/3 at every threshold; C = mean(1, 0) = 0.5
    assert pooled["general"]["avFscore"] == pytest.approx(1 / 3, rel=1e-15)
    assert pooled["general"]["avg_gt_skel_coverage"] == np.float32(0.5)
    assert pooled["S"] == pytest.approx(0.5 / 3 + 0.25, rel=1e-15)


def test_without_numba_the_box_path_gives_the_same_skeletons(monkeypatch):
    monkeypatch.setattr(jit, "broken", True)
    assert not lee_thinning.available()
    for mask in random_masks(4, 30):
        assert np.array_equal(skeleton_voxels(np.flatnonzero(mask), mask.shape), np.flatnonzero(skeletonize_full(mask)))


def test_no_truth_instances_gives_natural_values():
    """The reference divides by zero here (TP_05_rel) and averages an empty list (C)."""
    shape = (6, 20, 20)
    empty = Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))
    gt, _ = unify([empty], shape)
    voxels = np.arange(900, dtype=np.int64) + 200
    pred, _ = unify([Channel(voxels, np.full(voxels.size, 4, np.int64))], shape, remove_small=800)
    general = fisbe_image.evaluate(gt, pred, [], partly=False)["general"]
    assert general["Num GT"] == 0 and general["Num Pred"] == 1
    assert general["TP_05_rel"] == 0.0 and general["gt_skel_coverage"] == [] and general["avg_gt_skel_coverage"] == 0.0
    assert general["avg_f1_cov_score"] == 0.0 and general["GT_overlap"] == 0


def test_combining_sets_without_truth_or_matches_gives_zeros():
    def empty_set():
        confusion = {
            fisbe_image.table_name(t): {"fscore": 0.0, "AP_TP": 0, "AP_FP": 0, "AP_FN": 0} for t in fisbe_image.POOLED_THRESHOLDS
        }
        general = {
            "Num GT": np.int64(0),
            "Num Pred": np.int64(2),
            "avg_gt_skel_coverage": 0.0,
            "avFscore": 0.0,
            "FM": np.int64(0),
            "FS": np.int64(0),
            "TP_05": np.int64(0),
            "TP_05_cldice": [],
        }
        return {"S": 0.0, "general": general, "confusion_matrix": confusion, "gt_covs": []}

    combined = combine_sets(empty_set(), empty_set())
    assert combined["general"]["TP_05_rel"] == 0.0 and combined["general"]["avg_TP_05_cldice"] == 0.0
    assert combined["general"]["Num Pred"] == 4 and combined["S"] == 0.0
