"""The sets the per-instance distances compare, read box by box (``hausdorff.sets.Sets``) when the
crop was scanned in several tiles and is not held in memory. The reference measures every truth
id against its matched components on the whole arrays (``utils/eval_utils/distance.py``
``optimized_hausdorff_distances``); the distances here read only the boxes they need:

- truth id g in its box;
- component p as the connected piece of its own box that contains its first voxel: the
  component lies wholly inside its box, so nothing outside the box can change it (``cc3d`` on
  that box, only for p's value).

Both are painted from the runs the scan recorded (``scan.RUN_BYTES``) when it kept them, and
read from the volumes otherwise. Boxes too large to hold as arrays are bit-packed in one pass
over the tiles that meet them, each tile labelled again as the scan labelled it
(``tiles.tile_components`` and the scan's lookup table).
"""

import threading
from typing import Protocol

import cc3d
import numpy as np

from evaluation.metrics import label_stats
from evaluation.metrics.hausdorff.boxes import coordinates, within
from evaluation.metrics.hausdorff.packed import pack
from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.scan import Components
from evaluation.suites.cellmap.tiles import comparable, tile_components


class Scanned(Protocol):
    """What the sets read of an instance label's scan (``instances.Instances``, which builds
    them)."""

    @property
    def shape(self) -> tuple: ...
    @property
    def n_pred(self) -> int: ...
    @property
    def components(self) -> Components: ...
    @property
    def truth_boxes(self) -> dict: ...
    @property
    def truth_runs(self) -> tuple | None: ...
    @property
    def pred_runs(self) -> tuple | None: ...


