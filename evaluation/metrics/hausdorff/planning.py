"""Which path measures each instance, and the instance measured.

A box-gap lower bound that reaches the cap decides ``d_g = cap`` without anything else, as does
an id with no piece assigned (``plan``). Otherwise the sizes of the boxes choose the path: small
sets far apart point to point (``sparse``); a union box of up to DENSE_BOX voxels whole
(``directed.directed_dense``, each direction; a first direction at the cap decides the second);
larger ones each set on its own box (``own``) while the sets' boxes are up to BOX_VOXELS, else
bit-packed masks of the union box (``packed``, measured by ``capped_hausdorff_sets`` in batches
that share passes over the crop).
"""

import numpy as np

from evaluation.metrics.hausdorff import scans
from evaluation.metrics.hausdorff.boxes import Box, box_gap, union, volume
from evaluation.metrics.hausdorff.directed import directed_dense
from evaluation.metrics.hausdorff.own import hausdorff_own
from evaluation.metrics.hausdorff.sets import Parts, Sets
from evaluation.metrics.hausdorff.sparse import hausdorff_sparse

DENSE_BOX = scans.SCAN_BOX  # union boxes of up to this many voxels are searched whole (``plan``)
# A union box this many times larger than the boxes of its parts is searched point to point.
SPARSE_BOX_FACTOR = 32
# A union box of more voxels is handled as bit-packed masks, slab by slab (a Voronoi-like cell
# can span a 1000^3 crop: its masks and their derived arrays would take gigabytes).
BOX_VOXELS = 8 << 20

How = tuple[Parts, Box, Box, str]  # the parts, A's box, the union box, the path's name


def plan(sets: Sets, g: int, vs: np.ndarray, cap: float) -> float | How:
    """How ``d_g`` is found: its value when decided without looking at voxels, else
    (parts, box_a, union box, mode), mode one of

    - ``sparse``: small sets far apart (the union box mostly empty): point to point;
    - ``dense``: a union box of up to DENSE_BOX voxels (the compiled scan takes it whole);
    - ``own``: each set on its own box (up to BOX_VOXELS each), never on the union box, which
      a piece far from its truth (an unmatched component whose id is the truth's) makes huge;
    - ``packed``: sets too large for their own boxes: bit-packed masks of the union box."""
    parts = sets.parts(g)
    if len(parts) == 0:
        return cap
    box_a, part_boxes = sets.truth_box(g), [sets.part_box(p) for p in parts]
    box_b = union(part_boxes)
    if box_gap(box_a, box_b, vs) >= cap:
        return cap
    box = union([box_a, box_b])
    own = volume(box_a) + sum(map(volume, part_boxes))
    if volume(box) > SPARSE_BOX_FACTOR * own and own <= scans.SCAN_BOX:
        mode = "sparse"
    elif volume(box) <= DENSE_BOX:
        mode = "dense"
    elif max(volume(box_a), *map(volume, part_boxes)) <= BOX_VOXELS:
        mode = "own"
    else:
        mode = "packed"
    return parts, box_a, box, mode


def one(sets: Sets, g: int, how: How, vs: np.ndarray, cap: float) -> float:
    """``d_g`` before its float32 rounding, as ``plan`` planned it (not for large boxes:
    ``packed.packed_pair``)."""
    parts, box_a, box, mode = how
    if mode == "sparse":
        d = hausdorff_sparse(sets, g, box_a, parts, vs, cap)
    elif mode == "own":
        d = hausdorff_own(sets, g, box_a, parts, vs, cap)
    else:
        in_a, in_b = sets.truth_mask(box, g), sets.b_mask(box, g, parts)
        d = directed_dense(in_a, in_b, vs, cap)
        if d < cap:
            d = max(d, directed_dense(in_b, in_a, vs, cap))
    return min(d, cap)
