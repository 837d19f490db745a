"""Scoring one phantom: one pass over the truth and the submission, slab by slab.

The reference (tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.metrics``)
holds the truth, a boundary mask and the unpacked submission whole; here each slab of the
truth is read with one extra slice on each side (to decide its boundary) and contributes a
small histogram (``scores.slab_counts``), so memory stays bounded by the slabs in flight.
"""

import math

import numpy as np

from evaluation.errors import PhaseError
from evaluation.readers.slabs import SLAB_VOXELS, map_slabs, slab_bounds, slices_per_slab
from evaluation.readers.tomo_volumes import open_binary
from evaluation.suites.tomo_foam.inputs import PhantomTask
from evaluation.suites.tomo_foam.scores import BINS, FoamCounts, foam_scores, slab_counts
from evaluation.suites.tomo_foam.truth import open_truth

# The preflight's time model: a bit-packed 1080 x 1280 x 1280 phantom scores in 5.3 s
# (bench/README.md), 3 s per G voxel.
SECONDS_PER_GVOXEL = 3.0


def score_phantom(task: PhantomTask) -> dict:
    """The six scores, the counts behind them and how the submission was stored."""
    shape = task.truth.grid.shape
    predicted = open_binary(task.file, shape, task.display)
    source = open_truth(task.truth)
    try:
        counts = count_phantom(source, predicted, shape, task.threads)
    finally:
        predicted.close()
        source.close()
    result = {
        **foam_scores(counts, task.defined_only),
        "counts": counts.spec_counts(),
        "format": "bit-packed" if predicted.packed else "plain",
    }
    if predicted.description is not None:
        result["description"] = predicted.description
    return result


def check_phantom(task: PhantomTask) -> dict:
    """The preflight of one phantom: the submitted volume opened on the phantom's grid and
    every slab of it read, as ``score_phantom`` reads it; the estimated seconds of scoring."""
    shape = task.truth.grid.shape
    predicted = open_binary(task.file, shape, task.display)
    try:
        map_slabs(lambda z0, z1: predicted.slab(z0, z1).shape, phantom_slabs(shape), task.threads)
    finally:
        predicted.close()
    return {"seconds": math.prod(shape) / 1e9 * SECONDS_PER_GVOXEL}


def phantom_slabs(shape) -> list[tuple[int, int]]:
    nz, ny, nx = shape
    return slab_bounds(nz, slices_per_slab(ny * nx, SLAB_VOXELS), align=2)


def count_phantom(truth_source, predicted, shape, threads: int) -> FoamCounts:
    """The (label, boundary, predicted) histogram over the whole volume, slab by slab: each
    slab reads its truth with one extra slice on each side to decide its boundary."""
    nz, ny, nx = shape

    def count(z0: int, z1: int) -> np.ndarray:
        lo, hi = max(z0 - 1, 0), min(z1 + 1, nz)
        labels = truth_source.slab(lo, hi)
        try:
            return slab_counts(labels, predicted.slab(z0, z1), below=lo < z0, above=hi > z1)
        except ValueError as exc:
            raise PhaseError(f"a phantom's label volume is invalid: {exc}") from None

    histogram = np.zeros(BINS, dtype=np.int64)
    for part in map_slabs(count, phantom_slabs(shape), threads):
        histogram += part
    return FoamCounts.from_histogram(histogram)
