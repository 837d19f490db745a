"""Differential test: the suite's bounded-memory (streamed, tiled) scoring of a (crop, label)
against the whole-array path it replaced (``helpers/cellmap_reference.py``, the code of commit
7a806e7), on many random crops written as zarr stores.

Every case must give the same entry, float for float (NaN for NaN). The crops cover what the
tiled path has to get right: touching instances of different ids, instances crossing tile faces
(tiles are made tiny here, down to a few voxels, so every object crosses several), ids near
2^32 and 2^64, anisotropic voxels, translated, centre-cropped and resampled predictions (up and
down, both the whole-array and the reference's block-wise resampling), masks, empty truth or
prediction, prediction-only and truth-only ids, noise that makes the crop pathological, and
both reference versions.
"""

import math

import numpy as np
import pytest
import zarr
from helpers import cellmap_reference as reference
from helpers import whole_array
from helpers.cellmap_alignment import align
from helpers.hausdorff_reference import capped_hausdorff_padded_roi
from helpers.tiers import sampled

from evaluation.suites.cellmap import alignment, head, scoring, v2
from evaluation.suites.cellmap.alignment import Grid
from evaluation.suites.cellmap.inputs import Pair
from evaluation.suites.cellmap.options import Limits

VERSIONS = {"v2": v2, "head": head}
VOXEL_SIZES = [(8.0, 8.0, 8.0), (10.0, 4.0, 4.0), (3.24, 3.24, 2.5), (1.74, 2.0, 2.0)]
ID_BASES = {"small": 0, "2^32": 2**32 - 6, "2^64": 2**64 - 40}
COMMON = ("num_voxels", "voxel_size", "is_missing")


# --------------------------------------------------------------------------------------------
# Random crops


def _blob(rng, shape, low, high):
    """A random box or ellipsoid: (region slices, boolean shape on that region)."""
    size = np.array([rng.integers(low, max(low + 1, min(high, s) + 1)) for s in shape])
    start = np.array([rng.integers(-1, max(0, s - n) + 2) for s, n in zip(shape, size)])
    start = np.clip(start, 0, np.maximum(np.array(shape) - size, 0))
    region = tuple(slice(int(a), int(a + n)) for a, n in zip(start, size))
    extent = tuple(r.stop - r.start for r in region)
    if rng.random() < 0.5:
        inside = np.ones(extent, bool)
    else:
        grid = np.ogrid[tuple(slice(0, n) for n in extent)]
        inside = sum(((g + 0.5 - n / 2) / (n / 2)) ** 2 for g, n in zip(grid, extent)) <= 1.0
    return region, inside


def truth_instances(rng, shape, dtype, base):
    truth = np.zeros(shape, dtype)
    ids = []
    for k in range(int(rng.integers(0, 9))):
        region, inside = _blob(rng, shape, 2, 9)
        label = base + 1 + k + int(rng.integers(0, 3)) * (base == 0)
        truth[region][inside] = label
        ids.append(label)
    if ids and rng.random() < 0.5:  # two instances touching face to face
        z = int(rng.integers(0, shape[0]))
        y0 = int(rng.integers(0, max(1, shape[1] - 4)))
        truth[z : z + 3, y0 : y0 + 2, :4] = ids[0]
        truth[z : z + 3, y0 + 2 : y0 + 4, :4] = ids[-1]
    return truth


def perturbed(rng, truth, dtype, base):
    """The truth's instances jittered, split, merged, dropped, plus false positives."""
    pred = np.zeros(truth.shape, dtype)
    ids = [int(i) for i in np.unique(truth) if i != 0]
    fresh = base + 100
    top = np.iinfo(dtype).max if np.dtype(dtype).kind in "ui" else 2**24
    for label in ids:
        region = truth == label
        roll = rng.random()
        if roll < 0.1:
            continue
        if roll < 0.6:
            region = np.roll(region, tuple(rng.integers(-2, 3, size=3)), axis=(0, 1, 2))
            pred[region] = min(label, top)
        elif roll < 0.8:
            half = np.indices(region.shape)[rng.integers(0, 3)] < rng.integers(0, max(truth.shape))
            pred[region & half] = min(label, top)
            pred[region & ~half] = min(fresh, top)
            fresh += 1
        else:
            pred[region] = min(ids[0], top)  # merged into another instance's id
    for _ in range(int(rng.integers(0, 4))):  # prediction-only ids
        region, inside = _blob(rng, truth.shape, 1, 5)
        pred[region][inside] = min(fresh, top)
        fresh += 1
    if rng.random() < 0.3:  # a thin wall touching everything: one long component
        axis = int(rng.integers(0, 3))
        index = [slice(None)] * 3
        index[axis] = int(rng.integers(0, truth.shape[axis]))
        pred[tuple(index)] = min(ids[0] if ids else fresh, top)
    return pred


