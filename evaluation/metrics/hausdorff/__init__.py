"""Per-instance symmetric Hausdorff distance with a cap, on tight bounding boxes.

For every truth id g, ``d_g = min(max(h(A, B), h(B, A)), cap)`` with ``A = truth == g``,
``B`` the prediction voxels assigned to g, ``h(X, Y) = max_{x in X} min_{y in Y} |x - y|`` in
physical units, and ``d_g = cap`` when B is empty (CellMap ``optimized_hausdorff_distances``).
The prediction is given as *pieces* (connected components) and the id each piece is assigned
to, which is how matching produces it; B is the union of the pieces assigned to g (``sets``).

The reference (``utils/eval_utils/distance.py``) computes two float64 distance transforms with
their feature transforms per instance, over the union of both boxes padded by the cap, which for
a 256^3 crop is nearly the whole crop, 476 times. Here:

- padding is never needed: every point of Y lies inside the union box, and the nearest Y voxel
  of an X voxel outside Y always has a 6-neighbour outside Y inside that box (the next voxel
  towards the X voxel), so the distance from X to the *boundary* voxels of Y inside the box is
  the exact distance to Y (``boxes``);
- a box-gap lower bound that reaches the cap decides ``d_g = cap`` without anything else, a
  direction whose X lies inside Y is 0, and a first direction at the cap decides the second;
  the sizes of the boxes choose one of the paths below (``planning``);
- on a box of up to SCAN_BOX voxels a compiled scan finds the farthest X voxel outside Y and its
  distance at once, in a few steps per voxel (``scans``);
- on larger boxes, or where the scan gives up (a few lone voxels in a large empty box), the
  farthest X voxel outside Y is found among its candidates by a k-d tree over Y's boundary
  voxels, a float32 EDT or a bound over cells saying where to look (``directed``);
- an unmatched piece whose id collides with a distant truth id leaves the union box mostly
  empty: small sets are then gathered from their own tight boxes and compared point to boundary
  point (``sparse``);
- a union box above DENSE_BOX (nucleus-sized objects; a split or merged nucleus, or a distant
  piece sharing the truth's id, makes it crop-sized) is never built: each set is taken on its
  own box grown by a voxel, outside voxels near the target measured by a local offset search
  and far ones by a branch and bound over cells: thousands of measurements, not one per voxel
  (``own``);
- a set whose own box is above BOX_VOXELS (a cell spanning the crop) is held as two bit-packed
  masks of the union box (one bit per voxel) and searched slab by slab (``packed``).

The reported distance is always computed from the integer voxel offset to the nearest boundary
voxel with ``distance_transform_edt``'s own arithmetic (per axis ``(delta * vs) ** 2`` summed in
axis order, square root, float64, then float32), so the results agree with the reference to the
bit; the float32 EDT only says where to look. (Two offsets at exactly the same real distance can
differ in the last float64 bit of that sum, with non-integer voxel sizes; the compiled searches
take the smaller, the tree and the reference's feature transform either. That bit reaches the
float32 result only at a float32 rounding boundary; no test case has met one.)
"""

from collections.abc import Iterable
from typing import SupportsInt

import numpy as np
import numpy.typing as npt

from evaluation.metrics.hausdorff.boxes import Box
from evaluation.metrics.hausdorff.packed import batches, packed_pair
from evaluation.metrics.hausdorff.planning import How, one, plan
from evaluation.metrics.hausdorff.sets import Parts, Sets

__all__ = ["capped_hausdorff_sets"]


def capped_hausdorff_sets(
    sets: Sets, ids: Iterable[SupportsInt], voxel_size: npt.ArrayLike, cap: float, threads: int = 1
) -> np.ndarray:
    """float32 ``d_g`` for each truth id in ``ids``, the sets given by ``sets`` (``ArraySets``
    or a provider with the same methods, safe to call from ``threads`` threads at once: the
    instances are independent, and numpy, the k-d tree, the EDT and the zarr reader release the
    interpreter while they work)."""
    vs = np.asarray(voxel_size, dtype=np.float64)[-len(sets.shape) :]
    keys = [int(x) for x in ids]
    values: list[float | None] = [None] * len(keys)
    hows: dict[int, How] = {}
    large: list[tuple[int, int, Parts, Box]] = []
    for i, g in enumerate(keys):
        found = plan(sets, g, vs, cap)
        if not isinstance(found, tuple):
            values[i] = found
        elif found[3] == "packed":
            large.append((i, g, found[0], found[2]))
        else:
            hows[i] = found
    # large boxes one at a time, their masks built in as few passes as their memory allows
    for batch in batches(large):
        packed = sets.packed_masks([(g, parts, box) for _, g, parts, box in batch])
        for i, g, _, box in batch:
            values[i] = packed_pair(*packed.pop(g), tuple(s.stop - s.start for s in box), vs, cap)
    # in raster order of their boxes: neighbours share the chunks the streamed sets decode
    rest = sorted(hows, key=lambda i: [s.start for s in sets.truth_box(keys[i])])
    if threads > 1 and len(rest) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hausdorff") as pool:
            for i, value in zip(rest, pool.map(lambda i: one(sets, keys[i], hows[i], vs, cap), rest)):
                values[i] = value
    else:
        for i in rest:
            values[i] = one(sets, keys[i], hows[i], vs, cap)
    return np.array(values, dtype=np.float64).astype(np.float32) if values else np.empty(0, np.float32)
