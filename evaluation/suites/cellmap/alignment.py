"""Bring a submitted array onto the ground truth's voxel grid (CellMap ``MatchedCrop``).

Reproduces ``utils/matched_crop.py`` of janelia-cellmap/cellmap-segmentation-challenge
@0f50f70 step for step (``MatchedCrop._load_source_array``, ``_load_array_chunked`` and
``load_aligned``, as ``utils/eval_utils/scoring.py`` ``match_crop_space`` calls them), including
its quirks, because every one of them moves scores: resampling with scikit-image ``rescale``
(nearest for instance labels, linear + threshold 0.5 for semantic ones), a centred pad/crop
when no voxel size is given, and a translation offset in which only the *input* translation is
snapped to the target grid.
"""

from dataclasses import dataclass

import numpy as np
from skimage.transform import rescale

from evaluation.errors import SubmissionError

SEMANTIC_THRESHOLD = 0.5
# Above this many MiB (as float32) the reference resamples block by block.
CHUNKED_LOADING_MIB = 500
CHUNK_EDGE = max(32, int((100 * 1024 * 1024 / 4) ** (1 / 3)))  # 297 voxels


@dataclass(frozen=True)
class Grid:
    """The target space of one (crop, label): voxel size and translation in nm, z-y-x."""

    voxel_size: tuple[float, ...]
    shape: tuple[int, ...]
    translation: tuple[float, ...]


# A submitted voxel size more than this many times finer or coarser than the crop's, per axis,
# is a unit mistake (micrometres for nanometres is 1000) or an attack, not a resolution.
MAX_SCALE = 256.0
# A translation beyond this many nanometres (1 km) places nothing on any crop.
MAX_TRANSLATION_NM = 1e12


def _vector(attrs: dict, keys: tuple[str, ...], ndim: int, display: str) -> np.ndarray | None:
    """First present attribute among ``keys`` as finite floats, its last ``ndim`` entries."""
    for key in keys:
        if key in attrs:
            value = attrs[key]
            try:
                values = np.asarray([float(v) for v in value], dtype=np.float64) if isinstance(value, (list, tuple)) else None
            except (TypeError, ValueError, OverflowError):
                values = None
            if values is None:
                raise SubmissionError(f"{display}: attribute '{key}' must be a list of numbers")
            if values.size < ndim or not np.all(np.isfinite(values)):
                raise SubmissionError(f"{display}: attribute '{key}' must hold {ndim} finite numbers (z, y, x)")
            return values[-ndim:]
    return None


