"""One tile of the instance pass (``instances.Instances.scan``), read and labelled on its own:
everything the pass needs of it, in the tile's own numbering, so that tiles can be worked on in
threads and joined in order afterwards (``scan.Scan``).

Of each tile (``volumes.instance_tiles``: a chunk or a few, in raster order) the pass keeps:

- its components (``cc3d`` on the tile, the call the reference makes on the whole prediction in
  ``utils/eval_utils/instance_matching.py``), numbered provisionally, with their voxel count,
  bounding box and first voxel (``label_stats.component_stats``), labelled as the whole call
  would label them (``tile_components``);
- the planes of its six faces (labels and values), for joining components across them;
- its contingency with the truth (truth foreground only), its truth ids' boxes, the binary
  counts and the truth's maximum.

A tile where neither array stores a chunk is never read: large objects leave most of a crop
empty (a 1000^3 crop of 30 nuclei stores a quarter of its chunks), so the pass costs what the
objects' chunks cost. Tiles are read and labelled on SCAN_THREADS threads (``tile_works``:
decoding, the compiled statistics and numpy release the interpreter).
"""

from dataclasses import dataclass, field

import cc3d
import numpy as np

from evaluation.metrics import label_stats
from evaluation.suites.cellmap import volumes

OVERLAP_VOXELS = 4 << 20  # truth voxels per pass of label_stats.overlaps
SCAN_THREADS = 2  # tiles worked on at once (``tile_works``)


def comparable(values: np.ndarray) -> np.ndarray:
    """The values as ``cc3d`` compares them: float16 by bit pattern, everything else as is."""
    return values.view(np.uint16) if values.dtype == np.float16 else values


def tile_components(p: np.ndarray, special: bool = False, keep_runs: bool = False):
    """``cc3d.connected_components(p)`` of one tile as the whole array's call labels it, and
    its statistics: (labels, count, rows of the tile holding foreground, ``component_stats``).

    ``cc3d`` labels an array whose foreground lies in a single x-row by a shortcut
    (``epl_special_row``) that compares values as int64: equal fractional floats are split and
    uint64 values above 2^63 overflow. A tile can hold a single foreground row where the whole
    prediction does not, so such a tile is labelled by the general algorithm (the row, an empty
    row and a distant dummy voxel, which ``cc3d`` numbers last); ``special`` applies the shortcut
    instead, as the whole call does when the whole prediction has a single foreground row.

    A tile one voxel wide along x is contiguous in both orders, and ``cc3d`` then reads it in
    Fortran order (a column along z becomes its "row"); such a tile is labelled with a zero
    column added, as the whole crop around it would be."""
    if p.ndim == 3 and p.shape[-1] == 1 and p.size > 1:
        padded = np.zeros(p.shape[:2] + (2,), p.dtype)
        padded[..., :1] = p
        labels, n, rows, _ = tile_components(padded, special, False)
        labels = np.ascontiguousarray(labels[..., :1])
        return labels, n, rows, label_stats.component_stats(labels, n, keep_runs)
    try:
        labels, n = cc3d.connected_components(p, return_N=True, out_dtype=np.uint32)
        stats = label_stats.component_stats(labels, int(n), keep_runs)
        if stats[3] != 1:
            return labels, int(n), stats[3], stats
    except (OverflowError, ValueError):  # the shortcut on uint64 above 2^63 or NaN: a single row, below
        pass
    foreground = (comparable(p) != 0).any(axis=-1)
    at = np.unravel_index(int(np.flatnonzero(foreground.ravel())[0]), foreground.shape)
    row = p[at]
    # the dummy two planes away in a column of its own (a tile one voxel wide would otherwise
    # make the stack a single row along z, labelled by the shortcut again)
    stack = np.zeros((2, 1, row.size) if special else (3, 1, max(row.size, 2)), p.dtype)
    stack[0, 0, : row.size] = row
    if not special:
        stack[2, 0, -1] = 1
    labels, n = cc3d.connected_components(stack, return_N=True, out_dtype=np.uint32)
    out = np.zeros(p.shape, labels.dtype)
    out[at] = labels[0, 0, : row.size]
    n = int(n) - (0 if special else 1)
    return out, n, 1, label_stats.component_stats(out, n, keep_runs)


