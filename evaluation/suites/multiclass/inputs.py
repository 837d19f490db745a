"""From the phase's truth folder and the participant's files to batches of cases.

nnU-Net pairs the files of a prediction folder with those of the reference folder by name
and crashes on a missing one unless told to skip it (MIC-DKFZ/nnUNet@0e49508,
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics_on_folder``, ``chill``).
Here the pairing is the same, but every problem is a message for the participant: a file that
matches no case or (by default) a missing case rejects the submission before any scoring. Several
model folders in one submission are this project's addition (compared against a baseline).
"""

import os
from dataclasses import dataclass
from pathlib import Path

from evaluation import log, names, public
from evaluation.batches import Case
from evaluation.contract import Payload, Plan, Resources, Task
from evaluation.errors import PhaseError, SubmissionError, organizer_file
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.submission import Submission, entries, pair_cases, truth_files
from evaluation.suites.multiclass.options import Options

_log = log.get(__name__)

SINGLE_MODEL = "submission"  # the model's name when the files sit at the top level
# Peak bytes per voxel of one case: float64 truth and prediction plus their int64 copies and
# a comparison mask (integer label maps need far less; the lookup works in 1M-voxel chunks).
BYTES_PER_VOXEL = 36
TRUTH = "a ground-truth label map"  # how messages name a truth file


@dataclass(frozen=True)
class Batch(Payload):
    """The cases one worker scores, with the settings ``scoring.score_case`` needs."""

    cases: tuple[Case, ...]
    labels: tuple[int, ...]  # every declared label value (options.labels)
    entries: tuple[tuple[int, ...], ...]  # per scored label or region, its positions in ``labels``
    ignore_index: int | None
    background: int | None
    unknown_labels: str


@dataclass(frozen=True)
class ModelLayout:
    """One model's cases: scored (in nnU-Net's order, ``nnunet_order``), their prediction files
    (relative to the submission), how many have no prediction, and the task that scores each."""

    cases: list[str]
    files: dict[str, str | None]
    missing: int
    tasks: dict[str, str]


@dataclass(frozen=True)
class Context:
    """What ``summarize`` needs from the plan."""

    options: Options
    layout: dict[str, ModelLayout]
    multi: bool
    baseline: str


def json_key(name: str) -> str:
    """Metrics keys must not contain dots (leaderboard paths are dotted)."""
    return name.replace(".", "_")


def _has_label_file(folder: Path) -> bool:
    return bool(Submission(folder).case_files())


def find_models(submission: Submission, max_models: int) -> dict[str, dict[str, Path]]:
    """Model name -> (case -> file). Label files at the top level are one model; otherwise
    every top-level folder holding label files is a model named after the folder (a single
    such folder is one model, e.g. a zip that wraps its files in a folder)."""
    if submission.named_files is not None:
        return {SINGLE_MODEL: submission.case_files()}
    root = submission.root
    found = entries(root, submission.set_aside)
    if any(images.suffix(p) in images.SUFFIXES for p in found):
        return {SINGLE_MODEL: submission.case_files()}
    folders = [p for p in found if p.is_dir() and _has_label_file(p)]
    if not folders:
        raise SubmissionError(
            f"the submission holds no label maps: upload one file per case named after it ({', '.join(images.SUFFIXES)})"
        )
    if len(folders) == 1:
        return {names.checked(folders[0].name, "model folder"): Submission(folders[0]).case_files()}
    if len(folders) > max_models:
        shown = ", ".join(p.name for p in folders[:5])
        raise SubmissionError(
            f"the submission holds {len(folders)} folders of predictions ({shown}); this phase scores "
            + ("one set of predictions: put your files at the top level" if max_models == 1 else f"at most {max_models} models")
        )
    models = {}
    for folder in folders:
        if "." in folder.name:
            raise SubmissionError(f"model folder '{folder.name}': folder names must not contain dots; rename it")
        models[names.checked(folder.name, "model folder")] = Submission(folder).case_files()
    return models


