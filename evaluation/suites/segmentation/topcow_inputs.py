"""One TopCoW case read as the reference reads it (CoWBenchmark/TopCoW_Eval_Metrics@25ca839,
``topcow24_eval/evaluation.py: TopCoWEvaluation.score_case`` and
``score_case_task_1_seg.py``), in the worker:

* both images are cast to uint8 by SimpleITK's ``CastImageFilter``: an integer keeps its low
  8 bits (256 reads 0, 263 reads 7, -1 reads 255), a float is truncated towards zero to a 32-bit
  integer and keeps its low 8 bits, a float beyond that range (or NaN) reads 0. The
  correction ``topcow_label_cast`` refuses values that are no label instead (non-integers,
  negatives, labels beyond 255 through the label check);
* ``pred.CopyInformation(gt)``: the prediction's spacing, origin and direction are replaced by
  the truth's, only the sizes must agree. ``topcow_prediction_geometry`` refuses a prediction
  whose header differs, as every other phase of the suite does;
* with ``topcow_roi`` (``need_crop``), both are cut to the case's ROI file first
  (``utils/crop_gt_and_pred.py``, ``utils/utils_box.py: parse_roi_txt, get_dcm_slice``): line 2
  ``Size (Voxels): X Y Z`` and line 3 ``Location (Voxels): x y z``, their digit runs (a minus
  sign is not read: -4 is 4; ``topcow_roi_sign`` reads it), start at the location clipped to
  0, end at the start plus the size clipped to the image;
* a label that is no TopCoW label makes the reference stop (``KeyError`` in
  ``generate_cls_avg_dict.py: update_cls_avg_dict``): the grader says which labels, for the
  truth as the phase's fault, for the prediction as the participant's (``unknown_labels:
  ignore`` reads them as background).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.errors import PhaseError, SubmissionError, Unusable
from evaluation.metrics import jit
from evaluation.metrics.jit import numba
from evaluation.metrics.small_histogram import small_histogram
from evaluation.readers import images
from evaluation.readers.volume import Volume
from evaluation.suites.segmentation.inputs import CaseTask, integer_labels, spacing_of
from evaluation.suites.segmentation.topcow import LABELS

KNOWN = np.zeros(256, bool)
KNOWN[[0, *LABELS]] = True
LABEL_LIST = "0 (background), 1 to 12 and 15"


@dataclass(frozen=True)
class Case:
    """Both label maps as uint8 in (z, y, x) order, the truth's spacing and direction in ITK's
    (x, y, z) order, and the spacing in array order (metrics.json's ``spacing``)."""

    truth: np.ndarray
    pred: np.ndarray
    spacing_xyz: tuple[float, ...]
    direction_xyz: tuple[float, ...] | None
    spacing: tuple[float, ...]


@numba.njit(cache=True, nogil=True)
def _float_to_uint8(values, out):  # pragma: no cover - compiled
    """SimpleITK's cast of a float to uint8: truncated to a 32-bit integer, its low byte; out
    of that range (NaN included) the conversion gives INT_MIN, whose low byte is 0."""
    for i in range(values.size):
        v = np.float64(values[i])
        if v != v or v >= 2147483648.0 or v <= -2147483649.0:
            out[i] = 0
        else:
            out[i] = np.uint8(np.int64(v) & 255)


def cast(array: np.ndarray) -> np.ndarray:
    """``CastImageFilter`` to uint8 (``sitkUInt8``) of any array the readers return."""
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype.kind in "iub":
        return array.astype(np.uint8)  # numpy's integer cast keeps the low 8 bits, as ITK's
    if array.dtype.kind != "f":
        raise Unusable(f"has data type {array.dtype}; a label map must hold integers")
    values = np.ascontiguousarray(array if array.dtype in (np.float32, np.float64) else array.astype(np.float64))
    out = np.empty(values.shape, np.uint8)
    _float_to_uint8(values.reshape(-1), out.reshape(-1))
    return out


def _labels(volume: Volume, display: str, error, corrections) -> np.ndarray:
    if volume.array.ndim != 3:
        raise error(f"{display}: has {volume.array.ndim} dimensions; TopCoW's label maps are 3-D")
    if "topcow_label_cast" in corrections:
        array = integer_labels(volume, display, error)
        if array.dtype.itemsize > 1 and array.size and int(array.max()) > 255:
            _refuse(np.unique(array[array > 255]), display, error)
        return array.astype(np.uint8)
    try:
        return cast(volume.array)
    except Unusable as exc:
        raise error(f"{display}: {exc}") from None


def _refuse(unknown, display: str, error) -> None:
    shown = ", ".join(str(int(v)) for v in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
    raise error(f"{display}: holds labels that are no TopCoW label ({shown}); the labels are {LABEL_LIST}")


def unknown_labels(labels: np.ndarray) -> np.ndarray:
    """The values of a uint8 label map that are no TopCoW label (counted in cache-sized blocks:
    ``np.bincount`` would widen the whole map to 64 bits first)."""
    present = np.flatnonzero(small_histogram(labels, 256))
    return present[~KNOWN[present]]


def read_case(task: CaseTask) -> Case:
    options = task.options
    corrections = options.corrections
    truth_display = f"the ground truth of case {task.case}"
    try:
        truth_volume = images.read(Path(task.truth), display=truth_display)
    except Unusable as exc:  # the organizer's file
        raise PhaseError(f"case {task.case}: {exc}") from None
    truth = _labels(truth_volume, truth_display, PhaseError, corrections)
    if task.prediction is None:  # missing_cases: empty
        pred = np.zeros(truth.shape, np.uint8)
    else:
        volume = images.read(Path(task.prediction), display=task.display, max_voxels=truth.size)
        _check_grid(volume, truth_volume, task.display, corrections)
        pred = _labels(volume, task.display, SubmissionError, corrections)
    if options.mode.roi is not None:
        window = roi_window(Path(options.mode.roi), task.case, truth.shape, corrections)
        truth, pred = np.ascontiguousarray(truth[window]), np.ascontiguousarray(pred[window])
    unknown = unknown_labels(truth)
    if unknown.size:
        _refuse(unknown, truth_display, PhaseError)
    unknown = unknown_labels(pred)
    if unknown.size and options.unknown_labels == "ignore":
        lookup = np.where(KNOWN, np.arange(256), 0).astype(np.uint8)
        pred = lookup[pred]
    elif unknown.size:
        _refuse(unknown, task.display, SubmissionError)
    spacing = spacing_of(options, truth_volume, 3)
    direction = None
    if truth_volume.direction is not None:  # the reader's array order back to ITK's
        direction = tuple(np.asarray(truth_volume.direction, np.float64).reshape(3, 3)[::-1, ::-1].ravel())
    return Case(truth, pred, tuple(spacing[::-1]), direction, tuple(spacing))


def _check_grid(volume: Volume, truth: Volume, display: str, corrections) -> None:
    """Sizes must agree (``CopyInformation`` raises otherwise); the header too with the
    correction ``topcow_prediction_geometry``."""
    if "topcow_prediction_geometry" in corrections:
        images.check_geometry(volume, truth, display)
    elif volume.array.shape != truth.array.shape:
        images.check_geometry(Volume(volume.array), Volume(truth.array), display)


def check(task: CaseTask) -> np.ndarray:
    """The preflight: the prediction read and refused as ``read_case`` reads it, against the
    truth's header in the public phase (labels outside a ROI are not checked there: the ROI
    files stay with the organizer)."""
    options, header = task.options, public.read_header(Path(task.truth))
    truth = header.volume()
    volume = images.read(Path(task.prediction), display=task.display, max_voxels=header.voxels)
    _check_grid(volume, truth, task.display, options.corrections)
    pred = _labels(volume, task.display, SubmissionError, options.corrections)
    unknown = unknown_labels(pred)
    if unknown.size and options.unknown_labels != "ignore" and options.mode.roi is None:
        _refuse(unknown, task.display, SubmissionError)
    return pred


def roi_window(folder: Path, case: str, shape: tuple[int, ...], corrections=()) -> tuple[slice, ...]:
    """The (z, y, x) slices of the case's ROI file ``<folder>/<case>.txt`` (the organizer's)."""
    path = folder / f"{case}.txt"
    if not path.is_file():
        raise PhaseError(f"topcow_roi: no ROI file {path.name} for case {case}")
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        raise PhaseError(f"topcow_roi: {path.name} cannot be read ({exc.strerror})") from None
    pattern = r"-?\b\d+\b" if "topcow_roi_sign" in corrections else r"\b\d+\b"
    numbers = [[int(n) for n in re.findall(pattern, line)] for line in lines[1:3]]
    if len(numbers) < 2 or any(len(found) < 3 for found in numbers):
        raise PhaseError(
            f"topcow_roi: {path.name} should hold 'Size (Voxels): X Y Z' on its second line and "
            "'Location (Voxels): x y z' on its third"
        )
    size, location = numbers[0][:3], numbers[1][:3]
    window = []
    for n, start, extent in zip(shape[::-1], location, size):  # x, y, z
        end = min(n - 1, start + extent - 1)  # inclusive, clipped to the image
        start = max(0, start)
        if "topcow_roi_sign" not in corrections:
            end = min(n - 1, start + extent - 1)  # get_dcm_slice: the end from the clipped start
        if end < start:
            raise PhaseError(f"topcow_roi: the ROI of {path.name} lies outside the image of case {case} ({shape[::-1]})")
        window.append(slice(start, end + 1))
    return tuple(window[::-1])


def warm_up() -> None:
    def compile_all():
        for dtype in (np.float32, np.float64):
            _float_to_uint8(np.zeros(1, dtype), np.zeros(1, np.uint8))

    jit.warm_up("TopCoW reading", compile_all, [__file__], equivalents=False)
