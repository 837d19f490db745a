"""The arrays of one (crop, label) as *volumes*: ``readers.regions.RegionArray``s (``shape``,
``dtype``, ``read(box)``, ``stored(box)``), where ``box`` is a tuple of step-1 slices with
explicit bounds. A task reads its
truth, aligned prediction and mask region by region instead of whole, so that its memory does
not grow with the crop (a 1000^3 crop is 8 GB as uint64).

- ``ArrayVolume``: a numpy array (the functions' array API, tests, small crops);
- ``ZarrVolume``: a zarr array through the grader's own bounded reader (``readers/zarr_store``,
  ``Array.read(region)``: only the chunks that intersect the region are decoded);
- ``Window``: another volume seen through an integer shift, zero outside it (the translation
  offset and the centre pad/crop of ``utils/matched_crop.py`` ``MatchedCrop.load_aligned``);
- ``Masked``: ``volume * mask`` region by region, the very expression ``scoring.py``
  ``score_label`` applies to whole arrays, so values and dtypes are the same;
- ``Planar``: a 2-D crop seen as a 3-D volume of one plane (the instance pass is 3-D);
- ``tiles``: the crop cut into boxes aligned to the truth's chunks, in raster order, each of at
  most a given number of voxels: the unit of every streamed pass.

``read(box, reuse=True)`` may return an array that the next such read in the same thread
overwrites (``Buffers``: one per thread, the instance pass reads tiles on two): the passes over
tiles use it (a fresh array of hundreds of MB costs its page faults on every tile), the
per-instance reads do not. ``stored(box)`` is False when a box certainly holds only zeros.

The resampled prediction (``alignment.Resampled``, ``alignment.BlockResampled``) is a volume too.
"""

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np

from evaluation.errors import participant_file
from evaluation.metrics.overlap import BinaryCounts
from evaluation.readers import zarr_store

Box = tuple[slice, ...]

# Voxels of one tile of the instance pass at most (~40 bytes each at its peak: truth,
# prediction, mask, components, contingency keys) and bytes per tile of the semantic pass. A crop
# of up to TILE_VOXELS voxels (256^3 is 16.8 M) is one tile, read once and kept for the
# distances; a larger one is cut into tiles of about SPARSE_TILE_VOXELS (a 128^3 chunk), so that
# the tiles where neither array stores a chunk are skipped.
TILE_VOXELS = 32 << 20
SPARSE_TILE_VOXELS = 2 << 20
SEMANTIC_TILE_BYTES = 96 << 20
CACHE_BYTES = 192 << 20  # decoded chunks kept for the per-instance reads of one array


def whole(shape) -> Box:
    return tuple(slice(0, int(n)) for n in shape)


def box_shape(box: Box) -> tuple[int, ...]:
    return tuple(s.stop - s.start for s in box)


def box_size(box: Box) -> int:
    return math.prod(box_shape(box))


def _buffer(held: np.ndarray | None, shape, dtype) -> np.ndarray:
    """An array of ``shape`` on ``held``'s memory if it is large enough (tiles differ in size
    at the crop's edges), else a new one (to be held by the caller from then on)."""
    size = math.prod(shape)
    if held is not None and held.dtype == dtype and held.size >= size:
        return held.reshape(-1)[:size].reshape(shape)
    return np.empty(shape, dtype)


class Buffers:
    """The buffer a volume's ``read(box, reuse=True)`` returns, one per thread: the instance
    pass reads tiles in several threads (``tiles.tile_works``), each overwriting only its own."""

    def __init__(self):
        self._local = threading.local()

    def get(self, shape, dtype) -> np.ndarray:
        held = getattr(self._local, "held", None)
        out = _buffer(held, shape, dtype)
        if held is None or out.base is None:
            self._local.held = out
        return out


def threadsafe(volume) -> bool:
    """Whether several threads may read ``volume`` at once: this module's volumes and the
    stored arrays' readers (their buffers are per thread, their chunk caches locked); a
    resampled prediction keeps blocks of its own, read by one thread."""
    if isinstance(volume, (ArrayVolume, ZarrVolume)):
        return True
    if isinstance(volume, (Window, Planar)):
        return threadsafe(volume.inner)
    if isinstance(volume, Masked):
        return threadsafe(volume.volume) and threadsafe(volume.mask)
    return bool(getattr(volume, "threadsafe", False))