def truth_cases(phase: Phase, options: Options) -> dict[str, Path]:
    """Case name -> truth file, from the phase's truth folder; names may hold dots (a key
    writes them otherwise) but no two may become one key."""
    cases = truth_files(phase, options.truth)
    keys = {}
    for case in cases:
        if keys.setdefault(json_key(case), case) != case:
            raise PhaseError(f"truth cases {keys[json_key(case)]!r} and {case!r} differ only in dots")
    return cases


def nnunet_order(cases: list[str], submitted: dict[str, Path], truth: dict[str, Path]) -> list[str]:
    """The cases in nnU-Net's order: ``compute_metrics_on_folder`` lists the prediction folder
    with ``subfiles(..., join=False)``, which sorts the file names, and sums every mean in that
    order. File names do not sort as case names do ('p1-b.nii.gz' before 'p1.nii.gz', as '-'
    comes before '.'), and a sum in another order can differ in the last bit. The name is the
    case's with its file's format suffix (on Grand-Challenge, files are named by the platform);
    a case scored as empty (``missing_cases: empty``) takes its truth file's suffix."""

    def file_name(case: str) -> str:
        return case + images.suffix(submitted[case] if case in submitted else truth[case])

    return sorted(cases, key=lambda c: (file_name(c), c))


def batch_size(n_cases: int, workers: int) -> int:
    """Cases per task. A task is a forked worker process, which costs tens of milliseconds
    on a busy machine while a 2D case scores in a few: cases are batched, about four
    batches per worker so the load stays balanced. Small sets keep one case per task, so
    a bad file fails alone; in a batch, it fails its batch (whose message names it)."""
    return max(1, -(-n_cases // (4 * max(1, workers))))


def plan(submission: Submission, phase: Phase, resources: Resources) -> Plan:
    """Every model's cases in batches (``batch_size``), each batch one task."""
    options = Options.from_phase(phase)
    truth = truth_cases(phase, options)
    models = find_models(submission, options.max_models)
    multi = len(models) > 1
    baseline = options.baseline if options.baseline is not None else sorted(models)[0]
    if multi and baseline not in models:
        raise SubmissionError(f"this phase compares models against '{baseline}': include a folder of that name")
    sizes = {case: public.estimated_voxels(path) for case, path in truth.items()}
    size = batch_size(len(truth) * len(models), resources.workers)
    tasks, layout, absent = [], {}, []
    for model, submitted in sorted(models.items()):
        cases = nnunet_order(
            pair_cases(submitted, truth, options.missing_cases, f"model '{model}': " if multi else ""), submitted, truth
        )
        files = {c: (os.path.relpath(submitted[c], submission.root) if c in submitted else None) for c in cases}
        keys = {}
        for start in range(0, len(cases), size):
            batch = cases[start : start + size]
            key = (f"{model}/" if multi else "") + (batch[0] if len(batch) == 1 else f"{batch[0]} .. {batch[-1]}")
            items = tuple(
                Case(case=c, truth=str(truth[c]), pred=str(submitted[c]) if c in submitted else None, display=files[c])
                for c in batch
            )
            payload = Batch(
                cases=items,
                labels=options.labels,
                entries=options.entry_members(),
                ignore_index=options.ignore_index,
                background=options.background,
                unknown_labels=options.unknown_labels,
            )
            tasks.append(Task(key=key, payload=payload, memory_bytes=max(sizes[c] for c in batch) * BYTES_PER_VOXEL + (64 << 20)))
            keys.update(dict.fromkeys(batch, key))
        missing = len(truth) - len(cases) + sum(f is None for f in files.values())
        layout[model] = ModelLayout(cases=cases, files=files, missing=missing, tasks=keys)
        absent.extend((f"{model}/" if multi else "") + c for c in sorted(truth) if files.get(c) is None)
    _log.info("multiclass_plan", models=len(models), cases=len(truth), tasks=len(tasks))
    context = Context(options=options, layout=layout, multi=multi, baseline=baseline)
    return Plan(tasks=tasks, context=context, missing=absent)


def publish(phase: Phase, output: Path) -> None:
    """A header (shape, data type, geometry) for every truth label map, as scoring reads it."""
    for path in truth_cases(phase, Options.from_phase(phase)).values():
        with organizer_file():
            volume = images.read(path, display=TRUTH)
        public.header_of(phase, path, output, public.Header.of(volume))
