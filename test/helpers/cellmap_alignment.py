"""The CellMap reference's alignment on whole arrays, as a test oracle for the streamed
``alignment.aligned``: ``align`` is ``MatchedCrop.load_aligned`` (janelia-cellmap/
cellmap-segmentation-challenge ``utils/matched_crop.py``) on the whole submitted array, with
its chunked resampling (``_rescale_blocks``: blocks rescaled separately, their seams part of
the result), its centre pad/crop and its shift into the crop. The grader never loads a
prediction whole; the tests and ``helpers.cellmap_reference`` compare against this."""

import numpy as np

from evaluation.errors import SubmissionError
from evaluation.suites.cellmap import alignment  # its constants read at call time (tests patch them)
from evaluation.suites.cellmap.alignment import Grid, resampling, voxel_offset


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
    large = np.prod(source.shape, dtype=np.float64) * 4 / 1024**2 > alignment.CHUNKED_LOADING_MIB
    if scale is not None and large:
        image = _rescale_blocks(read, tuple(source.shape), source.dtype, scale, instance)
    else:
        image = read(Ellipsis)
        if scale is not None:
            image = _rescale(image, scale, instance)
            if not instance:
                image = image > alignment.SEMANTIC_THRESHOLD
        elif voxel_size is None and image.shape != tuple(grid.shape):
            image = _centre_pad_crop(image, tuple(grid.shape))
    offset = voxel_offset(translation, grid) if translation is not None else np.zeros(ndim, dtype=int)
    if offset.any() or image.shape != tuple(grid.shape):
        return _place(image, offset, tuple(grid.shape))
    return image


def _rescale(image: np.ndarray, scale: np.ndarray, instance: bool) -> np.ndarray:
    """One ``skimage.transform.rescale`` call with the reference's arguments; semantic
    results stay unthresholded (float) so the chunked path can threshold once at the end."""
    from skimage.transform import rescale  # here, not at import: with scipy.ndimage, 0.5 s

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
    starts = [range(0, n, alignment.CHUNK_EDGE) for n in shape]
    for z in starts[0]:
        for y in starts[1]:
            for x in starts[2]:
                begin = (z, y, x)
                block = read_block(tuple(slice(b, min(b + alignment.CHUNK_EDGE, n)) for b, n in zip(begin, shape)))
                small = _rescale(block, scale, instance)
                at = [int(b * f) for b, f in zip(begin, scale)]
                stop = [min(a + s, o) for a, s, o in zip(at, small.shape, out_shape)]
                output[tuple(slice(a, e) for a, e in zip(at, stop))] = small[tuple(slice(0, e - a) for a, e in zip(at, stop))]
    return output if instance else output > alignment.SEMANTIC_THRESHOLD


def _centre_pad_crop(image: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    pad = [((t - s) // 2, t - s - (t - s) // 2) if s < t else (0, 0) for s, t in zip(image.shape, shape)]
    if any(p for pair in pad for p in pair):
        image = np.pad(image, pad, mode="constant", constant_values=0)
    crop = tuple(slice((s - t) // 2, (s - t) // 2 + t) if s > t else slice(None) for s, t in zip(image.shape, shape))
    return image[crop]


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