def noise(rng, shape, dtype):
    pred = np.zeros(shape, dtype)
    pred[::2, ::2, ::2] = (rng.random(pred[::2, ::2, ::2].shape) < 0.7) * rng.integers(1, 5, pred[::2, ::2, ::2].shape)
    return pred


def semantic(rng, shape, dtype, base_on=None):
    if base_on is not None:
        mask = np.roll(base_on > 0, tuple(rng.integers(-1, 2, size=3)), axis=(0, 1, 2))
        mask ^= rng.random(shape) < 0.03
    else:
        mask = np.zeros(shape, bool)
        for _ in range(int(rng.integers(0, 6))):
            region, inside = _blob(rng, shape, 2, 12)
            mask[region] |= inside
    if dtype == np.float32:
        return np.where(mask, rng.uniform(0.3, 1.0, shape), rng.uniform(0.0, 0.7, shape) * (rng.random(shape) < 0.2)).astype(
            np.float32
        )
    return mask.astype(dtype)


def write(path, data, attrs, rng):
    chunks = tuple(int(rng.integers(2, max(3, s + 1))) for s in data.shape)
    array = zarr.open_array(str(path), mode="w", shape=data.shape, dtype=data.dtype, chunks=chunks, zarr_format=2)
    array[...] = data
    array.attrs.update(attrs)


def random_case(seed: int, folder):
    """A random (crop, label) written into ``folder``: the task's Pair and a description."""
    rng = np.random.default_rng(seed)
    version = "v2" if seed % 2 else "head"
    instance = rng.random() < 0.7
    shape = tuple(int(rng.integers(5, 26)) for _ in range(3))
    voxel_size = VOXEL_SIZES[int(rng.integers(0, len(VOXEL_SIZES)))]
    translation = tuple(float(v * rng.integers(0, 50)) for v in voxel_size)
    grid = Grid(voxel_size, shape, translation)
    kind = str(rng.choice(list(ID_BASES), p=[0.6, 0.2, 0.2])) if instance else "small"
    base = ID_BASES[kind]
    if instance:
        truth_dtype = np.uint64 if base else rng.choice([np.uint8, np.uint16, np.uint32, np.uint64, np.int32])
        truth = truth_instances(rng, shape, truth_dtype, base)
        if rng.random() < 0.08:
            truth[...] = 0
        pred_dtype = np.uint64 if base else rng.choice([np.uint8, np.uint16, np.uint32, np.uint64, np.int64])
        roll = rng.random()
        pred = (
            np.zeros(shape, pred_dtype)
            if roll < 0.06
            else noise(rng, shape, pred_dtype)
            if roll < 0.12
            else perturbed(rng, truth, pred_dtype, base)
        )
        label = "mito" if rng.random() < 0.9 else "er"  # "er" scored as an instance: resampled linearly
    else:
        truth = semantic(rng, shape, rng.choice([np.uint8, bool]))
        pred = semantic(rng, shape, rng.choice([np.uint8, bool, np.float32]), base_on=truth if rng.random() < 0.7 else None)
        if rng.random() < 0.08:
            pred[...] = 0
        label = "er" if rng.random() < 0.9 else "mito"  # "mito" scored as semantic: resampled by nearest neighbour
    pred_attrs = {"voxel_size": list(voxel_size), "translation": list(translation)}
    geometry = str(rng.choice(["same", "shifted", "resized", "coarse", "fine", "odd"], p=[0.3, 0.2, 0.1, 0.2, 0.1, 0.1]))
    if geometry == "shifted":
        offset = rng.integers(-3, 4, size=3) * np.asarray(voxel_size) + rng.uniform(-0.4, 0.4, 3) * np.asarray(voxel_size)
        pred_attrs["translation"] = list(np.asarray(translation) + offset)
    elif geometry == "resized":  # no voxel size: centre-padded or cropped
        pred = pred[tuple(slice(int(rng.integers(0, 3)), None) for _ in range(3))]
        pred = np.pad(pred, [(0, int(rng.integers(0, 4)))] * 3)
        pred_attrs = {"translation": list(translation)} if rng.random() < 0.5 else {}
    elif geometry in ("coarse", "fine", "odd"):
        factor = {"coarse": 2.0, "fine": 0.5, "odd": float(rng.choice([1.5, 0.75, 3.0]))}[geometry]
        step = np.asarray(voxel_size) * factor
        pred = (
            pred[::2, ::2, ::2]
            if factor >= 2
            else np.repeat(np.repeat(np.repeat(pred, 2, 0), 2, 1), 2, 2)
            if factor <= 0.5
            else pred
        )
        pred_attrs = {"voxel_size": list(step), "translation": list(np.asarray(translation) + rng.integers(-2, 3, 3) * step)}
    if pred.size == 0:
        pred = np.zeros((1, 1, 1), pred.dtype)
    crop = folder / "truth.zarr" / "crop1"
    write(crop / label, truth, {"voxel_size": list(voxel_size), "translation": list(translation)}, rng)
    mask = None
    if rng.random() < 0.2:
        mask = crop / f"{label}_mask"
        write(mask, (rng.random(shape) < 0.85).astype(np.uint8), {"voxel_size": list(voxel_size)}, rng)
    write(folder / "submission.zarr" / "crop1" / label, pred, pred_attrs, rng)
    limits = Limits.reference()
    if base:  # a matching graph has one node per truth id up to the largest: unmatchable (in both paths)
        limits = Limits(**{**limits.__dict__, "max_overlap_edges": 0})
    elif rng.random() < 0.1:
        limits = Limits(**{**limits.__dict__, "max_overlap_edges": int(rng.integers(0, 4))})
    pair = Pair(
        crop="crop1",
        label=label,
        display=f"crop1/{label}",
        truth=crop / label,
        pred=folder / "submission.zarr" / "crop1" / label,
        mask=mask,
        grid=grid,
        instance=instance,
        version=version,
        limits=limits,
        pathological_crops=str(rng.choice(["ignore", "unmatched"])) if version == "head" else "ignore",
    )
    return (
        pair,
        f"seed {seed}: {version} {'instance' if instance else 'semantic'} {label} {shape} {voxel_size} ids {kind} geometry {geometry} mask {mask is not None}",
    )