class ArrayVolume:
    """An array in C order (``cc3d`` numbers components in the memory order of its input; the
    arrays read from zarr are in C order)."""

    def __init__(self, array: np.ndarray):
        self.array = np.ascontiguousarray(array)
        self.shape, self.dtype = tuple(array.shape), array.dtype

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        return self.array[box]

    def stored(self, box: Box) -> bool:
        return True


def as_volume(data):
    """A volume as is, an array as an ``ArrayVolume``."""
    return data if hasattr(data, "read") and hasattr(data, "shape") else ArrayVolume(np.asarray(data))


class ChunkCache:
    """Region reads of a zarr array assembled from whole decoded chunks kept in a small LRU
    cache: the per-instance boxes of the distances overlap the same chunks again and again (a
    128^3 uint64 chunk is 16 MB to decode for a box corner). Regions spanning many chunks are
    read directly. Safe to use from several threads."""

    def __init__(self, array: zarr_store.Array, display: str, owner=participant_file, budget: int = CACHE_BYTES):
        self.array, self.display, self.owner, self.budget = array, display, owner, budget
        self.grid = tuple(int(c) for c in (array.shards or array.chunks))
        self._chunks: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def _chunk(self, coords) -> np.ndarray:
        with self._lock:
            if coords in self._chunks:
                self._chunks.move_to_end(coords)
                return self._chunks[coords]
        region = tuple(slice(c * g, min((c + 1) * g, n)) for c, g, n in zip(coords, self.grid, self.array.shape))
        with self.owner():
            chunk = zarr_store.read_array(self.array, self.display, region=region)
        with self._lock:
            self._chunks[coords] = chunk
            size = sum(c.nbytes for c in self._chunks.values())
            while len(self._chunks) > 1 and size > self.budget:
                size -= self._chunks.popitem(last=False)[1].nbytes
        return chunk

    def read(self, box: Box) -> np.ndarray:
        low = [s.start // g for s, g in zip(box, self.grid)]
        high = [-(-s.stop // g) for s, g in zip(box, self.grid)]
        span = math.prod(h - lo for lo, h in zip(low, high))
        chunk_bytes = math.prod(self.grid) * self.array.dtype.itemsize
        if span > 8 or span * chunk_bytes > self.budget // 2:  # a tile, or a box over many chunks
            with self.owner():
                return zarr_store.read_array(self.array, self.display, region=box)
        out = np.empty(box_shape(box), self.array.dtype)
        for offset in np.ndindex(*[h - lo for lo, h in zip(low, high)]):
            coords = tuple(lo + o for lo, o in zip(low, offset))
            chunk = self._chunk(coords)
            source, target = [], []
            for c, g, s in zip(coords, self.grid, box):
                a, b = max(c * g, s.start), min((c + 1) * g, s.stop)
                source.append(slice(a - c * g, b - c * g))
                target.append(slice(a - s.start, b - s.start))
            out[tuple(target)] = chunk[tuple(source)]
        return out


class ZarrVolume:
    """A zarr array read region by region; ``owner`` says whose it is (``errors.organizer_file``
    for the ground truth, ``errors.participant_file`` for a prediction), i.e. who is to fix a
    refusal while it is read."""

    def __init__(self, array: zarr_store.Array, display: str, owner=participant_file):
        self.array, self.display, self.owner = array, display, owner
        self.shape, self.dtype = tuple(array.shape), array.dtype
        self.chunks = tuple(array.chunks)
        self._held = Buffers()
        self._cache = ChunkCache(array, display, owner)

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        if not reuse:  # a box of the distances: through the chunk cache
            return self._cache.read(box)
        out = self._held.get(box_shape(box), self.dtype)
        with self.owner():
            return zarr_store.read_array(self.array, self.display, region=box, out=out)

    def stored(self, box: Box) -> bool:
        """False when the box holds no stored chunk and the fill value is 0 (all zeros)."""
        with self.owner():
            return self.array.stored(box)

    def regions(self, box: Box) -> list[Box]:
        """The parts of ``box`` that may hold nonzero values (its stored chunks), raster order."""
        with self.owner():
            found = self.array.stored_regions(box)
        return [box] if found is None else found


class Window:
    """``inner`` shifted so that index ``i`` here is ``i + origin`` there, cut to ``shape``;
    what lies outside ``inner`` reads as zero (of ``inner``'s dtype)."""

    def __init__(self, inner, origin, shape):
        self.inner, self.origin = inner, tuple(int(o) for o in origin)
        self.shape, self.dtype = tuple(int(n) for n in shape), inner.dtype
        self.chunks = getattr(inner, "chunks", None)
        self._held = Buffers()

    def _inner_box(self, box: Box) -> Box | None:
        inner = []
        for s, o, n in zip(box, self.origin, self.inner.shape):
            low, high = max(s.start + o, 0), min(s.stop + o, n)
            if high <= low:
                return None
            inner.append(slice(low, high))
        return tuple(inner)

    def stored(self, box: Box) -> bool:
        inner = self._inner_box(box)
        return inner is not None and is_stored(self.inner, inner)

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        out_shape = box_shape(box)
        source, target = [], []
        for s, o, n in zip(box, self.origin, self.inner.shape):
            low, high = max(s.start + o, 0), min(s.stop + o, n)
            source.append(slice(low, high))
            target.append(slice(low - o - s.start, high - o - s.start))
        inside = all(t.stop > t.start for t in target)
        part = _read(self.inner, tuple(source), reuse) if inside else None
        if part is not None and tuple(part.shape) == out_shape:
            return part
        if reuse:
            out = self._held.get(out_shape, self.dtype)
            out.fill(0)
        else:
            out = np.zeros(out_shape, self.dtype)
        if part is not None:
            out[tuple(target)] = part
        return out


class Masked:
    """``volume * mask`` region by region (``scoring.py`` ``score_label``: prediction and truth
    are multiplied by the crop's ``<label>_mask``): numpy's own promotion decides the dtype."""

    def __init__(self, volume, mask):
        self.volume, self.mask = volume, mask
        self.shape = volume.shape
        self.dtype = np.result_type(volume.dtype, mask.dtype)
        self.chunks = getattr(volume, "chunks", None)
        self._held = Buffers()

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        values, mask = _read(self.volume, box, reuse), _read(self.mask, box, reuse)
        if not reuse:
            return values * mask
        return np.multiply(values, mask, out=self._held.get(box_shape(box), self.dtype))

    def stored(self, box: Box) -> bool:
        return is_stored(self.volume, box) and is_stored(self.mask, box)

    def regions(self, box: Box) -> list[Box]:
        return regions(self.volume, box)


class Planar:
    """A 2-D volume seen as a 3-D one of a single plane. The instance pass works on 3-D blocks;
    the reference calls ``cc3d.connected_components`` on the 2-D array itself, whose default
    connectivity there (8) labels the plane as 26-connectivity labels a one-plane volume, and its
    distances on a 2-D crop are in-plane (``distance.py`` ``compute_hausdorff_distance_roi``)."""

    def __init__(self, inner):
        self.inner = inner
        self.shape, self.dtype = (1, *inner.shape), inner.dtype
        chunks = getattr(inner, "chunks", None)
        self.chunks = None if chunks is None else (1, *chunks)

    def read(self, box: Box, reuse: bool = False) -> np.ndarray:
        return _read(self.inner, box[1:], reuse)[None]

    def stored(self, box: Box) -> bool:
        return is_stored(self.inner, box[1:])

    def regions(self, box: Box) -> list[Box]:
        return [(box[0], *found) for found in regions(self.inner, box[1:])]


def _read(volume, box: Box, reuse: bool) -> np.ndarray:
    """``volume.read(box)``, reusing its buffer if asked and it can."""
    return volume.read(box, reuse=True) if reuse and getattr(volume, "reusable", True) else volume.read(box)


def is_stored(volume, box: Box) -> bool:
    """False only when ``volume`` is certainly all zeros on ``box`` (nothing stored there): the
    passes then skip the box without reading it. Volumes that cannot tell say True."""
    stored = getattr(volume, "stored", None)
    return True if stored is None else bool(stored(box))


def regions(volume, box: Box) -> list[Box]:
    """The parts of ``box`` where ``volume`` may be nonzero (the whole box if it cannot tell)."""
    found = getattr(volume, "regions", None)
    return [box] if found is None else found(box)


def tiles(shape, chunks, budget: int, split_x: bool = True) -> Iterator[Box]:
    """Boxes covering ``shape`` in raster order, each of at most ``budget`` voxels (or one row
    of voxels along x if that is larger and ``split_x`` is False), aligned to ``chunks`` where
    a chunk fits, so that a pass decodes every chunk once. ``split_x=False`` keeps x whole
    (tiles then only meet across z and y faces)."""
    shape = tuple(int(n) for n in shape)
    if 0 in shape:
        return
    chunks = tuple(int(c) for c in (chunks or shape))
    unit = [min(c, n) for c, n in zip(chunks, shape)]
    if not split_x:
        unit[-1] = shape[-1]
    # too large a unit: halve its longest splittable axis (unaligned from then on)
    while math.prod(unit) > budget:
        axes = [a for a in range(len(unit)) if unit[a] > 1 and (split_x or a < len(unit) - 1)]
        if not axes:
            break
        axis = max(axes, key=lambda a: unit[a])
        unit[axis] = (unit[axis] + 1) // 2
    # grow by whole units, innermost axis first
    extent = list(unit)
    for axis in reversed(range(len(shape))):
        others = math.prod(extent) // extent[axis]
        most = max(1, budget // max(1, others))
        extent[axis] = min(shape[axis], max(unit[axis], (most // unit[axis]) * unit[axis]))
    starts = [range(0, n, e) for n, e in zip(shape, extent)]
    for origin in np.ndindex(*[len(s) for s in starts]):
        yield tuple(slice(s[i], min(s[i] + e, n)) for s, i, e, n in zip(starts, origin, extent, shape))


def _semantic_tile_voxels(*volumes) -> int:
    """Voxels per semantic tile: the arrays read (a masked volume reads its mask too) plus three
    boolean temporaries per voxel, within SEMANTIC_TILE_BYTES."""
    per_voxel = 3
    for volume in volumes:
        while isinstance(volume, (Masked, Window)):
            if isinstance(volume, Masked):
                per_voxel += 2 * np.dtype(volume.mask.dtype).itemsize + np.dtype(volume.dtype).itemsize
                volume = volume.volume
            else:
                volume = volume.inner
        per_voxel += np.dtype(volume.dtype).itemsize
    return max(1, SEMANTIC_TILE_BYTES // per_voxel)


def semantic_tiles(truth, pred) -> Iterator[Box]:
    """The tiles of the semantic pass (``foreground_counts``), in the order it reads them."""
    return tiles(truth.shape, getattr(truth, "chunks", None), _semantic_tile_voxels(truth, pred))


def instance_tiles(truth, pred=None, split_x: bool = True) -> list[Box]:
    """The tiles of the instance pass (``instances.Instances.scan``), in the order it reads them:
    the whole crop when it fits in TILE_VOXELS; else tiles of about SPARSE_TILE_VOXELS (at
    least a chunk of either array, at most TILE_VOXELS), aligned to the larger of the two
    arrays' chunks on each axis, so that a tile where neither array stores a chunk is skipped
    unread (large objects leave most of a crop empty) and no chunk is decoded twice where one
    array's chunks are multiples of the other's. ``split_x=False``: x whole (the pass that
    reproduces ``cc3d``'s single-row shortcut)."""
    shape = tuple(int(n) for n in truth.shape)
    if not split_x or math.prod(shape) <= TILE_VOXELS:
        return list(tiles(shape, getattr(truth, "chunks", None), TILE_VOXELS, split_x=False))
    grids = [tuple(int(c) for c in g) for g in (getattr(truth, "chunks", None), getattr(pred, "chunks", None)) if g]
    unit = tuple(min(max(g[a] for g in grids), n) for a, n in enumerate(shape)) if grids else shape
    budget = min(TILE_VOXELS, max(SPARSE_TILE_VOXELS, math.prod(unit)))
    return list(tiles(shape, unit, budget))


def decode(volume, boxes) -> None:
    """Read ``volume`` on every box of ``boxes`` where it may hold data, in their order, and keep
    nothing: the preflight, in the tiles of the pass that scoring runs, so that the first
    corrupt or oversized chunk it meets is the one scoring would meet first."""
    for box in boxes:
        if is_stored(volume, box):
            _read(volume, box, True)


def foreground_counts(truth, pred) -> BinaryCounts:
    """Confusion counts of ``truth > 0`` against ``pred > 0`` summed tile by tile: the voxel
    counts every semantic score derives from (``scoring.py`` ``score_semantic``, v2's IoU, Dice
    and accuracy, head's tp/fp/fn), in memory bounded by SEMANTIC_TILE_BYTES whatever the crop."""
    n_truth = n_pred = tp = total = 0
    for box in semantic_tiles(truth, pred):
        if not is_stored(truth, box) and not is_stored(pred, box):
            total += box_size(box)
            continue
        t, p = _read(truth, box, True) > 0, _read(pred, box, True) > 0
        n_truth += int(np.count_nonzero(t))
        n_pred += int(np.count_nonzero(p))
        t &= p
        tp += int(np.count_nonzero(t))
        total += t.size
    return BinaryCounts(tp=tp, fp=n_pred - tp, fn=n_truth - tp, tn=total - n_truth - n_pred + tp)
