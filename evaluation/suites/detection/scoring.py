"""Scoring one batch of cases in a worker: read, check, extract, match.

picai_eval reads a prediction as float32 and a label as int32 (``picai_eval/image_utils.py:
read_prediction``, ``read_label``) and checks little: only the first axis of the shapes is
compared (a map with fewer slices is centre padded), negative confidences raise, a NaN passes
and breaks AP and AUROC later (``picai_eval/eval.py: evaluate_case``). Here what cannot be
scored is the participant's to fix, in one line that names the file: a map on another grid
than its truth (``readers.images.check_geometry``), a map that is no number array or not 3-D,
a NaN or infinite value, a negative value, and a detection map whose blobs are not each of one
confidence (``candidates.blobs``).
"""

from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.batches import Case, every_case
from evaluation.errors import PhaseError, Unusable, participant_file
from evaluation.readers import images
from evaluation.readers.volume import Volume
from evaluation.suites.detection import candidates, lesions
from evaluation.suites.detection.inputs import TRUTH, Batch

# The preflight's time model: a PI-CAI case (3.5 M voxels) scores in a few milliseconds once
# read; reading its two .nii.gz files takes ~25 ms (bench/README.md, 'detection').
SECONDS_PER_GVOXEL = 8.0


def read_truth(item: Case) -> tuple[Volume, np.ndarray]:
    try:
        volume = images.read(Path(item.truth), display=TRUTH)
    except Unusable as exc:  # the organizer's file
        raise PhaseError(f"case {item.case}: {exc}") from None
    if volume.array.ndim != 3:
        raise PhaseError(
            f"case {item.case}: the ground truth has {volume.array.ndim} dimensions; the detection suite scores 3-D volumes"
        )
    if volume.array.dtype.kind not in "biuf":
        raise PhaseError(f"case {item.case}: the ground truth has data type {volume.array.dtype}; a label map holds numbers")
    return volume, volume.array


def read_map(item: Case, truth: Volume, softmax: bool) -> tuple[np.ndarray, candidates.Foreground]:
    """The case's map as float32 (picai_eval's type: float64 values are rounded to it),
    checked: on the truth's grid (a public header's volume in the preflight), numbers,
    finite and non-negative; with its foreground."""
    volume = images.read(Path(item.pred), display=item.display, max_voxels=truth.array.size)
    images.check_geometry(volume, truth, item.display)
    kind = "softmax map" if softmax else "detection map"
    if volume.array.dtype.kind not in "biuf":
        raise Unusable(f"{item.display}: has data type {volume.array.dtype}; a {kind} holds numbers (float32)")
    array = np.asarray(volume.array, dtype=np.float32)
    ground = candidates.Foreground.of(array)
    values = ground.values
    if values.size and not np.isfinite(values).all():
        raise Unusable(f"{item.display}: holds NaN or infinite values; a {kind} holds confidences between 0 and 1")
    if values.size and values.min() < 0:
        raise Unusable(
            f"{item.display}: holds negative values (e.g. {float(values.min()):.6g}); a {kind} holds confidences "
            "between 0 and 1, 0 for background"
        )
    return array, ground


def candidates_of(batch: Batch, item: Case, truth: Volume) -> candidates.Candidates:
    """The case's lesion candidates: the detection map's blobs, or those of the detection
    map extracted from a softmax map."""
    array, ground = read_map(item, truth, batch.extraction is not None)
    if batch.extraction is None:
        return candidates.blobs(array, item.display, batch.matching.constant_blobs, ground)
    extracted = candidates.extract(array, batch.extraction)
    try:
        return candidates.blobs(extracted, item.display, batch.matching.constant_blobs)
    except Unusable:  # only kept candidates that touch: the phase's option made them
        raise PhaseError(
            f"case {item.case}: with remove_adjacent_lesion_candidates: false, extract_lesion_candidates made touching "
            "candidates of different confidence, which picai_eval refuses; set it to true in phase.yaml"
        ) from None


def score_case(batch: Batch, item: Case) -> dict:
    truth_volume, truth = read_truth(item)
    if item.pred is None:  # missing_cases: empty
        return lesions.missing(truth, batch.matching).to_dict()
    with participant_file():
        found = candidates_of(batch, item, truth_volume)
    return lesions.evaluate(found, truth, batch.matching).to_dict()


def check_case(batch: Batch, item: Case) -> dict:
    """The preflight of one case: its map read, checked and its candidates found as
    ``score_case`` does, against the truth's header; the estimated seconds of scoring it."""
    header = public.read_header(Path(item.truth))
    if item.pred is not None:
        with participant_file():
            candidates_of(batch, item, header.volume())
    return {"seconds": header.voxels / 1e9 * SECONDS_PER_GVOXEL}


def score_batch(batch: Batch) -> dict:
    return every_case(batch, score_case)


def check_batch(batch: Batch) -> dict:
    return {"seconds": sum(found["seconds"] for found in every_case(batch, check_case).values())}
