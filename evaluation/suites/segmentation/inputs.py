"""Finding the cases, pairing each prediction with its truth, and reading both as label maps
on the same grid.

Phase: ``phase.yaml`` and one truth label map per case in ``truth`` (default ``labels/``),
named ``<case>.<ext>`` in any format the readers take (NIfTI, MHA, NRRD, PNG, TIFF, HDF5,
zarr, npy). Submission: one label map per case, matched by name, anywhere in the upload. A
file that matches no case rejects the submission (it is almost always a naming mistake); a
missing case rejects it too unless ``missing_cases`` says otherwise. A case whose file cannot
be read, is on another grid than its truth, or holds labels that are no class fails alone.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.contract import Payload
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.readers.volume import Volume
from evaluation.submission import refuse_dotted, truth_files
from evaluation.suites.segmentation.options import Options

# Peak bytes per voxel of a case: both label maps (up to 8 bytes each as read, int64 after a
# float conversion) and the per-class masks, boundaries and label copies of the box.
BYTES_PER_VOXEL = 40


@dataclass(frozen=True)
class Cases:
    """The plan's context: the options, each case's prediction file as the upload names it (None:
    no prediction), the truth's cases in order, how many have no prediction, and what the chosen
    evaluation keeps for its summary (``Evaluation.context``)."""

    options: Options
    files: dict[str, str | None]
    truth: tuple[str, ...]
    missing: int
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CaseTask(Payload):
    """One case to score: where its truth and prediction are, and what to compute."""

    case: str
    truth: str
    prediction: str | None  # None: missing, scored as an empty prediction (missing_cases: empty)
    display: str
    options: Options
    steps: tuple[str | None, ...] = ()  # several files per case (autoPET's click steps), in order


def truth_cases(phase: Phase, options: Options) -> dict[str, Path]:
    """Case name -> truth file, from the phase's truth folder."""
    cases = truth_files(phase, options.truth)
    refuse_dotted(cases)
    return cases


def submitted_file(found, root: Path):
    """A case's prediction as metrics.json's ``prediction_file`` names it: its path in the
    upload, or the paths of its files (None for one that is missing), or None."""
    if isinstance(found, tuple):
        return [None if f is None else os.path.relpath(f, root) for f in found]
    return None if found is None else os.path.relpath(found, root)


def case_task(case: str, truth: Path, found, file, options: Options) -> CaseTask:
    """The task of one case: its prediction file (``found``: a path, the paths of several files
    in order, or None when missing) and how messages name it (``file``, ``submitted_file``)."""
    several = isinstance(found, tuple)
    return CaseTask(
        case=case,
        truth=str(truth),
        prediction=None if found is None or several else str(found),
        display=file if isinstance(file, str) else case,
        options=options,
        steps=tuple(None if f is None else str(f) for f in found) if several else (),
    )


def memory_estimate(path: Path) -> int:
    """Bytes a case needs, from the truth's header (``public.estimated_voxels``)."""
    return public.estimated_voxels(path) * BYTES_PER_VOXEL + (64 << 20)


# --------------------------------------------------------------------------------------------
# Reading one case (in the worker)


def integer_labels(volume: Volume, display: str, error, negative_background: bool = False) -> np.ndarray:
    """The array as integer labels: integers and booleans as they are, floats only if every
    value is a whole number (label maps are often saved as floats), nothing negative (or, with
    ``negative_background``, negative values as 0)."""
    array = volume.array
    if array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            whole = array.astype(np.int64)
        if not np.array_equal(whole, array):
            raise error(f"{display}: holds non-integer values; a label map must hold whole numbers (0 = background)")
        array = whole
    elif array.dtype.kind == "b":
        array = array.view(np.uint8)
    elif array.dtype.kind not in "iu":
        raise error(f"{display}: has data type {array.dtype}; a label map must hold integers")
    if array.dtype.kind == "i" and array.size and int(array.min()) < 0:
        if negative_background:
            array = np.where(array < 0, 0, array)
        else:
            raise error(f"{display}: holds negative labels (e.g. {int(array.min())}); labels are 0 (background) or positive")
    if array.ndim not in (2, 3):
        raise error(f"{display}: has {array.ndim} dimensions; the segmentation suite scores 2-D and 3-D images")
    return array


def _grid_only(volume: Volume, path: str) -> Volume:
    """PNG stores no spacing or origin (SimpleITK reports 1 and 0): its shape only counts."""
    return Volume(volume.array) if images.suffix(Path(path)) == ".png" else volume


def read_case(task: CaseTask) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    """(truth, prediction, spacing) of a case, the prediction checked against the truth."""
    truth_display = f"the ground truth of case {task.case}"
    try:
        truth_volume = images.read(Path(task.truth), display=truth_display)
    except Unusable as exc:  # the organizer's file
        raise PhaseError(f"case {task.case}: {exc}") from None
    truth = integer_labels(truth_volume, truth_display, PhaseError, _negative_background(task))
    pred = np.zeros(truth.shape, np.uint8) if task.prediction is None else read_prediction(task, truth_volume)
    return truth, pred, spacing_of(task.options, _grid_only(truth_volume, task.truth), truth.ndim)


def read_prediction(task: CaseTask, truth: Volume) -> np.ndarray:
    """The case's prediction as integer labels, checked against the truth's grid (a header's
    volume in the preflight)."""
    volume = images.read(Path(task.prediction), display=task.display, max_voxels=truth.array.size)
    images.check_geometry(_grid_only(volume, task.prediction), _grid_only(truth, task.truth), task.display)
    return integer_labels(volume, task.display, SubmissionError, _negative_background(task))


def _negative_background(task: CaseTask) -> bool:
    return getattr(task.options.mode, "negative_labels_are_background", False)


def publish(phase: Phase, output: Path) -> None:
    """A header (shape, data type, geometry) for every truth label map, as scoring reads it."""
    for case, path in truth_cases(phase, Options.from_phase(phase)).items():
        with organizer_file():
            volume = images.read(path, display=f"the ground truth of case {case}")
        public.header_of(phase, path, output, public.Header.of(volume))


def spacing_of(options: Options, truth: Volume, ndim: int) -> tuple[float, ...]:
    if options.spacing == "voxel":
        return (1.0,) * ndim
    if options.spacing == "header":
        return tuple(float(s) for s in truth.spacing) if truth.spacing is not None else (1.0,) * ndim
    if len(options.spacing) != ndim:
        raise PhaseError(f"phase.yaml: spacing has {len(options.spacing)} values for {ndim}-D images")
    return tuple(float(s) for s in options.spacing)


def refuse_unknown_labels(pred: np.ndarray, known: tuple[int, ...], display: str) -> None:
    """A predicted label that is no class usually means another label convention (255 for
    foreground, ids from another dataset): reported rather than scored as background."""
    present = np.unique(pred) if pred.dtype.itemsize > 2 else np.flatnonzero(np.bincount(pred.ravel()))
    unknown = np.setdiff1d(present, np.array((0, *known)))
    if unknown.size:
        shown = ", ".join(str(v) for v in unknown[:5]) + (", ..." if unknown.size > 5 else "")
        raise SubmissionError(
            f"{display}: holds labels that are no class of this challenge ({shown}); expected 0 and {', '.join(map(str, known))}"
        )
