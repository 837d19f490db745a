"""The two labellings a distance compares, as the sets of each truth id.

For truth id g, A is ``truth == g`` and B the union of the prediction pieces (connected
components) assigned to g (``parts``), which is how matching produces them. ``Sets`` is all the
paths read of them: boxes, masks on a box, points, membership and bit-packed masks of large
boxes. ``ArraySets`` holds both labellings as whole arrays; a provider that reads boxes and masks
on demand (the cellmap suite's streamed volumes) gives the same distances.
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from evaluation.metrics.hausdorff.boxes import Box, coordinates, label_boxes, origin
from evaluation.metrics.hausdorff.packed import pack

Parts = Sequence[int] | np.ndarray  # the numbers of the pieces assigned to one truth id, ascending
Request = tuple[int, Parts, Box]  # (g, its parts, the union box) of a pair held as packed masks


class Sets(Protocol):
    """What ``capped_hausdorff_sets`` reads of the two labellings (points: crop coordinates, rows)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def parts(self, g: int) -> Parts:
        """The pieces assigned to g (B_g is their union), ascending."""
        ...

    def truth_box(self, g: int) -> Box: ...

    def part_box(self, p: int) -> Box: ...

    def truth_mask(self, box: Box, g: int) -> np.ndarray: ...

    def b_mask(self, box: Box, g: int, parts: Parts) -> np.ndarray:
        """The voxels of ``parts`` (pieces assigned to g) on ``box``."""
        ...

    def points_a(self, g: int, box: Box) -> np.ndarray: ...

    def points_b(self, g: int, parts: Parts) -> np.ndarray: ...

    def packed_masks(self, requests: Sequence[Request]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """g -> bit-packed masks (A, B) on the box, for each (g, parts, box) requested (``pack``)."""
        ...

    def in_a(self, points: np.ndarray, g: int) -> np.ndarray: ...

    def in_b(self, points: np.ndarray, g: int) -> np.ndarray: ...


class ArraySets:
    """The two labellings ``capped_hausdorff_sets`` compares, as arrays: truth ids in ``truth``
    (boxes in ``truth_boxes``), prediction pieces 1..n in ``pieces`` (boxes in ``piece_boxes``)
    and the id each piece is assigned to in ``piece_ids``; boxes not given are found in one pass
    over the array. Any other provider of the same methods (boxes and masks read
    on demand) gives the same distances."""

    def __init__(
        self,
        truth: np.ndarray,
        pieces: np.ndarray,
        piece_ids: npt.ArrayLike,
        truth_boxes: dict[int, Box] | None = None,
        piece_boxes: dict[int, Box] | None = None,
    ) -> None:
        self.truth, self.pieces, self.shape = truth, pieces, truth.shape
        self.piece_ids = np.asarray(piece_ids)
        self.truth_boxes = label_boxes(truth) if truth_boxes is None else truth_boxes
        self.boxes = label_boxes(pieces) if piece_boxes is None else piece_boxes
        numbers = np.array(sorted(self.boxes), dtype=np.int64)
        targets = self.piece_ids[numbers] if numbers.size else numbers
        order = np.argsort(targets, kind="stable")
        self._numbers, self._targets = numbers[order], targets[order]

    def parts(self, g: int) -> np.ndarray:
        """The pieces assigned to g (B_g is their union), ascending."""
        lo, hi = np.searchsorted(self._targets, [g, g + 1])
        return self._numbers[lo:hi]

    def truth_box(self, g: int) -> Box:
        return self.truth_boxes[g]

    def part_box(self, p: int) -> Box:
        return self.boxes[int(p)]

    def truth_mask(self, box: Box, g: int) -> np.ndarray:
        mask: npt.NDArray[np.bool_] = self.truth[box] == g
        return mask

    def b_mask(self, box: Box, g: int, parts: Parts) -> np.ndarray:
        """The voxels of ``parts`` (pieces assigned to g) on ``box``: compared with each piece's
        number, which is cheaper than looking every voxel's id up."""
        view = self.pieces[box]
        out: npt.NDArray[np.bool_] = view == parts[0]
        for p in parts[1:]:
            out |= view == p
        return out

    def points_a(self, g: int, box: Box) -> np.ndarray:
        points: np.ndarray = coordinates(self.truth[box] == g) + origin(box)
        return points

    def points_b(self, g: int, parts: Parts) -> np.ndarray:
        return np.concatenate([coordinates(self.pieces[self.boxes[p]] == p) + origin(self.boxes[p]) for p in parts])

    def packed_masks(self, requests: Sequence[Request]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """g -> bit-packed masks (A, B) on the box, for each (g, parts, box) requested."""
        return {g: (pack(self.truth_mask(box, g)), pack(self.b_mask(box, g, parts))) for g, parts, box in requests}

    def in_a(self, points: np.ndarray, g: int) -> np.ndarray:
        inside: npt.NDArray[np.bool_] = self.truth[tuple(points.T)] == g
        return inside

    def in_b(self, points: np.ndarray, g: int) -> np.ndarray:
        inside: npt.NDArray[np.bool_] = self.piece_ids[self.pieces[tuple(points.T)]] == g
        return inside