@dataclass
class TileWork:
    """What the pass keeps of one tile, in the tile's own numbering (``tile_work``): its
    components' count, statistics and runs, where its foreground is a single row, its truth
    blocks' maxima, contingency rows, boxes and runs, and the planes of its six faces (labels,
    values) for joining components across them."""

    box: tuple
    n: int = 0
    rows: int = 0
    single_row: tuple | None = None
    stats: tuple | None = None  # (sizes, first, boxes, label runs) of ``label_stats.component_stats``
    blocks: list = field(default_factory=list)  # (origin, ids, boxes, a, local b, count, fg, runs)
    maxima: list = field(default_factory=list)
    covered: int = 0
    faces: dict | None = None  # "z0", "z1", "y0", "y1", "x0", "x1" -> (labels, values), planes of the tile
    local: np.ndarray | None = None  # the tile's labels and truth, when asked to keep them
    kept_truth: np.ndarray | None = None


def tile_work(box, truth, pred, special: bool, keep_runs: bool, keep: bool = False) -> TileWork | None:
    """Read one tile (each array only where it stores chunks) and label it: everything the pass
    needs of it, independent of the other tiles (so tiles are worked on in threads,
    ``scan.Scan`` joins them in order); None when neither array stores anything there.
    ``keep``: the arrays themselves too (a crop of one tile keeps them for the distances)."""
    p = volumes._read(pred, box, True) if keep or volumes.is_stored(pred, box) else None
    if p is None and not volumes.is_stored(truth, box):
        return None
    work = TileWork(box)
    origin = np.array([s.start for s in box], np.int64)
    if p is not None and not keep and not comparable(p).any():  # stored, but zeros: nothing to label
        p = None
    local = None
    if p is not None:
        local, work.n, work.rows, work.stats = tile_components(p, special, keep_runs)
        if work.rows == 1:  # the tile's foreground is one row: another tile may hold the rest of it
            z, y, _ = np.unravel_index(int(work.stats[1][1]), local.shape)
            work.single_row = (int(z + origin[0]), int(y + origin[1]))
        values = comparable(p)
        work.faces = {
            name: (np.array(local[index]), np.array(values[index]))
            for name, index in (
                ("z0", (0,)),
                ("z1", (-1,)),
                ("y0", (slice(None), 0)),
                ("y1", (slice(None), -1)),
                ("x0", (Ellipsis, 0)),
                ("x1", (Ellipsis, -1)),
            )
        }
    # contingency over the truth foreground, binary counts, truth boxes: one pass per block
    subs = [box] if keep else volumes.regions(truth, box)
    for sub in subs:
        block = truth.read(sub) if keep else volumes._read(truth, sub, True)
        if keep:
            work.local = local if local is not None else np.zeros(block.shape, np.uint32)
            work.kept_truth = block
        # at most OVERLAP_VOXELS at a time: the runs of a noisy block take 24 bytes a voxel
        step = max(1, OVERLAP_VOXELS // max(1, block[0].size))
        for z in range(0, block.shape[0], step):
            t = block[z : z + step]
            work.covered += t.size
            if not t.size:
                continue
            work.maxima.append(top := t.max())
            if not top > 0:  # no truth foreground here (chunks of zeros are often stored)
                continue
            at = np.array([sub[0].start + z, sub[1].start, sub[2].start], np.int64)
            if local is None:
                part = np.zeros(t.shape, np.uint32)
            else:
                part = local[tuple(slice(a - o, a - o + k) for a, o, k in zip(at, origin, t.shape))]
            ids, truth_boxes, a, b, count, fg, runs = label_stats.overlaps(t, part, work.n)
            work.blocks.append((at, ids, truth_boxes, a, b, count, fg, runs))
    return work


def tile_works(boxes, truth, pred, special: bool, keep_runs: bool):
    """``tile_work`` of every tile, in order. On SCAN_THREADS threads when both volumes allow it
    (each thread reads into buffers of its own): decoding, the compiled statistics and numpy
    release the interpreter, so one tile is decoded while another is labelled; at most twice
    SCAN_THREADS tiles are in flight."""
    if SCAN_THREADS < 2 or not (volumes.threadsafe(truth) and volumes.threadsafe(pred)):
        for box in boxes:
            yield tile_work(box, truth, pred, special, keep_runs)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="tiles") as pool:
        pending = []
        for box in boxes:
            pending.append(pool.submit(tile_work, box, truth, pred, special, keep_runs))
            if len(pending) > 2 * SCAN_THREADS:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()