# --------------------------------------------------------------------------------------------
# Comparison


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def outcome(score):
    try:
        return score()
    except Exception as exc:  # both paths must fail alike (e.g. a submission error)
        return {"error": f"{type(exc).__name__}: {exc}"}


def check(pair, description):
    version = VERSIONS[pair.version]
    expected = outcome(lambda: reference.score(pair, version.INFER_SCALE_FROM_SHAPE))
    got = outcome(lambda: scoring.score(pair, version))
    got = {k: v for k, v in got.items() if k not in COMMON}
    differing = {k: (got.get(k), expected.get(k)) for k in set(got) | set(expected) if not same(got.get(k), expected.get(k))}
    assert not differing, f"{description}: {differing}"


@pytest.fixture(params=["whole", "tiles", "tiles-reread", "tiles-sparse"])
def tiling(request, monkeypatch):
    """``tiles``: tiles of a few hundred voxels, so that every object crosses tile faces, and
    union boxes above 100 voxels measured on each set's own box (branch and bound down to
    single voxels) or, above 200 voxels a set, as packed masks;
    ``tiles-reread``: the distances read the volumes again instead of the recorded runs;
    ``tiles-sparse``: every instance measured by the sparse path (sets gathered box by box)."""
    if request.param.startswith("tiles"):
        from evaluation.metrics.hausdorff import directed, packed, planning
        from evaluation.suites.cellmap import volumes

        monkeypatch.setattr(volumes, "TILE_VOXELS", 300)
        monkeypatch.setattr(volumes, "SEMANTIC_TILE_BYTES", 2000)
        monkeypatch.setattr(planning, "DENSE_BOX", 100)
        monkeypatch.setattr(directed, "DIRECT_QUERIES", 0)
        monkeypatch.setattr(directed, "FEW_POINTS", 1)
        monkeypatch.setattr(directed, "LEVELS", (4, 3, 2))
        # boxes above 200 voxels as packed masks, 4 planes at a time, outside voxels kept up to 40
        monkeypatch.setattr(planning, "BOX_VOXELS", 200)
        monkeypatch.setattr(packed, "SLAB_PLANES", 4)
        monkeypatch.setattr(packed, "KEEP_POINTS", 40)
        monkeypatch.setattr(packed, "PACKED_BYTES", 300)
        from evaluation.suites.cellmap import scan, tiles

        monkeypatch.setattr(tiles, "OVERLAP_VOXELS", 50)
        if request.param == "tiles-reread":
            monkeypatch.setattr(scan, "RUN_BYTES", 0)
        if request.param == "tiles-sparse":
            monkeypatch.setattr(planning, "SPARSE_BOX_FACTOR", 0)
    return request.param


