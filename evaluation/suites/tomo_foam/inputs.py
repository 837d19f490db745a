"""From the phase and the submission to one task per phantom.

The reference scores one submitted volume per phantom (tomochallenge/tomochallenge_utils
@fab535f ``foam_phantom_utils.compute_scores(ground_truth_file, vol)``): here each phantom
of the phase is a case, matched to the submitted file named after it.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log
from evaluation.contract import Payload, Plan, Resources, Task
from evaluation.phase import Phase
from evaluation.readers.slabs import SLAB_VOXELS
from evaluation.readers.tomo_volumes import match_files
from evaluation.submission import Submission
from evaluation.suites.tomo_foam.options import Options
from evaluation.suites.tomo_foam.phantom import Grid
from evaluation.suites.tomo_foam.truth import PhantomTruth, phantom_truths

_log = log.get(__name__)


@dataclass(frozen=True)
class PhantomTask(Payload):
    """One phantom to score: its ground truth and the submitted file (``display``: its name
    in messages), counted on ``threads`` threads."""

    truth: PhantomTruth
    file: Path
    display: str
    threads: int
    defined_only: bool  # harm_mean_of: defined


@dataclass(frozen=True)
class Phantoms:
    """The plan's context: the phantoms' names, in the phase's order."""

    names: tuple[str, ...]


def plan(submission: Submission, phase: Phase, resources: Resources) -> Plan[Phantoms]:
    """One task per phantom."""
    options = Options.from_phase(phase)
    truths = phantom_truths(phase, options)
    files = match_files(submission.case_files(), [t.name for t in truths])
    threads = resources.threads_per_task(len(truths))
    tasks = [
        Task(
            key=truth.name,
            memory_bytes=memory_bytes(truth.grid, threads),
            payload=PhantomTask(truth, files[truth.name], files[truth.name].name, threads, options.defined_only),
        )
        for truth in truths
    ]
    _log.info("tomo_foam_plan", phantoms=len(truths), threads=threads)
    return Plan(tasks=tasks, context=Phantoms(tuple(t.name for t in truths)))


def memory_bytes(grid: Grid, threads: int) -> int:
    """A bit-packed submission held whole (one byte per 8 voxels) plus each thread's slab
    temporaries (about 24 bytes per voxel)."""
    voxels = int(np.prod(grid.shape, dtype=np.int64))
    return voxels // 8 + threads * min(voxels, SLAB_VOXELS) * 24
