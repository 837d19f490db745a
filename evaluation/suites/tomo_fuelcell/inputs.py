"""From the phase and the submission to one task per time step.

No scoring code was published for this track (tomochallenge/tomochallenge_utils@fab535f
``fuelcell_utils.py`` only packs submissions): the regions come with the ground truth, as a
region label volume plus the labels of each region, or one mask file per region. Region ``k``
is bit ``k`` of a voxel's membership pattern (``regions``).
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, public
from evaluation.contract import Payload, Plan, Resources, Task
from evaluation.errors import PhaseError, organizer_file
from evaluation.phase import Phase
from evaluation.readers.slabs import SLAB_VOXELS, open_slabs
from evaluation.readers.tomo_volumes import Window, match_files
from evaluation.submission import Submission
from evaluation.suites.tomo_fuelcell.options import Options
from evaluation.suites.tomo_fuelcell.regions import MAX_REGIONS, membership_lut

_log = log.get(__name__)


@dataclass(frozen=True)
class StepTask(Payload):
    """One time step to score: the submitted file (``display``: its name in messages), the
    water truth, the region sources (a label volume read through ``lut``, and/or (bit, mask)
    files), the membership patterns that can occur, and the scored window."""

    step: str
    file: Path
    display: str
    truth: Path
    region_labels: Path | None
    masks: tuple[tuple[int, Path], ...]
    lut: tuple[int, ...]
    patterns: tuple[int, ...]
    region_names: tuple[str, ...]
    window: Window
    threads: int
    empty_region: str


@dataclass(frozen=True)
class Steps:
    """The plan's context: the time steps and the region names, in order."""

    steps: tuple[str, ...]
    regions: tuple[str, ...]


def plan(submission: Submission, phase: Phase, resources: Resources) -> Plan:
    options = Options.from_phase(phase)
    names, label_sets, masks = region_layout(options.regions)
    lut = membership_lut(label_sets)
    files = match_files(submission.case_files(), list(options.time_steps))
    threads = resources.threads_per_task(len(options.time_steps))
    tasks = []
    for step in options.time_steps:
        payload = StepTask(
            step=step,
            file=files[step],
            display=files[step].name,
            truth=_resolve(phase, options.truth, step),
            region_labels=_resolve(phase, options.region_labels, step) if any(label_sets) else None,
            masks=tuple((bit, _resolve(phase, template, step)) for bit, template in masks),
            lut=tuple(lut.tolist()),
            patterns=present_patterns(lut, masks),
            region_names=names,
            window=options.window,
            threads=threads,
            empty_region=options.empty_region,
        )
        tasks.append(Task(key=step, payload=payload, memory_bytes=threads * SLAB_VOXELS * 24 + (1 << 28)))
    _log.info("tomo_fuelcell_plan", time_steps=len(tasks), regions=len(names), threads=threads)
    return Plan(tasks=tasks, context=Steps(options.time_steps, names))


def publish(phase: Phase, output: Path) -> None:
    """Per time step, a header (shape, data type) of the water truth and of each region
    volume or mask file."""
    options = Options.from_phase(phase)
    names, label_sets, masks = region_layout(options.regions)
    for step in options.time_steps:
        templates = [options.truth, *([options.region_labels] if any(label_sets) else []), *(t for _, t in masks)]
        for template in templates:
            path = _resolve(phase, template, step)
            with organizer_file(), open_slabs(path, display=f"a ground-truth volume of {step}") as volume:
                header = public.Header(shape=tuple(volume.shape), dtype=np.dtype(volume.dtype).name)
            public.header_of(phase, path, output, header)


def _resolve(phase: Phase, template: str, step: str) -> Path:
    """The ground-truth file ``template`` names for ``step``. A missing one is reported by
    its step and template, never by its name: logs can be public (CodaBench)."""
    path = phase.path(template.replace("{step}", step))
    if not path.exists():
        raise PhaseError(f"time step {step}: a ground-truth file named by a template in phase.yaml does not exist")
    return path


def region_layout(regions: dict) -> tuple[tuple[str, ...], list[list[int]], list[tuple[int, str]]]:
    """(region names in order, the labels of each label-defined region, (bit, mask template)
    of each mask-defined region); region ``k`` is bit ``k`` of the membership pattern."""
    if len(regions) > MAX_REGIONS:
        raise PhaseError(f"at most {MAX_REGIONS} regions can be scored, got {len(regions)}")
    label_sets = [list(spec.get("labels", [])) for spec in regions.values()]
    masks = [(bit, spec["mask"]) for bit, spec in enumerate(regions.values()) if "mask" in spec]
    return tuple(regions), label_sets, masks


def present_patterns(lut: np.ndarray, masks: list[tuple[int, str]]) -> tuple[int, ...]:
    """Every membership pattern a voxel can have: a label's pattern combined with any subset of
    the mask-defined regions."""
    patterns = {int(p) for p in np.unique(lut)}
    for bit, _ in masks:
        patterns |= {p | (1 << bit) for p in patterns}
    return tuple(sorted(p for p in patterns if p))
