"""Alignment to the truth grid (CellMap MatchedCrop), against hand-worked examples."""

import numpy as np
import pytest
from helpers.cellmap_alignment import _centre_pad_crop, _place, _rescale_blocks, align

from evaluation.errors import SubmissionError
from evaluation.suites.cellmap.alignment import Grid, voxel_offset


def _align(image, attrs, grid, instance=True, ratio=4096):
    return align(image, attrs, grid, instance, read=lambda region: image[region], max_size_ratio=ratio, display="crop1/x")


def test_translation_snapping_is_asymmetric():
    """``MatchedCrop.load_aligned`` snaps only the input translation (case n): target z
    translation 123.45 nm at 10 nm; an input starting one voxel later snaps to 130 and stays
    put, one starting a voxel earlier moves by one."""
    grid = Grid((10.0, 4.0, 4.0), (24, 48, 48), (123.45, 4002.0, 8006.0))
    assert voxel_offset(np.array([133.45, 4002.0, 8006.0]), grid).tolist() == [0, 0, 0]
    assert voxel_offset(np.array([113.45, 4002.0, 8006.0]), grid).tolist() == [-1, 0, 0]


def test_offset_uses_exact_floor_division():
    """1.0 // 0.1 is 9 (fmod semantics), not floor(1.0 / 0.1) = 10: the snapped origin is
    0.9 and 0.9 // 0.1 = 8."""
    grid = Grid((0.1,), (10,), (0.0,))
    assert voxel_offset(np.array([1.0]), grid).tolist() == [8]


def test_centre_pad_and_crop():
    image = np.arange(2 * 4 * 6).reshape(2, 4, 6)
    out = _centre_pad_crop(image, (4, 4, 4))
    assert out.shape == (4, 4, 4)
    assert (out[0] == 0).all() and (out[3] == 0).all()
    assert (out[1:3] == image[:, :, 1:5]).all()


def test_place_with_negative_and_positive_offsets():
    image = np.arange(1, 6)
    assert _place(image, np.array([-2]), (4,)).tolist() == [3, 4, 5, 0]
    assert _place(image, np.array([2]), (4,)).tolist() == [0, 0, 1, 2]
    assert _place(image, np.array([9]), (4,)).tolist() == [0, 0, 0, 0]


def test_nearest_upsampling_of_instance_labels_repeats_voxels():
    image = np.arange(1, 9, dtype=np.uint32).reshape(2, 2, 2)
    grid = Grid((8.0, 8.0, 8.0), (4, 4, 4), (0.0, 0.0, 0.0))
    out = _align(image, {"voxel_size": [16, 16, 16], "translation": [0, 0, 0]}, grid)
    assert out.dtype == np.uint32
    assert (out == image.repeat(2, 0).repeat(2, 1).repeat(2, 2)).all()


def test_semantic_linear_resampling_is_thresholded():
    image = np.zeros((4, 4, 4), np.uint8)
    image[:, :, 2:] = 1
    grid = Grid((8.0, 8.0, 8.0), (8, 8, 8), (0.0, 0.0, 0.0))
    out = _align(image, {"voxel_size": [16, 16, 16]}, grid, instance=False)
    assert out.dtype == bool and out.shape == (8, 8, 8)
    # zero padding outside the volume (mode 'constant') lowers the corners: look inside
    assert out[1:7, 1:7, 5:7].all() and not out[:, :, :3].any()


def test_native_float_prediction_is_not_thresholded():
    image = np.full((2, 2, 2), 0.2, np.float32)
    grid = Grid((8.0, 8.0, 8.0), (2, 2, 2), (0.0, 0.0, 0.0))
    assert (_align(image, {"voxel_size": [8, 8, 8]}, grid, instance=False) == image).all()


@pytest.mark.parametrize(
    "image, attrs, message",
    [
        (np.zeros((2, 2)), {}, "2 dimensions"),
        (np.zeros((2, 0, 2)), {}, "empty axis"),
        (np.zeros((2, 2, 2)), {"voxel_size": ["a", 1, 1]}, "list of numbers"),
        (np.zeros((2, 2, 2)), {"translation": [1, 2]}, "3 finite numbers"),
        (np.zeros((2, 2, 2)), {"voxel_size": [1, float("nan"), 1]}, "3 finite numbers"),
        (np.zeros((64, 64, 64)), {}, "times larger"),
        (np.zeros((2, 2, 2)), {"voxel_size": [8, 0, 8]}, "positive"),
        (np.zeros((2, 2, 2)), {"voxel_size": [8, -8, 8]}, "positive"),
        (np.zeros((2, 2, 2)), {"voxel_size": [8, 1e-300, 8]}, "more than 256 times"),
        (np.zeros((2, 2, 2)), {"voxel_size": [8, 1e300, 8]}, "more than 256 times"),
        (np.zeros((2, 2, 2)), {"voxel_size": "8nm"}, "list of numbers"),
        (np.zeros((2, 2, 2)), {"voxel_size": [8, 10**400, 8]}, "list of numbers"),
        (np.zeros((2, 2, 2)), {"translation": [0, 1e300, 0]}, "beyond any crop"),
        # 20 times the crop's voxel size: resampled to 40^3 = 8000 crops, beyond the ratio guard
        (
            np.zeros((2, 2, 2)),
            {"voxel_size": [160, 160, 160]},
            "resampled to the crop's voxel size, it would be 8000 times larger",
        ),
    ],
)
def test_unusable_arrays_are_submission_errors(image, attrs, message):
    grid = Grid((8.0, 8.0, 8.0), (2, 2, 2), (0.0, 0.0, 0.0))
    with pytest.raises(SubmissionError, match=message):
        _align(image, attrs, grid, ratio=1000)


