"""Scoring one time step: the water Dice in every region, counted in one pass of slabs.

The challenge website defines the score (no code was published; tomochallenge/
tomochallenge_utils@fab535f ``fuelcell_utils.py`` only packs submissions): for each region
``k``, ``Dice_k = 2·|S ∧ W ∧ R_k| / (|S ∧ R_k| + |W ∧ R_k|)`` of the submission ``S`` and the
water truth ``W``, and the harmonic mean of the four, with the foam scorer's IEEE conventions
(``foam_phantom_utils.metrics``): a Dice of 0 makes the mean 0, a region where neither side
has water is 0/0 = NaN (``empty_region: one`` scores it 1).
"""

import math
from dataclasses import asdict
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.errors import PhaseError, organizer_file
from evaluation.metrics.means import harmonic_mean
from evaluation.readers.slabs import SLAB_VOXELS, Slabs, map_slabs, open_slabs, slab_bounds, slices_per_slab
from evaluation.readers.tomo_volumes import Window, binarize, open_binary
from evaluation.suites.tomo_fuelcell.inputs import StepTask
from evaluation.suites.tomo_fuelcell.regions import dice, patterns_from_labels, region_counts, slab_histogram

# The preflight's time model: one pass of slab histograms, as the foam's (bench/README.md: 3 s
# per G voxel); no fuel-cell volume of the challenge's size was measured.
SECONDS_PER_GVOXEL = 3.0


class _Windowed:
    """A truth volume holding either the whole slice stack or just the scored window."""

    def __init__(self, path: Path, window: Window, what: str, plane: tuple[int, int] | None = None):
        with organizer_file():
            self.slabs: Slabs = open_slabs(path, display=what)
        shape = self.slabs.shape
        self.plane = stack_plane(shape, window, what, plane)
        self.offset = window.start if shape[0] == window.total != window.length else 0

    def read(self, z0: int, z1: int) -> np.ndarray:
        with organizer_file():
            return self.slabs.read(self.offset + z0, self.offset + z1)

    def close(self) -> None:
        self.slabs.close()


def stack_plane(shape: tuple[int, ...], window: Window, what: str, plane: tuple[int, int] | None = None) -> tuple[int, int]:
    """The slice shape of a truth volume that holds the whole stack or the scored window."""
    if len(shape) != 3 or shape[0] not in (window.total, window.length) or (plane and tuple(shape[1:]) != tuple(plane)):
        expected = f"{window.total} or {window.length} slices" + (f" of {plane}" if plane else "")
        raise PhaseError(f"the {what} has shape {tuple(shape)}; expected {expected}")
    return tuple(shape[1:])


def step_slabs(shape) -> list[tuple[int, int]]:
    return slab_bounds(shape[0], slices_per_slab(shape[1] * shape[2], SLAB_VOXELS), align=2)


def check_step(task: StepTask) -> dict:
    """The preflight of one time step: the submitted volume opened on the scored grid (the
    slices of the water truth's header) and every slab of it read, as ``score_step`` reads it;
    the estimated seconds of scoring it."""
    plane = stack_plane(public.read_header(task.truth).shape, task.window, f"water ground truth of {task.step}")
    shape = (task.window.length, *plane)
    submitted = open_binary(task.file, shape, task.display, task.window)
    try:
        map_slabs(lambda z0, z1: submitted.slab(z0, z1).shape, step_slabs(shape), task.threads)
    finally:
        submitted.close()
    return {"seconds": math.prod(shape) / 1e9 * SECONDS_PER_GVOXEL}


def score_step(task: StepTask) -> dict:
    """Each region's Dice, their harmonic mean, the counts behind them and how the submission
    was stored."""
    window, step = task.window, task.step
    truth = _Windowed(task.truth, window, f"water ground truth of {step}")
    shape = (window.length, *truth.plane)
    labels = _Windowed(task.region_labels, window, f"region labels of {step}", truth.plane) if task.region_labels else None
    masks = [(bit, _Windowed(path, window, f"region mask of {step}", truth.plane)) for bit, path in task.masks]
    submitted = open_binary(task.file, shape, task.display, window)
    lut = np.asarray(task.lut, dtype=np.uint8)
    present = np.asarray(task.patterns, dtype=np.int64)

    def count(z0: int, z1: int) -> np.ndarray:
        pattern = np.zeros((z1 - z0, *truth.plane), dtype=np.uint8)
        if labels is not None:
            region_labels = labels.read(z0, z1)
            if region_labels.dtype.kind not in "ui":
                raise PhaseError("the region label volume must hold integer labels")
            try:
                pattern |= patterns_from_labels(region_labels, lut)
            except ValueError as exc:
                raise PhaseError(str(exc)) from None
        for bit, mask in masks:
            pattern |= binarize(mask.read(z0, z1)) << np.uint8(bit)
        return slab_histogram(pattern, submitted.slab(z0, z1), binarize(truth.read(z0, z1)), present)

    try:
        histogram = sum(map_slabs(count, step_slabs(shape), task.threads))
    finally:
        for source in (truth, labels, submitted, *(m for _, m in masks)):
            if source is not None:
                source.close()
    names = task.region_names
    counts = region_counts(histogram, len(names))
    when_empty = 1.0 if task.empty_region == "one" else math.nan
    scores = {f"dice_{name}": dice(c, when_empty) for name, c in zip(names, counts)}
    result = {
        "harm_mean": harmonic_mean(list(scores.values())),
        **scores,
        "counts": {name: asdict(c) for name, c in zip(names, counts)},
        "format": "bit-packed" if submitted.packed else "plain",
    }
    if submitted.description is not None:
        result["description"] = submitted.description
    return result
