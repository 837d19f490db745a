"""TomoChallenge operando fuel cells: Dice of water in four regions and their harmonic mean.

No scoring code was published for this track: tomochallenge/tomochallenge_utils@fab535f
``fuelcell_utils.py`` only packs submissions (reconstructed slices 240-840 of 1100, bit-packed
as for the foam). The challenge website defines the score: the Dice of water in region 1
(catalyst-coated membrane + gas diffusion layer + channels), region 2 (one channel), region 3
(gas diffusion layer) and region 4 (membrane), and the harmonic mean of the four, for three
time steps A, B and C. This suite implements that definition (conformance SPEC section 6):

    Dice_k = 2·|S ∧ W ∧ R_k| / (|S ∧ R_k| + |W ∧ R_k|),   score = 4 / Σ_k 1/Dice_k

with the foam scorer's IEEE conventions: a Dice of 0 makes the score 0, a region where
neither the submission nor the truth has water gives 0/0 = NaN (``empty_region: one`` scores
it 1 instead). The regions are supplied with the ground truth: a region label volume plus the
labels of each region (regions may nest: region 1 contains the others), or one mask per
region. Everything is counted on the scored slices, slab by slab, in one pass.
"""

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from evaluation import log
from evaluation.errors import PhaseError
from evaluation.metrics.foam_scores import harmonic_mean
from evaluation.metrics.region_dice import (MAX_REGIONS, dice, membership_lut, patterns_from_labels, region_counts,
                                            slab_histogram)
from evaluation.phase import Phase
from evaluation.readers.slabs import Slabs, map_slabs, open_slabs, slab_bounds, slices_per_slab
from evaluation.readers.tomo_volumes import Window, binarize, open_binary
from evaluation.submission import Submission
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register
from evaluation.suites.tomo_foam import match_files

_log = log.get(__name__)

REFERENCE = {
    "repository": "tomochallenge/tomochallenge_utils",
    "commit": "fab535fd79844c23f6f0660453d83e1f1b9fff46",
    "definition": "challenge website: water Dice in regions 1-4 and their harmonic mean (no published code)",
}
TIME_STEPS = ("A", "B", "C")
DEFAULT_REGIONS = {  # labels of the default region volume: 1 membrane, 2 gas diffusion layer, 3 the scored channel, 4 other channels
    "region_1": {"labels": [1, 2, 3, 4]},
    "region_2": {"labels": [3]},
    "region_3": {"labels": [2]},
    "region_4": {"labels": [1]},
}
DEFAULT_WINDOW = {"start": 240, "stop": 840, "total": 1100}
SLAB_VOXELS = 1 << 24


@dataclass(frozen=True)
class Options:
    time_steps: tuple[str, ...] = TIME_STEPS
    truth: str = "{step}/water.h5"
    region_labels: str = "{step}/regions.h5"
    regions: dict | None = None
    slices: dict | None = None
    empty_region: str = "nan"

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        return cls(
            time_steps=tuple(o.get("time_steps", TIME_STEPS)),
            truth=o.get("truth", cls.truth),
            region_labels=o.get("region_labels", cls.region_labels),
            regions=o.get("regions", DEFAULT_REGIONS),
            slices={**DEFAULT_WINDOW, **o.get("slices", {})},
            empty_region=o.get("empty_region", "nan"),
        )

    @property
    def window(self) -> Window:
        return Window(**self.slices)


def _resolve(phase: Phase, template: str, step: str) -> str:
    """The ground-truth file ``template`` names for ``step``. A missing one is reported by
    its step and template, never by its name: logs can be public (CodaBench)."""
    path = phase.path(template.replace("{step}", step))
    if not path.exists():
        raise PhaseError(f"time step {step}: a ground-truth file named by a template in phase.yaml does not exist")
    return str(path)


# --------------------------------------------------------------------------------------------
# Scoring one time step


class _Windowed:
    """A truth volume holding either the whole slice stack or just the scored window."""

    def __init__(self, path: str, window: Window, what: str, plane: tuple[int, int] | None = None):
        self.slabs: Slabs = open_slabs(Path(path), display=what, trusted=True)
        shape = self.slabs.shape
        if len(shape) != 3 or shape[0] not in (window.total, window.length) or (plane and shape[1:] != plane):
            expected = f"{window.total} or {window.length} slices" + (f" of {plane}" if plane else "")
            raise PhaseError(f"the {what} has shape {shape}; expected {expected}")
        self.offset = window.start if shape[0] == window.total != window.length else 0
        self.plane = shape[1:]

    def read(self, z0: int, z1: int) -> np.ndarray:
        return self.slabs.read(self.offset + z0, self.offset + z1)

    def close(self) -> None:
        self.slabs.close()