def source_geometry(attrs: dict, ndim: int, display: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(voxel size, translation) of a submitted array, either possibly absent; refuses voxel
    sizes that are not positive and translations no crop could be at."""
    voxel_size = _vector(attrs, ("voxel_size", "resolution", "scale"), ndim, display)
    translation = _vector(attrs, ("translation", "offset"), ndim, display)
    if voxel_size is not None and not np.all(voxel_size > 0):
        raise SubmissionError(f"{display}: its voxel_size ({_numbers(voxel_size)}) must be positive in every axis (nm, z-y-x)")
    if translation is not None and np.abs(translation).max() > MAX_TRANSLATION_NM:
        raise SubmissionError(
            f"{display}: its translation ({_numbers(translation)}) is beyond any crop's position; give it in nm (z-y-x)"
        )
    return voxel_size, translation


def _numbers(values: np.ndarray) -> str:
    return ", ".join(f"{v:.6g}" for v in values)


def _rescale(image: np.ndarray, scale: np.ndarray, instance: bool) -> np.ndarray:
    """One ``skimage.transform.rescale`` call with the reference's arguments; semantic
    results stay unthresholded (float) so the chunked path can threshold once at the end."""
    if instance:
        return rescale(image, scale, order=0, mode="constant", preserve_range=True).astype(image.dtype)
    if image.dtype == bool:
        image = image.astype(np.float32)
    return rescale(image, scale, order=1, mode="constant", preserve_range=True)


def _rescale_blocks(read_block, shape: tuple[int, ...], dtype, scale: np.ndarray, instance: bool) -> np.ndarray:
    """The reference's chunked resampling: blocks of CHUNK_EDGE voxels rescaled separately and
    written at ``int(start * scale)``, clamped (its block seams are part of the result)."""
    out_shape = tuple(max(1, int(np.round(s * f))) for s, f in zip(shape, scale))
    output = np.zeros(out_shape, dtype=dtype if instance else np.float32)
    starts = [range(0, n, CHUNK_EDGE) for n in shape]
    for z in starts[0]:
        for y in starts[1]:
            for x in starts[2]:
                begin = (z, y, x)
                block = read_block(tuple(slice(b, min(b + CHUNK_EDGE, n)) for b, n in zip(begin, shape)))
                small = _rescale(block, scale, instance)
                at = [int(b * f) for b, f in zip(begin, scale)]
                stop = [min(a + s, o) for a, s, o in zip(at, small.shape, out_shape)]
                output[tuple(slice(a, e) for a, e in zip(at, stop))] = small[tuple(slice(0, e - a) for a, e in zip(at, stop))]
    return output if instance else output > SEMANTIC_THRESHOLD


def _centre_pad_crop(image: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    pad = [((t - s) // 2, t - s - (t - s) // 2) if s < t else (0, 0) for s, t in zip(image.shape, shape)]
    if any(p for pair in pad for p in pair):
        image = np.pad(image, pad, mode="constant", constant_values=0)
    crop = tuple(slice((s - t) // 2, (s - t) // 2 + t) if s > t else slice(None) for s, t in zip(image.shape, shape))
    return image[crop]


def voxel_offset(translation: np.ndarray, grid: Grid) -> np.ndarray:
    """Offset of the input's origin in target voxels. Only the input translation is snapped
    to the grid (reference quirk of ``MatchedCrop.load_aligned``, reproduced); ``//`` is numpy's
    fmod-based floor division, as there."""
    target_vs = np.asarray(grid.voxel_size, dtype=np.float64)
    target_tr = np.asarray(grid.translation, dtype=np.float64)
    snapped = (translation // target_vs) * target_vs
    return ((np.abs(snapped - target_tr) // target_vs) * np.sign(snapped - target_tr)).astype(int)


def _place(image: np.ndarray, offset: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Copy ``image`` into a zero volume of ``shape`` shifted by ``offset`` voxels."""
    result = np.zeros(shape, dtype=image.dtype)
    source, target = [], []
    for rel, size, length_in in zip(offset, shape, image.shape):
        if rel < 0:
            start = -rel
            stop = min(start + size, length_in)
            source.append(slice(start, stop))
            target.append(slice(0, stop - start))
        else:
            stop = min(size, length_in + rel)
            source.append(slice(0, stop - rel))
            target.append(slice(rel, stop))
        if target[-1].stop - target[-1].start <= 0:
            return result
    result[tuple(target)] = image[tuple(source)]
    return result


def inferred_scale(source_shape, grid: Grid) -> np.ndarray | None:
    """head (6b9ad68, ``MatchedCrop._load_source_array``): a large array without a voxel size
    whose every axis is at least as long as the crop's, and not all equal, is taken to be
    finer by the shape ratio and downsampled block by block by ``target / source``."""
    ratios = np.asarray(source_shape, dtype=np.float64) / np.asarray(grid.shape, dtype=np.float64)
    if np.all(ratios >= 1.0) and not np.allclose(ratios, 1.0):
        return 1.0 / ratios
    return None


def check_size_ratio(shape, grid: Grid, max_size_ratio: float, display: str, what: str = "is") -> None:
    """The reference's guard against arrays far larger than their crop (``MAX_VOLUME_SIZE_RATIO``)."""
    ratio = float(np.prod(shape, dtype=np.float64)) / float(np.prod(grid.shape, dtype=np.float64))
    if ratio > max_size_ratio:
        raise SubmissionError(
            f"{display}: {what} {ratio:.0f} times larger than the crop it predicts (limit {max_size_ratio:g}); "
            "submit it at a resolution closer to the crop's"
        )


def resampling(
    source_shape, attrs: dict, grid: Grid, max_size_ratio: float, display: str, infer_scale_from_shape: bool = False
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(scale, voxel size, translation) of a submitted array, from its metadata alone: the
    factor by which it is resampled (None: not resampled), checked before any voxel is read.

    The scale must be within ``MAX_SCALE`` of 1 per axis, and the resampled array no larger
    than ``max_size_ratio`` crops (the reference's own size guard, applied to what is built in
    memory rather than only to what was stored): a 48^3 array declaring a voxel size 20 times
    the crop's would otherwise be upsampled to 960^3 before being cropped."""
    ndim = len(grid.shape)
    check_size_ratio(source_shape, grid, max_size_ratio, display)
    voxel_size, translation = source_geometry(attrs, ndim, display)
    target_vs = np.asarray(grid.voxel_size, dtype=np.float64)
    scale = voxel_size / target_vs if voxel_size is not None and not np.allclose(voxel_size, target_vs) else None
    large = np.prod(source_shape, dtype=np.float64) * 4 / 1024**2 > CHUNKED_LOADING_MIB
    if scale is None and voxel_size is None and large and infer_scale_from_shape:
        scale = inferred_scale(source_shape, grid)
    if scale is not None:
        if voxel_size is not None and not np.all((scale <= MAX_SCALE) & (scale >= 1 / MAX_SCALE)):
            raise SubmissionError(
                f"{display}: its voxel_size ({_numbers(voxel_size)}) differs from the crop's ({_numbers(target_vs)}) by more than "
                f"{MAX_SCALE:g} times in some axis; give it in nm (z-y-x) at a resolution close to the crop's"
            )
        check_size_ratio(
            resampled_shape(source_shape, scale), grid, max_size_ratio, display, "resampled to the crop's voxel size, it would be"
        )
    return scale, voxel_size, translation


def resampled_shape(shape, scale: np.ndarray) -> tuple[int, ...]:
    """``skimage.transform.rescale``'s output shape: ``max(round(n * scale), 1)`` per axis."""
    return tuple(int(n) for n in np.maximum(np.round(np.asarray(shape, dtype=np.float64) * scale), 1))


def align(
    source,
    attrs: dict,
    grid: Grid,
    instance: bool,
    read,
    max_size_ratio: float,
    display: str,
    infer_scale_from_shape: bool = False,
) -> np.ndarray:
    """The submitted array ``source`` (anything with shape/dtype; ``read(region)`` loads a
    region of it) as an array of ``grid.shape`` on the target grid.

    ``instance`` chooses nearest-neighbour resampling and must come from the reference's
    global instance class list (``match_crop_space`` hands ``config.py`` ``INSTANCE_CLASSES``
    to ``MatchedCrop``, whatever list the caller scores with). ``infer_scale_from_shape`` adds
    head's rule for large arrays without a voxel size (``inferred_scale``); v2 centre-crops them."""
    ndim = len(grid.shape)
    if len(source.shape) != ndim:
        raise SubmissionError(f"{display}: has {len(source.shape)} dimensions; expected a {ndim}-D (z, y, x) array")
    if 0 in source.shape:
        raise SubmissionError(f"{display}: has an empty axis (shape {tuple(source.shape)})")
    scale, voxel_size, translation = resampling(tuple(source.shape), attrs, grid, max_size_ratio, display, infer_scale_from_shape)
    large = np.prod(source.shape, dtype=np.float64) * 4 / 1024**2 > CHUNKED_LOADING_MIB
    if scale is not None and large:
        image = _rescale_blocks(read, tuple(source.shape), source.dtype, scale, instance)
    else:
        image = read(Ellipsis)
        if scale is not None:
            image = _rescale(image, scale, instance)
            if not instance:
                image = image > SEMANTIC_THRESHOLD
        elif voxel_size is None and image.shape != tuple(grid.shape):
            image = _centre_pad_crop(image, tuple(grid.shape))
    offset = voxel_offset(translation, grid) if translation is not None else np.zeros(ndim, dtype=int)
    if offset.any() or image.shape != tuple(grid.shape):
        return _place(image, offset, tuple(grid.shape))
    return image