@pytest.mark.parametrize("seed", sampled(range(120), 4))
def test_streamed_scoring_equals_the_whole_array_path(seed, tiling, tmp_path):
    pair, description = random_case(seed, tmp_path)
    check(pair, f"{tiling} {description}")


@pytest.mark.parametrize("seed", sampled(range(12), 4))
def test_block_wise_resampling_equals_the_whole_array_path(seed, tiling, tmp_path, monkeypatch):
    """The reference resamples arrays above 500 MiB in blocks of 297 voxels; here the threshold
    and the block edge are made small enough for a test crop (both paths read them from
    ``alignment``)."""
    monkeypatch.setattr(alignment, "CHUNKED_LOADING_MIB", 0)
    monkeypatch.setattr(alignment, "CHUNK_EDGE", int(np.random.default_rng(seed).integers(3, 8)))
    for offset in range(0, 4000, 1000):
        pair, description = random_case(seed + offset, tmp_path / str(offset))
        check(pair, f"{tiling} block-wise {description}")


# --------------------------------------------------------------------------------------------
# Alignment region by region


def _random_source(rng, instance):
    shape = tuple(int(rng.integers(1, 14)) for _ in range(3))
    kind = rng.integers(0, 6)
    if instance:
        dtype = rng.choice([np.uint8, np.uint16, np.uint64, np.int32, bool, np.float32])
        if dtype == np.uint64 and kind < 2:
            return (np.uint64(2**64 - 1) - rng.integers(0, 3000, shape, dtype=np.uint64)) * (rng.random(shape) < 0.6)
        return (rng.integers(0, 5, shape) * (rng.random(shape) < 0.7)).astype(dtype)
    if kind == 0:
        return np.ones(shape, rng.choice([np.uint8, bool, np.float32]))  # 0 outside the input's range
    if kind == 1:
        values = rng.uniform(-0.5, 1.5, shape).astype(np.float32)
        values[rng.random(shape) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        return values
    if kind == 2:
        return rng.uniform(0.6, 0.9, shape).astype(rng.choice([np.float32, np.float64, np.float16]))
    return (rng.random(shape) < 0.5).astype(rng.choice([np.uint8, bool, np.float32, np.int16]))


@pytest.mark.parametrize("seed", sampled(range(150), 5))
def test_aligned_regions_equal_the_whole_aligned_array(seed, monkeypatch):
    """``alignment.aligned`` read in random boxes gives ``alignment.align``'s array: every
    resampling path (whole array, block-wise, identity zoom, anti-aliasing, clip bounds with 0
    outside the input's range, NaN and infinities, uint64 ids beyond 2^53), pad/crop and
    translation."""
    rng = np.random.default_rng(seed)
    instance = bool(rng.random() < 0.5)
    source = _random_source(rng, instance)
    if rng.random() < 0.3:
        monkeypatch.setattr(alignment, "CHUNKED_LOADING_MIB", 0)
        monkeypatch.setattr(alignment, "CHUNK_EDGE", int(rng.integers(2, 6)))
    vs = np.array(VOXEL_SIZES[int(rng.integers(0, len(VOXEL_SIZES)))])
    shape = tuple(int(rng.integers(1, 20)) for _ in range(3))
    grid = Grid(tuple(vs), shape, tuple(float(v * rng.integers(0, 9)) for v in vs))
    attrs = {}
    if rng.random() < 0.8:
        factor = rng.choice([1.0, 2.0, 0.5, 1.5, 0.7, 3.0, 1.01], size=3 if rng.random() < 0.3 else 1)
        attrs["voxel_size"] = list(vs * factor)
    if rng.random() < 0.7:
        attrs["translation"] = list(np.asarray(grid.translation) + rng.uniform(-4, 4, 3) * vs)
    infer = bool(rng.random() < 0.5)
    read = lambda region: source[region]  # noqa: E731
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = align(source, attrs, grid, instance, read, 4096, "x", infer)
        except Exception as exc:  # refused alike
            with pytest.raises(type(exc)):
                alignment.aligned(source, attrs, grid, instance, read, 4096, "x", infer)
            return
        volume = alignment.aligned(source, attrs, grid, instance, read, 4096, "x", infer)
        assert volume.shape == expected.shape and volume.dtype == expected.dtype
        for _ in range(4):
            box = tuple(slice(int(a), int(b)) for a, b in (sorted(rng.integers(0, n + 1, 2)) for n in shape))
            got = volume.read(box)
            assert got.dtype == expected.dtype and got.tobytes() == expected[box].tobytes(), (seed, box)
        assert volume.read(tuple(slice(0, n) for n in shape)).tobytes() == expected.tobytes()


# --------------------------------------------------------------------------------------------
# Arrays: unusual prediction values, tiles of every size


def _odd_prediction(rng, truth):
    """A prediction with values ``cc3d`` treats specially: fractional or NaN floats, float16
    (compared by bit pattern, -0.0 is foreground), uint64 above 2^63, negative int64, bools,
    or a single foreground row."""
    kind = int(rng.integers(0, 7))
    shape = truth.shape
    base = perturbed(rng, truth, np.uint16, 0)
    if kind == 0:
        return base.astype(np.float32) * np.float32(0.5)
    if kind == 1:
        pred = base.astype(np.float64) / 3
        pred[rng.random(shape) < 0.05] = np.nan
        return pred
    if kind == 2:
        pred = base.astype(np.float16)
        pred[(pred == 0) & (rng.random(shape) < 0.1)] = -0.0
        return pred
    if kind == 3:
        return np.where(base > 0, np.uint64(2**63) + base.astype(np.uint64), np.uint64(0))
    if kind == 4:
        return base.astype(np.int64) * -1
    if kind == 5:
        return base > 0
    pred = np.zeros(shape, rng.choice([np.float32, np.uint64, np.uint8]))
    z, y = int(rng.integers(0, shape[0])), int(rng.integers(0, shape[1]))
    values = rng.choice([1.5, 2.5, 3.0]) if pred.dtype.kind == "f" else rng.choice([1, 2])
    pred[z, y, int(rng.integers(0, shape[2] // 2)) :] = values
    if pred.dtype == np.uint64 and rng.random() < 0.5:
        pred[pred > 0] += np.uint64(2**63)
    if rng.random() < 0.5:  # a second row elsewhere: the whole array is labelled the general way
        pred[(z + 2) % shape[0], y] = pred[z, y]
    return pred


@pytest.mark.parametrize("seed", sampled(range(200), 5))
def test_tiled_instances_equal_the_whole_array_on_unusual_values(seed, monkeypatch):
    from evaluation.metrics import jit
    from evaluation.suites.cellmap import volumes

    if seed % 4 == 3:  # the numpy equivalents of the compiled kernels
        monkeypatch.setattr(jit, "broken", True)
    if seed % 3 == 1:  # large boxes as packed masks
        from evaluation.metrics.hausdorff import packed, planning

        monkeypatch.setattr(planning, "DENSE_BOX", 0)  # no union box searched whole: own boxes or packed
        monkeypatch.setattr(planning, "BOX_VOXELS", 100)
        monkeypatch.setattr(packed, "SLAB_PLANES", 4 * (1 + seed % 2))
        monkeypatch.setattr(packed, "KEEP_POINTS", 25)
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.integers(3, 18)) for _ in range(3))
    truth = truth_instances(rng, shape, rng.choice([np.uint8, np.uint32]), 0)
    pred = _odd_prediction(rng, truth)
    monkeypatch.setattr(volumes, "TILE_VOXELS", int(rng.choice([shape[2], 2 * shape[2], 40, 300, 10**6])))
    vs = VOXEL_SIZES[seed % len(VOXEL_SIZES)]
    limits = Limits.reference()
    for ours, theirs in (
        (lambda: v2.score_instance(pred, truth, vs, limits), lambda: reference.v2_instance(pred, truth, vs, limits)),
        (lambda: head.score_instance(pred, truth, vs, limits), lambda: reference.head_instance(pred, truth, vs, limits)),
    ):
        got, expected = outcome(ours), outcome(theirs)
        differing = {k: (got.get(k), expected.get(k)) for k in set(got) | set(expected) if not same(got.get(k), expected.get(k))}
        assert not differing, (seed, pred.dtype, differing)


# --------------------------------------------------------------------------------------------
# Every way of finding the farthest voxel gives the reference's float32 value


def _blobs(rng, shape, count, radius):
    volume = np.zeros(shape, np.uint32)
    grid = np.indices(shape)
    for label in range(1, count + 1):
        centre = [rng.integers(0, s) for s in shape]
        r = rng.uniform(1, radius, size=3)
        volume[sum(((g - c) / rr) ** 2 for g, c, rr in zip(grid, centre, r)) <= 1] = label
    return volume


@pytest.mark.parametrize("path", ["scan", "scan-gives-up", "direct", "cells", "edt", "own", "own-tree", "own-local", "packed"])
@pytest.mark.parametrize("seed", sampled(range(30), 3))
def test_hausdorff_search_paths_equal_the_reference_algorithm(seed, path, monkeypatch):
    from evaluation.metrics.hausdorff import directed, own, packed, planning, scans

    if path == "scan-gives-up":  # the compiled scan stops part-way and the k-d tree takes over
        monkeypatch.setattr(scans, "SCAN_STEPS", 0.02)
    elif path.startswith("own") or path == "packed":  # each set on its own box; or bit-packed masks of the union box
        monkeypatch.setattr(planning, "DENSE_BOX", 0)
        if path == "own-tree":  # never the local search: the k-d tree's branch and bound
            monkeypatch.setattr(own, "LOCAL_SHARE", 2.0)
        if path == "own-local":  # always the local search, a short one: the tree for the voxels beyond it
            monkeypatch.setattr(own, "LOCAL_SHARE", 0.0)
            monkeypatch.setattr(own, "LOCAL_RADIUS", float(np.random.default_rng(seed).choice([1.0, 1.5, 2.5])))
        monkeypatch.setattr(directed, "DIRECT_QUERIES", 0)
        monkeypatch.setattr(directed, "FEW_POINTS", int(np.random.default_rng(seed).integers(0, 20)))
        monkeypatch.setattr(directed, "LEVELS", (8, 5, 3, 2))
        if path == "packed":
            monkeypatch.setattr(planning, "BOX_VOXELS", 0)
            monkeypatch.setattr(packed, "SLAB_PLANES", 4)
            monkeypatch.setattr(packed, "KEEP_POINTS", int(np.random.default_rng(seed).integers(0, 300)))
    elif path != "scan":
        monkeypatch.setattr(scans, "SCAN_BOX", 0)
    monkeypatch.setattr(directed, "DIRECT_QUERIES", 10**9 if path == "direct" else 0)
    monkeypatch.setattr(directed, "EDT_SHARE", 0.0)
    monkeypatch.setattr(packed, "CELL", int(np.random.default_rng(seed).integers(2, 6)))
    if path == "cells":
        monkeypatch.setattr(directed, "_edt", None)
    rng = np.random.default_rng(seed)
    shape = tuple(int(rng.integers(8, 40)) for _ in range(3))
    a = _blobs(rng, shape, int(rng.integers(1, 8)), 12)
    b = np.roll(a, tuple(rng.integers(-4, 5, size=3)), axis=(0, 1, 2)) if rng.random() < 0.6 else _blobs(rng, shape, 8, 12)
    if rng.random() < 0.3:
        b[rng.random(shape) < 0.2] = 0  # holes: farthest voxels inside the objects
    ids = np.unique(a)[1:]
    vs = VOXEL_SIZES[seed % len(VOXEL_SIZES)]
    cap = min(v * s for v, s in zip(vs, shape)) / (2 if rng.random() < 0.7 else 8)
    fast = whole_array.capped_hausdorff(a, b, whole_array.identity(b), ids, vs, cap)
    assert fast.tobytes() == capped_hausdorff_padded_roi(a, b, ids, vs, cap).tobytes()