def score_step(payload: dict) -> dict:
    window = Window(**payload["window"])
    truth = _Windowed(payload["truth"], window, f"water ground truth of {payload['step']}")
    shape = (window.length, *truth.plane)
    labels = _Windowed(payload["region_labels"], window, f"region labels of {payload['step']}", truth.plane) if payload["region_labels"] else None
    masks = [(bit, _Windowed(path, window, f"region mask of {payload['step']}", truth.plane)) for bit, path in payload["masks"]]
    submitted = open_binary(Path(payload["file"]), shape, payload["display"], window)
    lut = np.asarray(payload["lut"], dtype=np.uint8)
    present = np.asarray(payload["patterns"], dtype=np.int64)

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
        bounds = slab_bounds(shape[0], slices_per_slab(shape[1] * shape[2], SLAB_VOXELS), align=2)
        histogram = sum(map_slabs(count, bounds, payload["threads"]))
    finally:
        for source in (truth, labels, submitted, *(m for _, m in masks)):
            if source is not None:
                source.close()
    names = payload["region_names"]
    counts = region_counts(histogram, len(names))
    when_empty = 1.0 if payload["empty_region"] == "one" else math.nan
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


# --------------------------------------------------------------------------------------------
# The suite


def region_layout(regions: dict) -> tuple[list[str], list[list[int]], list[tuple[int, str]]]:
    """(region names in order, the labels of each label-defined region, (bit, mask template)
    of each mask-defined region); region ``k`` is bit ``k`` of the membership pattern."""
    if len(regions) > MAX_REGIONS:
        raise PhaseError(f"at most {MAX_REGIONS} regions can be scored, got {len(regions)}")
    names, label_sets, masks = [], [], []
    for bit, (name, spec) in enumerate(regions.items()):
        names.append(name)
        label_sets.append(list(spec.get("labels", [])))
        if "mask" in spec:
            masks.append((bit, spec["mask"]))
    return names, label_sets, masks


def present_patterns(lut: np.ndarray, masks: list[tuple[int, str]]) -> list[int]:
    """Every membership pattern a voxel can have: a label's pattern combined with any subset of
    the mask-defined regions."""
    patterns = {int(p) for p in np.unique(lut)}
    for bit, _ in masks:
        patterns |= {p | (1 << bit) for p in patterns}
    return sorted(p for p in patterns if p)


@register
class TomoFuelCell(Suite):
    name = "tomo_fuelcell"
    ranking = "harm_mean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        names, label_sets, masks = region_layout(options.regions)
        window = options.window
        if not 0 <= window.start < window.stop <= window.total:
            raise PhaseError("slices: expected 0 <= start < stop <= total")
        lut = membership_lut(label_sets)
        files = match_files(submission, list(options.time_steps))
        threads = resources.threads_per_task(len(options.time_steps))
        tasks = []
        for step in options.time_steps:
            payload = {
                "step": step, "file": str(files[step]), "display": files[step].name,
                "truth": _resolve(phase, options.truth, step),
                "region_labels": _resolve(phase, options.region_labels, step) if any(label_sets) else None,
                "masks": [(bit, _resolve(phase, template, step)) for bit, template in masks],
                "lut": lut.tolist(), "patterns": present_patterns(lut, masks), "region_names": names,
                "window": asdict(window), "threads": threads, "empty_region": options.empty_region,
            }
            tasks.append(Task(key=step, payload=payload, memory_bytes=threads * SLAB_VOXELS * 24 + (1 << 28)))
        _log.info("tomo_fuelcell_plan", time_steps=len(tasks), regions=len(names), threads=threads)
        return Plan(tasks=tasks, context={"steps": list(options.time_steps), "regions": names})

    def score(self, payload: dict) -> dict:
        return score_step(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        keys = ["harm_mean", *(f"dice_{name}" for name in plan.context["regions"])]
        cases = {}
        for step in plan.context["steps"]:
            outcome = outcomes[step]
            if outcome.ok:
                cases[step] = {**outcome.value, "status": "scored"}
            else:  # a failed time step scores 0, as an empty submission would rank
                cases[step] = {**dict.fromkeys(keys, 0.0), "status": "failed", "error": outcome.message}
        aggregates = {key: float(np.mean([cases[step][key] for step in cases])) for key in keys}
        per_step = {f"harm_mean_{step}": cases[step]["harm_mean"] for step in cases}
        metrics = {"case": cases, "aggregates": {**aggregates, **per_step}, "reference": REFERENCE}
        return Result(metrics=metrics, leaderboard={**aggregates, **per_step},
                      case_scores={step: cases[step]["harm_mean"] for step in cases})
