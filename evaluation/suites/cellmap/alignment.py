"""Bring a submitted array onto the ground truth's voxel grid (CellMap ``MatchedCrop``).

Reproduces ``utils/matched_crop.py`` of janelia-cellmap/cellmap-segmentation-challenge
@0f50f70 step for step (``MatchedCrop._load_source_array``, ``_load_array_chunked`` and
``load_aligned``, as ``utils/eval_utils/scoring.py`` ``match_crop_space`` calls them), including
its quirks, because every one of them moves scores: resampling with scikit-image ``rescale``
(nearest for instance labels, linear + threshold 0.5 for semantic ones), a centred pad/crop
when no voxel size is given, and a translation offset in which only the *input* translation is
snapped to the target grid.

The reference builds the whole aligned array; ``aligned`` gives the same array as a volume
(``volumes.py``) read region by region: the translation and the centre pad/crop are integer
windows on the stored array, and resampling evaluates scikit-image's own interpolation
(``scipy.ndimage``'s ``zoom_shift``, which ``ndimage.zoom`` calls) for just the requested
output region, so every voxel is computed by the same arithmetic as in the whole-array call
(``test/helpers/cellmap_alignment.py`` keeps the whole-array form the tests compare with).
"""

import itertools
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from evaluation.errors import SubmissionError
from evaluation.suites.cellmap import linear
from evaluation.suites.cellmap.volumes import Box, Buffers, Window, box_shape

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


