"""Each set on its own box: union boxes too large to build.

A union box above ``planning``'s DENSE_BOX (nucleus-sized objects; a split or merged nucleus, or
a distant piece sharing the truth's id, makes it crop-sized) is never built: each set is taken
on its own box grown by a voxel (``hausdorff_own``), the target's boundary as the union of its
parts' boundaries (the nearest target voxel is always among them). Outside voxels near the
target (the crescent a shifted nucleus leaves) are measured by ``metrics.nearest``'s exact local
offset search, a few dozen probes each (``_local``); far ones (the other half of a split
nucleus) by a branch and bound over cells, coarse to fine, each cell's point measured by the k-d
tree and its diagonal bounding the rest (``directed.farthest``): thousands of measurements, not
one per voxel.
"""

import functools
from collections.abc import Callable

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.hausdorff.boxes import Box, coordinates, grown, inner_boundary, origin, within
from evaluation.metrics.hausdorff.directed import Nearest, farthest
from evaluation.metrics.hausdorff.sets import Parts, Sets

# The local search (``_local``) looks this far around each voxel (in the smallest spacing); it
# takes a set when it answers this share of an evenly spread sample of it of this many voxels.
LOCAL_RADIUS = 6.0
LOCAL_SHARE = 0.9
LOCAL_SAMPLE = 256

TargetOn = Callable[[Box], np.ndarray]  # a box of the crop -> the target's mask on it


def _local(points: np.ndarray, box: Box, target_on: TargetOn, shape: tuple[int, ...], vs: np.ndarray) -> np.ndarray | None:
    """The exact distance of each point (rows, all inside ``box``) to the nearest target voxel
    within LOCAL_RADIUS, -1 where there is none so near (``nearest``'s search: the integer
    offsets in order of their length in the reference's arithmetic, the first one that lands on
    the target is the nearest). ``target_on(region)``: the target's mask on a box of the crop
    (of ``shape``). None where the compiled search cannot run."""
    from evaluation.metrics import nearest

    table = nearest.offsets(tuple(float(v) for v in vs), LOCAL_RADIUS)
    reach = table.reach
    low = np.array([s.start - r for s, r in zip(box, reach)])
    grid = np.zeros(tuple(s.stop - s.start + 2 * r for s, r in zip(box, reach)), np.uint8)
    region = tuple(slice(max(int(lo), 0), min(s.stop + r, n)) for lo, s, r, n in zip(low, box, reach, shape))
    grid[tuple(slice(g.start - int(lo), g.stop - int(lo)) for g, lo in zip(region, low))] = target_on(region)
    strides = np.array(grid.strides, np.int64)
    out = np.empty(len(points))
    bases = np.ascontiguousarray((points - low) @ strides, np.int64)
    failed = []
    jit.run(
        nearest._search_any, lambda *_: failed.append(True), grid.reshape(-1), bases, table.steps @ strides, table.length, out
    )
    return None if failed else out


def _directed_own(
    points: np.ndarray,
    box: Box,
    target_on: TargetOn,
    shape: tuple[int, ...],
    vs: np.ndarray,
    boundary: Callable[[], np.ndarray],
    cap: float,
) -> float:
    """max over ``points`` (rows inside ``box``) of the distance to the target: by the local
    search when a sample of them lies near the target (a shifted nucleus leaves a thin crescent
    a voxel or three from it: a few dozen probes a point instead of a k-d tree query), else,
    and for the few beyond the search's reach, by ``farthest`` over the k-d tree of the
    target's ``boundary()`` points."""
    if len(points) == 0:
        return 0.0
    sample = points[:: max(1, len(points) // LOCAL_SAMPLE)]
    probe = _local(sample, box, target_on, shape, vs)
    if probe is None or np.count_nonzero(probe < 0) > (1 - LOCAL_SHARE) * len(sample):
        return farthest(points, Nearest(boundary(), vs), cap)
    measured = _local(points, box, target_on, shape, vs)
    if measured is None:  # the compiled search stopped working since the sample: the tree alone
        return farthest(points, Nearest(boundary(), vs), cap)
    best = float(measured.max())
    if best >= cap:
        return best
    beyond = points[measured < 0]
    return max(best, farthest(beyond, Nearest(boundary(), vs), cap)) if len(beyond) else best


def hausdorff_own(sets: Sets, g: int, box_a: Box, parts: Parts, vs: np.ndarray, cap: float) -> float:
    """``d_g`` from each set on its own box (grown by a voxel), never on their union: A's
    boundary and A minus B on A's box; each part's boundary (the boundary of B lies within
    theirs, and theirs within B: the nearest voxel of B is found among them) and the part minus
    A on the part's box; then the farthest outside voxel each way (``_directed_own``)."""
    shape = sets.shape
    at_a = grown(box_a, shape)
    a = sets.truth_mask(at_a, g)
    outside = coordinates(a & ~sets.b_mask(at_a, g, parts)) + origin(at_a)
    at_parts = [(p, grown(sets.part_box(p), shape)) for p in parts]

    def b_boundary() -> np.ndarray:
        return np.concatenate([coordinates(inner_boundary(sets.b_mask(at_p, g, [p]))) + origin(at_p) for p, at_p in at_parts])

    d = _directed_own(outside, at_a, lambda region: sets.b_mask(region, g, parts), shape, vs, b_boundary, cap)
    del outside
    a_boundary = functools.cache(lambda: coordinates(inner_boundary(a)) + origin(at_a))
    for p, at_p in at_parts:
        if d >= cap:
            break
        b = sets.b_mask(at_p, g, [p])
        inside_out = coordinates(b & ~within(a, at_a, at_p)) + origin(at_p)
        d = max(d, _directed_own(inside_out, at_p, lambda region: within(a, at_a, region), shape, vs, a_boundary, cap))
    return d
