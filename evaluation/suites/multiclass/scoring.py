"""Scoring one batch of cases in a worker: per case and class, tp, fp, fn and tn.

nnU-Net counts each class from two boolean masks (MIC-DKFZ/nnUNet@0e49508,
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics`` and
``compute_tp_fp_fn_tn``, pixels of its ``ignore_label`` removed); ``metrics.confusion`` gets
the same counts from one confusion matrix. What nnU-Net takes on trust (integer label maps on
the truth's grid, only declared classes) is checked here, so a participant learns why a case
failed instead of getting a silently low score.
"""

from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.batches import Case, every_case
from evaluation.errors import PhaseError, SubmissionError, Unusable, participant_file
from evaluation.metrics.confusion import ClassIndex, confusion_matrix, region_counts
from evaluation.readers import images
from evaluation.suites.multiclass.inputs import TRUTH, Batch

COUNT_KEYS = ("TP", "FP", "FN", "TN")
# The preflight's time model: 400 images of 512^2 with 70 classes score in about 1.5 s above
# the command line's floor (bench/README.md), 15 s per G voxel.
SECONDS_PER_GVOXEL = 15.0


def as_labels(volume: images.Volume, display: str, error=SubmissionError) -> np.ndarray:
    """An integer label map: integer and boolean arrays as they are, floats only when every
    value is a whole number (NIfTI label maps are often stored as floats)."""
    array = volume.array
    if array.dtype.kind in "biu":
        return array
    if array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):  # NaN and huge values fail the comparison below
            whole = array.astype(np.int64)
        if np.array_equal(whole, array):
            return whole
        raise error(f"{display}: holds non-integer values; a label map must hold class ids (0, 1, 2, ...)")
    raise error(f"{display}: has data type {array.dtype}; a label map must hold integer class ids")


def refuse_unknown_labels(pred: np.ndarray, index: ClassIndex, display: str) -> None:
    """A prediction value that is no declared class (nor ``ignore_index``) usually means a
    wrong label convention (-1 for background, 255 for foreground, ids from another dataset).
    nnU-Net counts such pixels as "no class" (``unknown_labels: ignore``); by default they are
    reported instead of silently lowering every score."""
    known = np.array(index.ids + ([index.ignore] if index.ignore is not None else []))
    if pred.dtype.kind == "b" or (
        int(pred.min()) >= known.min() and int(pred.max()) <= known.max() and np.isin(pred, known).all()
    ):
        return
    unknown = np.setdiff1d(np.unique(pred), known)
    shown = ", ".join(str(v) for v in unknown[:5]) + (", ..." if unknown.size > 5 else "")
    raise SubmissionError(
        f"{display}: holds label values that are not classes of this challenge ({shown}); "
        f"expected only {', '.join(map(str, index.ids))}"
    )


def without_png_geometry(volume: images.Volume, path: str) -> images.Volume:
    """PNG stores no spacing or origin (SimpleITK reports 1 and 0): compare its shape only."""
    if images.suffix(Path(path)) != ".png":
        return volume
    return images.Volume(volume.array)


def score_case(batch: Batch, item: Case) -> dict:
    """The case's counts per label or region, as lists in entry order (keys ``COUNT_KEYS``):
    one confusion matrix of the declared labels, each entry's counts read off it."""
    index = ClassIndex(batch.labels, batch.ignore_index)
    try:
        truth_volume = images.read(Path(item.truth), display=TRUTH)
    except Unusable as exc:  # the organizer's file
        raise PhaseError(f"case {item.case}: {exc}") from None
    truth = as_labels(truth_volume, f"the ground truth of case {item.case}", PhaseError)
    if item.pred is None:  # missing_cases: empty
        fill = batch.background if batch.background is not None else index.hi + 1
        pred = np.full(truth.shape, fill, dtype=np.int64)
    else:  # assigned here, not by the pipeline: a batch collects each case's refusal to name every bad file
        with participant_file():
            pred = read_prediction(batch, item, truth_volume)
    counts = region_counts(confusion_matrix(truth, pred, index), batch.entries)
    return {key: getattr(counts, key.lower()).tolist() for key in COUNT_KEYS}


def read_prediction(batch: Batch, item: Case, truth: images.Volume) -> np.ndarray:
    """The case's prediction as a label map, checked against the truth's grid (a header's
    volume in the preflight) and, unless ignored, against the classes."""
    volume = images.read(Path(item.pred), display=item.display, max_voxels=truth.array.size)
    images.check_geometry(without_png_geometry(volume, item.pred), without_png_geometry(truth, item.truth), item.display)
    pred = as_labels(volume, item.display)
    if batch.unknown_labels == "reject":
        refuse_unknown_labels(pred, ClassIndex(batch.labels, batch.ignore_index), item.display)
    return pred


def check_case(batch: Batch, item: Case) -> dict:
    """The preflight of one case: its prediction read as ``score_case`` reads it, against the
    truth's header; the estimated seconds of scoring it."""
    truth = public.read_header(Path(item.truth))
    if item.pred is not None:
        read_prediction(batch, item, truth.volume())
    return {"seconds": truth.voxels / 1e9 * SECONDS_PER_GVOXEL}


def score_batch(batch: Batch) -> dict:
    """Scores every case of the batch; if some cannot be scored, the batch fails with one
    message naming each bad file (the participant sees all problems at once)."""
    return every_case(batch, score_case)


def check_batch(batch: Batch) -> dict:
    """``score_batch``'s preflight: the same failure for the same files."""
    return {"seconds": sum(found["seconds"] for found in every_case(batch, check_case).values())}