class StreamedSets:
    """The sets the distances compare, read from the volumes box by box (``hausdorff.sets.Sets``):
    truth id g in its box; component p as the connected piece of its own box that holds its
    first voxel (``cc3d`` on that box, only for p's value)."""

    def __init__(self, truth, pred, instances: Scanned, piece_ids: np.ndarray):
        self.truth, self.pred, self.found = truth, pred, instances
        self.shape = instances.shape
        self.piece_ids = np.asarray(piece_ids)
        numbers = np.arange(1, instances.n_pred + 1, dtype=np.int64)
        targets = self.piece_ids[numbers]
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]
        self._local = threading.local()  # each thread's recently used masks (instances run in threads)

    @property
    def _truth_cache(self) -> dict:
        if not hasattr(self._local, "truth"):
            self._local.truth = {}
        return self._local.truth

    @property
    def _piece_cache(self) -> dict:
        if not hasattr(self._local, "pieces"):
            self._local.pieces = {}
        return self._local.pieces

    def parts(self, g: int) -> list[int]:
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return [int(p) for p in self._numbers[lo:hi]]

    def truth_box(self, g: int):
        return self.found.truth_boxes[g]

    def part_box(self, p: int):
        return self.found.components.box(p)

    def _painted(self, runs, key: int, box) -> np.ndarray:
        """The voxels of ``key``'s recorded runs on ``box`` (which holds them all)."""
        keys, at, length = runs
        key = keys.dtype.type(key)  # in the keys' own dtype: a Python int would cast all of them
        lo, hi = np.searchsorted(keys, key), np.searchsorted(keys, key, side="right")
        return label_stats.paint_runs(np.zeros(volumes.box_shape(box), bool), at[lo:hi], length[lo:hi], [s.start for s in box])

    def truth_mask(self, box, g: int) -> np.ndarray:
        if self.found.truth_runs is not None:
            return self._painted(self.found.truth_runs, g, box)
        return self.truth.read(box) == g

    def _piece(self, p: int) -> np.ndarray:
        """Component p on its own box."""
        if p not in self._piece_cache and self.found.pred_runs is not None:
            if len(self._piece_cache) > 4:
                self._piece_cache.pop(next(iter(self._piece_cache)))
            self._piece_cache[p] = self._painted(self.found.pred_runs, p, self.part_box(p))
        if p not in self._piece_cache:
            box = self.part_box(p)
            values = comparable(self.pred.read(box))
            at = np.unravel_index(int(self.found.components.first[p]), self.shape)
            at = tuple(int(i) - s.start for i, s in zip(at, box))
            same = values == values[at]
            same[at] = True  # a NaN is its own component
            labels = cc3d.connected_components(same)
            if len(self._piece_cache) > 4:
                self._piece_cache.pop(next(iter(self._piece_cache)))
            self._piece_cache[p] = labels == labels[at]
        return self._piece_cache[p]

    def piece_mask(self, box, p: int) -> np.ndarray:
        """Component p's voxels on ``box`` (any box)."""
        return within(self._piece(p), self.part_box(p), box)

    def b_mask(self, box, g: int, parts) -> np.ndarray:
        out = np.zeros(volumes.box_shape(box), bool)
        for p in parts:
            out |= self.piece_mask(box, p)
        return out

    def points_a(self, g: int, box) -> np.ndarray:
        return coordinates(self.truth_mask(box, g)) + np.array([s.start for s in box])

    def points_b(self, g: int, parts) -> np.ndarray:
        return np.concatenate([coordinates(self._piece(p)) + np.array([s.start for s in self.part_box(p)]) for p in parts])

    def packed_masks(self, requests) -> dict:
        """g -> bit-packed masks (A, B) on the box of each (g, parts, box) requested, for boxes
        too large to hold as arrays: one pass over the tiles that meet them, labelling each tile
        again as the scan did (``tiles.tile_components`` and the scan's lookup table)."""
        found = self.found
        out = {}
        for g, _, box in requests:
            shape = volumes.box_shape(box)
            out[g] = tuple(np.zeros(shape[:2] + (-(-shape[2] // 8),), np.uint8) for _ in range(2))
        if found.truth_runs is not None and found.pred_runs is not None:
            for g, parts, box in requests:
                for packed, runs, keys in ((out[g][0], found.truth_runs, [g]), (out[g][1], found.pred_runs, parts)):
                    self._pack_runs(packed, runs, keys, box)
            return out
        # tiles may split x: each band of tiles (same z and y ranges) is unpacked whole, then packed
        bands = {}
        for tile, base in found.tiles:
            bands.setdefault((tile[0].start, tile[0].stop, tile[1].start, tile[1].stop), []).append((tile, base))
        for band in bands.values():
            self._pack_band(band, requests, out)
        return out

    def _pack_band(self, band, requests, out) -> None:
        """The requested masks on one band of tiles, labelled again as the scan labelled them
        (``tiles.tile_components`` and the scan's lookup table), packed into ``out``."""
        found = self.found
        first = band[0][0]
        unpacked = {}
        for tile, base in band:
            wanted = [r for r in requests if all(max(a.start, b.start) < min(a.stop, b.stop) for a, b in zip(tile, r[2]))]
            if not wanted:
                continue
            local = tile_components(volumes._read(self.pred, tile, True), found.special)[0]
            t = volumes._read(self.truth, tile, True)
            for g, parts, box in wanted:
                if g not in unpacked:  # the band's z and y ranges within the box, all of the box's x
                    rows = tuple(slice(max(a.start, b.start), min(a.stop, b.stop)) for a, b in zip(first[:2], box[:2]))
                    shape = volumes.box_shape(rows) + (box[2].stop - box[2].start,)
                    unpacked[g] = (rows, np.zeros(shape, bool), np.zeros(shape, bool))
                rows, a_mask, b_mask = unpacked[g]
                region = tuple(slice(max(a.start, b.start), min(a.stop, b.stop)) for a, b in zip(tile, box))
                in_tile = tuple(slice(r.start - a.start, r.stop - a.start) for r, a in zip(region, tile))
                in_band = tuple(slice(r.start - b.start, r.stop - b.start) for r, b in zip(region, (*rows, box[2])))
                labels = local[in_tile]
                numbers = found.lut[np.where(labels != 0, labels.astype(np.int64) + base, 0)]
                piece = np.zeros(labels.shape, bool)
                for part in parts:
                    piece |= numbers == part
                a_mask[in_band] = t[in_tile] == g
                b_mask[in_band] = piece
        for g, (rows, a_mask, b_mask) in unpacked.items():
            box = next(r[2] for r in requests if r[0] == g)
            at = tuple(slice(r.start - b.start, r.stop - b.start) for r, b in zip(rows, box[:2]))
            out[g][0][at] = pack(a_mask)
            out[g][1][at] = pack(b_mask)

    @staticmethod
    def _pack_runs(packed: np.ndarray, runs, keys, box, planes: int = 64) -> None:
        """Paint the recorded runs of ``keys`` into bit-packed planes of ``box``, a few planes
        at a time."""
        ids, at, length = runs
        chosen = []
        for key in keys:
            key = ids.dtype.type(key)
            lo, hi = np.searchsorted(ids, key), np.searchsorted(ids, key, side="right")
            chosen.append(np.arange(lo, hi))
        chosen = np.concatenate(chosen)
        at, length = at[chosen], length[chosen]
        order = np.argsort(at[:, 0], kind="stable")
        at, length = at[order], length[order]
        origin = np.array([s.start for s in box], np.int64)
        shape = volumes.box_shape(box)
        for z0 in range(0, shape[0], planes):
            z1 = min(z0 + planes, shape[0])
            lo, hi = np.searchsorted(at[:, 0], [origin[0] + z0, origin[0] + z1])
            if hi > lo:
                mask = label_stats.paint_runs(
                    np.zeros((z1 - z0,) + shape[1:], bool), at[lo:hi], length[lo:hi], origin + np.array([z0, 0, 0])
                )
                packed[z0:z1] = pack(mask)

    def in_a(self, points: np.ndarray, g: int) -> np.ndarray:
        box = self.truth_box(g)
        key = (g, tuple((s.start, s.stop) for s in box))
        if key not in self._truth_cache:
            self._truth_cache.clear()
            self._truth_cache[key] = self.truth_mask(box, g)
        return _lookup(self._truth_cache[key], box, points)

    def in_b(self, points: np.ndarray, g: int) -> np.ndarray:
        result = np.zeros(len(points), bool)
        for p in self.parts(g):
            result |= _lookup(self._piece(p), self.part_box(p), points)
        return result


def _lookup(mask: np.ndarray, box, points: np.ndarray) -> np.ndarray:
    """``mask`` (on ``box``) at ``points`` (crop coordinates, rows); False outside the box."""
    origin = np.array([s.start for s in box])
    local = points - origin
    inside = np.all((local >= 0) & (local < np.array(mask.shape)), axis=1)
    result = np.zeros(len(points), bool)
    result[inside] = mask[tuple(local[inside].T)]
    return result