@pytest.mark.parametrize("scale", [2.0, 0.5])
def test_blockwise_resampling_equals_whole_array_when_blocks_align(monkeypatch, scale):
    """The reference resamples arrays over 500 MiB in blocks of CHUNK_EDGE voxels. For nearest
    resampling by a factor that maps block edges onto whole voxels, the blocks must tile the
    whole-array result exactly (seams only appear for linear interpolation)."""
    from skimage.transform import rescale

    from evaluation.suites.cellmap import alignment

    monkeypatch.setattr(alignment, "CHUNK_EDGE", 4)
    image = np.random.default_rng(0).integers(0, 50, size=(12, 8, 16)).astype(np.uint32)
    blocks = _rescale_blocks(lambda region: image[region], image.shape, image.dtype, np.array([scale] * 3), instance=True)
    whole = rescale(image, scale, order=0, mode="constant", preserve_range=True).astype(image.dtype)
    assert blocks.shape == whole.shape and (blocks == whole).all()


def test_large_semantic_arrays_take_the_blockwise_path(monkeypatch):
    """Above CHUNKED_LOADING_MIB (as float32) and with a voxel size to resample, alignment reads
    and resamples block by block and thresholds once at the end, as the reference does."""
    from evaluation.suites.cellmap import alignment

    monkeypatch.setattr(alignment, "CHUNKED_LOADING_MIB", 0)
    monkeypatch.setattr(alignment, "CHUNK_EDGE", 4)
    regions = []
    image = np.zeros((8, 8, 8), np.uint8)
    image[2:6, 2:6, 2:6] = 1
    grid = Grid((8.0, 8.0, 8.0), (16, 16, 16), (0.0, 0.0, 0.0))
    out = align(
        image,
        {"voxel_size": [16, 16, 16]},
        grid,
        False,
        read=lambda region: regions.append(region) or image[region],
        max_size_ratio=4096,
        display="crop1/x",
    )
    assert out.dtype == bool and out.shape == (16, 16, 16) and not out[:3].any()
    assert len(regions) == 8  # 2 x 2 x 2 blocks, never the whole array
    # each block is interpolated with zeros beyond its edges (mode "constant",
    # ``MatchedCrop._load_array_chunked``): a single seam stays above the threshold, where
    # three seams meet the value drops below it
    assert out[6, 6, 4:12].all()
    assert not out[8, 8, 7] and not out[7, 8, 8]


@pytest.mark.parametrize("seed", range(60))
def test_compiled_linear_interpolation_equals_scipys_to_the_bit(seed):
    """The compiled linear kernel must give every voxel of ``rescale(order=1)`` exactly as
    scipy's ``zoom_shift`` does (same products, same order of addition), and its fused mask
    exactly ``region > 0.5`` (with the block-wise path's float32 store): random shapes with
    size-1 and odd axes, up- and down-scaling, booleans, small integers, negative values,
    values within float32's rounding of the threshold, any box."""
    from skimage.transform import rescale

    from evaluation.suites.cellmap.alignment import SEMANTIC_THRESHOLD, _prepare

    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.choice([1, 2, 3, 5, 8, 13], size=3))
    scale = np.array(rng.choice([2.0, 4.0, 0.5, 3.0, 1.5], size=3) if seed % 2 else [rng.choice([2.0, 4.0, 0.5])] * 3)
    image = [
        lambda: rng.random(shape) > 0.5,
        lambda: rng.normal(size=shape).astype(np.float32),
        lambda: rng.normal(size=shape),
        lambda: rng.integers(0, 4, size=shape).astype(np.uint8),
        lambda: 0.5 + rng.choice([-1e-9, 1e-9, 0.0, 1.0], size=shape),
        lambda: 0.5 + rng.integers(-3, 4, size=shape) * 2.0**-52,  # sums a few ulps off 0.5
    ][seed % 6]()
    float_image = image.astype(np.float32) if image.dtype == bool else image  # the reference's ``_rescale``
    whole = rescale(float_image, scale, order=1, mode="constant", preserve_range=True)
    rescaling = _prepare(image.copy(), scale, instance=False)  # which filters its own array in place
    full = tuple(slice(0, n) for n in rescaling.shape)
    boxes = [full] + [tuple(slice(int(a), int(b) + 1) for a, b in (sorted(rng.integers(0, n, 2)) for n in rescaling.shape))]
    for box in boxes:
        compiled = rescaling._raw(box)
        masks = rescaling.mask(box), rescaling.mask(box, as_float32=True)
        assert rescaling.identity or rescaling._tables, "the compiled path was not taken"
        rescaling._tables = False  # scipy's C routine
        reference = rescaling._raw(box)
        values = rescaling.region(box)
        rescaling._tables = None
        assert (compiled + 0).tobytes() == (reference + 0).tobytes()  # + 0 turns -0.0 into 0.0
        assert (masks[0] == (values > SEMANTIC_THRESHOLD)).all()
        assert (masks[1] == (values.astype(np.float32) > SEMANTIC_THRESHOLD)).all()
    assert (rescaling.region(full) + 0).tobytes() == (whole + 0).tobytes()