def voxel_offset(translation: np.ndarray, grid: Grid) -> np.ndarray:
    """Offset of the input's origin in target voxels. Only the input translation is snapped
    to the grid (reference quirk of ``MatchedCrop.load_aligned``, reproduced); ``//`` is numpy's
    fmod-based floor division, as there."""
    target_vs = np.asarray(grid.voxel_size, dtype=np.float64)
    target_tr = np.asarray(grid.translation, dtype=np.float64)
    snapped = (translation // target_vs) * target_vs
    return ((np.abs(snapped - target_tr) // target_vs) * np.sign(snapped - target_tr)).astype(int)


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


# --------------------------------------------------------------------------------------------
# The aligned prediction as a volume, region by region


class _Rescaling:
    """``skimage.transform.rescale(image, scale, order, mode="constant", preserve_range=True)``
    (scikit-image ``transform/_warps.py``: ``rescale`` -> ``resize`` -> ``ndimage.zoom`` with
    ``grid_mode=True`` and ``_clip_warp_output``) split in two: ``__init__`` does what concerns
    the whole input (float conversion, the anti-aliasing Gaussian, the input's value range),
    ``region`` evaluates any box of the output.

    ``ndimage.zoom`` computes every output voxel from per-axis coordinate tables
    ``((k + shift) + 0.5) * zoom - 0.5``; calling its C routine with an integer ``shift`` and an
    output of the box's shape evaluates exactly the voxels ``k + shift`` of the whole call. The
    clip needs the output's own minimum and maximum only when 0 lies outside the input's range
    (``preserve_cval``); they are then computed once, in slabs."""

    def __init__(self, image: np.ndarray, scale, order: int):
        from scipy import ndimage  # here, not at import: importing it takes 0.4 s (resampling only)

        if image.dtype == np.float16:
            image = image.astype(np.float32)
        # linear interpolation works on floats: booleans as float32 (the reference's ``_rescale``
        # converts them), other non-float inputs as float64 (``convert_to_float``); the
        # conversion is exact, so it is made only where something needs the float array
        float_type = image.dtype
        if order > 0 and image.dtype.char not in "df":
            float_type = np.dtype(np.float32 if image.dtype == bool else np.float64)
        input_type = float_type if image.dtype == bool else image.dtype  # what ``resize`` sees
        in_shape = image.shape
        out_shape = _rescale_shape(in_shape, scale)
        factors = np.divide(in_shape, out_shape)  # resize
        anti_aliasing = (
            input_type.kind != "b"
            and not (np.issubdtype(input_type, np.integer) and order == 0)
            and any(x < y for x, y in zip(out_shape, in_shape))
        )
        low, high, self._nan = self._range(image)
        self.minimum, self.maximum = float_type.type(low), float_type.type(high)
        self._float_type = float_type
        if anti_aliasing:
            sigma = np.maximum(0, (factors - 1) / 2)
            converted = image.dtype != float_type
            image = image.astype(float_type) if converted else image
            # in place when the array is ours: the same values (each line is filtered from a
            # copy), without a second input-sized array
            own = converted or (image.flags.owndata and image.flags.writeable)
            image = ndimage.gaussian_filter(image, sigma, cval=0, mode="grid-constant", output=image if own else None)
        zoom = [1 / f for f in factors]
        self.shape = tuple(int(round(ii * jj)) for ii, jj in zip(in_shape, zoom))  # ndimage.zoom
        self.identity = all(z == 1 for z in zoom)  # ndimage.zoom then returns a copy of its input
        self.zoom = np.ascontiguousarray(np.divide(np.array(in_shape), np.array(self.shape), dtype=np.float64))
        self.source, self.order = image, order
        self._filtered = image if image.dtype == float_type else None
        self._mode = ndimage._ni_support._extend_mode_to_code("grid-constant")
        self._bounds, self._tables = None, None

    @property
    def filtered(self) -> np.ndarray:
        """The (filtered) input as the float array ``zoom`` interpolates."""
        if self._filtered is None:
            self._filtered = self.source.astype(self._float_type)
        return self._filtered

    @staticmethod
    def _range(image):
        low = np.min(image) if image.size else 0
        if np.isnan(low):
            return np.nanmin(image), np.nanmax(image), True
        return low, np.max(image), False

    def _raw(self, box: Box) -> np.ndarray:
        if self.identity:
            return self.filtered[box].copy()
        if self.order == 1 and self._linear_tables() is not None:
            return linear.values(self.source, self._tables, box, self._float_type)
        from scipy import ndimage

        out = np.zeros(box_shape(box), dtype=self._float_type)
        shift = np.array([s.start for s in box], dtype=np.float64)
        ndimage._nd_image.zoom_shift(self.filtered, self.zoom, shift, out, self.order, self._mode, 0.0, 0, True)
        return out

    def _linear_tables(self):
        """``linear.tables`` for this call, or None where the C routine must run: without
        numba, and for arrays with NaN or infinities (the kernels leave out the terms of
        missing neighbours, where the C loop adds value * 0, which is NaN for them)."""
        if self._tables is None:
            self._tables = False
            finite = not self._nan and np.isfinite([self.minimum, self.maximum]).all()
            if self.source.ndim == 3 and finite:
                self._tables = linear.tables(self.source.shape, self.shape, self.zoom) or False
        return self._tables or None

    def _clip_bounds(self):
        """``_clip_warp_output``'s bounds, from the input's range and, if 0 is outside it, the
        whole output's."""
        if self._bounds is None:
            low, high = self.minimum, self.maximum
            if not low <= 0 <= high:
                reduce_min, reduce_max = (np.nanmin, np.nanmax) if self._nan else (np.min, np.max)
                lows, highs = [], []
                step = max(1, (8 << 20) // max(1, math.prod(self.shape[1:])))
                for z in range(0, self.shape[0], step):
                    part = self._raw((slice(z, min(z + step, self.shape[0])),) + tuple(slice(0, n) for n in self.shape[1:]))
                    lows.append(reduce_min(part))
                    highs.append(reduce_max(part))
                if reduce_min(np.array(lows)) <= 0 <= reduce_max(np.array(highs)):
                    zero = self._float_type.type(0)
                    low, high = min(low, zero), max(high, zero)
            self._bounds = (np.asarray(low), np.asarray(high))
        return self._bounds

    def region(self, box: Box) -> np.ndarray:
        out = self._raw(box)
        low, high = self._clip_bounds()
        np.clip(out, low, high, out=out)
        return out

    def mask(self, box: Box, as_float32: bool = False) -> np.ndarray:
        """``region(box) > SEMANTIC_THRESHOLD``, the region stored as float32 first if
        ``as_float32``, in one compiled pass where the kernel applies."""
        if self.identity or self.order != 1 or self._linear_tables() is None:
            values = self.region(box)
            return (values.astype(np.float32) if as_float32 else values) > SEMANTIC_THRESHOLD
        low, high = self._clip_bounds()
        single, largest = self._float_type == np.float32, max(abs(float(self.minimum)), abs(float(self.maximum)))
        return linear.mask(self.source, self._tables, box, low, high, single, as_float32, SEMANTIC_THRESHOLD, largest)


def _rescale_shape(shape, scale) -> tuple:
    """``rescale``'s output shape handed to ``resize`` (floats): ``max(round(scale * n), 1)``."""
    return tuple(np.maximum(np.round(np.atleast_1d(scale) * np.asarray(shape)), 1))


def _zoomed_length(length: int, scale: float) -> int:
    """The length of one axis of ``rescale``'s result, as ``ndimage.zoom`` computes it."""
    (out,) = _rescale_shape((length,), np.array([scale]))
    return int(round(length * (1 / (length / out))))


def _prepare(block: np.ndarray, scale, instance: bool) -> _Rescaling:
    """``_rescale``'s call on ``block``: nearest for instances, linear for semantic labels."""
    return _Rescaling(block, scale, 0 if instance else 1)


class Resampled:
    """The whole-array path of ``align`` (``_rescale`` of the array read at once, then the 0.5
    threshold for semantic labels) as a volume. The input is held (as the float array that
    ``rescale`` interpolates) for the task's duration; its size is bounded by
    ``CHUNKED_LOADING_MIB``, above which ``BlockResampled`` applies."""

    def __init__(self, read, source_dtype, scale, instance: bool):
        self.instance, self.source_dtype = instance, np.dtype(source_dtype)
        self.rescaling = _prepare(read(Ellipsis), scale, instance)
        self.shape = self.rescaling.shape
        self.dtype = self.source_dtype if instance else np.dtype(bool)

    reusable = False

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        if not self.instance:
            return self.rescaling.mask(box)
        return self.rescaling.region(box).astype(self.source_dtype)


class BlockResampled:
    """``_rescale_blocks`` as a volume: the source in blocks of CHUNK_EDGE voxels, each resampled
    on its own and written at ``int(start * scale)``, later blocks over earlier ones. Along each
    axis, every output index therefore belongs to the last block whose output covers it (or to
    none: zero); a region is assembled from the parts its owning blocks give, each evaluated by
    that block's own ``rescale``. Prepared blocks are kept in a small cache."""

    CACHE_BYTES = 512 << 20

    def __init__(self, read, source_shape, source_dtype, scale, instance: bool):
        self.read_source, self.source_shape = read, tuple(int(n) for n in source_shape)
        self.source_dtype, self.scale, self.instance = np.dtype(source_dtype), np.asarray(scale, dtype=np.float64), instance
        self.shape = tuple(max(1, int(np.round(s * f))) for s, f in zip(self.source_shape, self.scale))
        self.dtype = self.source_dtype if instance else np.dtype(bool)
        self.owners = []
        for n, f, out in zip(self.source_shape, self.scale, self.shape):
            owner = np.full(out, -1, dtype=np.int64)
            at = np.zeros(len(range(0, n, CHUNK_EDGE)), dtype=np.int64)
            for j, b in enumerate(range(0, n, CHUNK_EDGE)):
                small = _zoomed_length(min(b + CHUNK_EDGE, n) - b, f)
                at[j] = int(b * f)
                owner[at[j] : min(at[j] + small, out)] = j
            self.owners.append((owner, at))
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def _block(self, index) -> _Rescaling:
        with self._lock:  # instances are measured in threads
            if index in self._cache:
                self._cache.move_to_end(index)
                return self._cache[index]
            region = tuple(slice(j * CHUNK_EDGE, min((j + 1) * CHUNK_EDGE, n)) for j, n in zip(index, self.source_shape))
            block = _prepare(self.read_source(region), self.scale, self.instance)
            self._cache[index] = block
            while len(self._cache) > 1 and sum(b.source.nbytes for b in self._cache.values()) > self.CACHE_BYTES:
                self._cache.popitem(last=False)
            return block

    reusable = False

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        out = np.zeros(box_shape(box), dtype=self.source_dtype if self.instance else bool)
        runs = []
        for s, (owner, _) in zip(box, self.owners):
            o = owner[s.start : s.stop]
            edges = np.flatnonzero(np.diff(o)) + 1
            starts, stops = np.concatenate([[0], edges]), np.concatenate([edges, [o.size]])
            runs.append([(int(o[a]), a, b) for a, b in zip(starts, stops) if o[a] >= 0])
        for parts in itertools.product(*runs):
            index = tuple(p[0] for p in parts)
            block = self._block(index)
            local = tuple(
                slice(s.start + a - int(at[j]), s.start + b - int(at[j]))
                for s, (j, a, b), (_, at) in zip(box, parts, self.owners)
            )
            # the reference writes the blocks' values into a float32 array, then thresholds
            values = block.region(local).astype(self.source_dtype) if self.instance else block.mask(local, as_float32=True)
            out[tuple(slice(a, b) for _, a, b in parts)] = values
        return out


def aligned(
    source,
    attrs: dict,
    grid: Grid,
    instance: bool,
    read,
    max_size_ratio: float,
    display: str,
    infer_scale_from_shape: bool = False,
    reusable: bool = False,
):
    """``align``'s result as a volume of ``grid.shape`` (same checks, same values, same dtype),
    read region by region: ``read(region)`` loads a region of ``source`` (``read(region, out=)``
    into a given array too, if ``reusable``)."""
    ndim = len(grid.shape)
    if len(source.shape) != ndim:
        raise SubmissionError(f"{display}: has {len(source.shape)} dimensions; expected a {ndim}-D (z, y, x) array")
    if 0 in source.shape:
        raise SubmissionError(f"{display}: has an empty axis (shape {tuple(source.shape)})")
    scale, voxel_size, translation = resampling(tuple(source.shape), attrs, grid, max_size_ratio, display, infer_scale_from_shape)
    large = np.prod(source.shape, dtype=np.float64) * 4 / 1024**2 > CHUNKED_LOADING_MIB
    stored = _Reader(read, tuple(source.shape), source.dtype, getattr(source, "stored", None), reusable=reusable)
    if scale is not None and large:
        image = BlockResampled(read, source.shape, source.dtype, scale, instance)
    elif scale is not None:
        image = Resampled(read, source.dtype, scale, instance)
    elif voxel_size is None and tuple(source.shape) != tuple(grid.shape):
        # _centre_pad_crop: padded by (t - s) // 2 before, or cropped from (s - t) // 2
        origin = [(s - t) // 2 if s > t else -((t - s) // 2) for s, t in zip(source.shape, grid.shape)]
        image = Window(stored, origin, grid.shape)
    else:
        image = stored
    offset = voxel_offset(translation, grid) if translation is not None else np.zeros(ndim, dtype=int)
    return Window(image, -offset, grid.shape)


class _Reader:
    """The stored array, region by region; ``stored(box)`` from the array when it can tell.
    With ``reusable``, ``read`` takes an ``out`` array (``zarr_store.read_array``), one per
    thread (``volumes.Buffers``); ``read`` must then be safe in threads (the zarr reader is)."""

    def __init__(self, read, shape, dtype, stored=None, reusable: bool = False):
        self.read_region, self.shape, self.dtype, self._stored = read, shape, np.dtype(dtype), stored
        self.reusable, self._held = reusable, Buffers()
        self.threadsafe = reusable

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        if not (reuse and self.reusable):
            return self.read_region(box)
        return self.read_region(box, out=self._held.get(box_shape(box), self.dtype))

    def stored(self, box: Box) -> bool:
        return True if self._stored is None else self._stored(box)
