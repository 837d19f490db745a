"""The phase's ground-truth samples and the submission's predictions: finding and matching
the files, the limits a prediction must respect, and reading one sample's pair into sparse
channels on a common grid.

The reference (``evaluate.main``) walks the natural-sorted prediction files and finds each
one's ground truth as ``<gt folder>/<name up to the first '.'>.zarr``; here the phase's
ground truth drives, so that a sample without a prediction is scored as an empty one instead
of being skipped. Reading follows ``util.read_file`` and ``evaluate.evaluate_file``: the
array under the configured key, size-1 axes dropped, 3 or 4 dimensions left, ``dim_neurons``
from a zarr ground truth's attributes; then ``util.check_and_fix_sizes`` centre-crops the
larger array to the smaller.
"""

import math
import re
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, public
from evaluation.contract import Payload, Task
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.readers.label_stacks import SUFFIXES, Channel, LabelArray, open_labels, stream_channels
from evaluation.submission import Submission
from evaluation.suites.fisbe.options import Options

_log = log.get(__name__)

# A prediction is refused from its metadata when it declares more voxels than this many
# channels of this many times the image's spatial voxels. The reference centre-crops a larger
# prediction, so it may exceed the image in space, but FlyLight samples hold tens of neurons:
# a few thousand instance channels is far beyond any real prediction while it keeps a crafted
# header (10^6 empty channels) from being walked channel by channel.
MAX_PREDICTION_CHANNELS = 4096
MAX_PREDICTION_SPATIAL_FACTOR = 8


@dataclass(frozen=True)
class Sample(Payload):
    """One sample to score: its ground-truth file, its prediction (None: none was submitted,
    scored as an empty prediction) and how to read and treat them."""

    sample: str
    truth: str
    prediction: str | None
    display: str  # the prediction's path inside the submission, as messages name it
    truth_key: tuple[str, ...]
    prediction_key: tuple[str, ...]
    partly: bool
    remove_small_components: int


@dataclass
class SamplePair:
    """One sample's arrays as read: nonzero voxels per channel, both on the cropped grid."""

    gt: list[Channel]
    pred: list[Channel]
    dims: list[int]  # the ground truth's ``dim_neurons`` (original ids)
    shape: tuple[int, int, int]


# --------------------------------------------------------------------------------------------
# Samples and their files


def sample_name(path: Path) -> str:
    """The reference's sample name: the file name up to its first '.'."""
    return path.name.split(".")[0]


def natural_key(name: str):
    """Natural order of sample names (the reference sorts its prediction files with natsort)."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name)))


def truth_files(folder: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or images.suffix(path) not in SUFFIXES:
            continue
        name = path.name[: -len(images.suffix(path))]
        if "." in name:
            raise PhaseError(
                f"ground-truth sample {name!r}: sample names must not contain '.' (a prediction's name ends at its first '.')"
            )
        if name in found:
            raise PhaseError(f"ground-truth sample {name!r} exists twice")
        found[name] = path
    return found


def match_predictions(submission: Submission, truths: dict[str, Path]) -> dict[str, Path]:
    """Sample -> its prediction: a file named after the sample, or whose name up to its first
    '.' is the sample's; other files are ignored, two files for one sample are refused."""
    found: dict[str, Path] = {}
    for stem, path in submission.case_files(SUFFIXES).items():
        sample = stem if stem in truths else sample_name(path)
        if sample not in truths:
            _log.info("fisbe_unmatched_file", file=path.name)
            continue
        if sample in found:
            raise SubmissionError(f"sample '{sample}' has two predictions ({found[sample].name} and {path.name}); keep one")
        found[sample] = path
    if not found:
        raise SubmissionError(
            "no prediction matches a test sample: name each file after its sample, e.g. "
            f"'{next(iter(sorted(truths, key=natural_key)))}.hdf' (HDF5 dataset 'volumes/labels'), .zarr or .tif"
        )
    return found


def tasks(submission: Submission, phase: Phase, options: Options) -> list[Task]:
    """A task per ground-truth sample, in natural order of the sample names."""
    truth_root = phase.path(options.truth)
    if not truth_root.is_dir():
        raise PhaseError("the ground-truth folder named in phase.yaml does not exist")
    truths = truth_files(truth_root)
    if not truths:
        raise PhaseError("the phase holds no ground-truth samples (<sample>.zarr)")
    unknown = sorted(set(options.partly) - set(truths))
    if unknown:
        raise PhaseError(f"phase.yaml lists partly labelled samples that have no ground truth: {', '.join(unknown[:5])}")
    predictions = match_predictions(submission, truths)
    found = []
    for sample in sorted(truths, key=natural_key):
        prediction = predictions.get(sample)
        payload = Sample(
            sample=sample,
            truth=str(truths[sample]),
            prediction=str(prediction) if prediction else None,
            display=prediction.relative_to(submission.root).as_posix() if prediction else sample,
            truth_key=options.truth_key,
            prediction_key=options.prediction_key,
            partly=options.all_partly or sample in options.partly,
            remove_small_components=options.remove_small_components,
        )
        found.append(Task(key=sample, payload=payload, memory_bytes=memory_estimate(truths[sample], options.truth_key)))
    missing = [t.key for t in found if t.payload.prediction is None]
    if missing:
        _log.warning("fisbe_missing_predictions", samples=missing)
    _log.info("fisbe_plan", samples=len(found), submitted=len(predictions))
    return found


def memory_estimate(truth: Path, keys: tuple[str, ...]) -> int:
    """A rough peak: imports and slabs, plus two bytes per voxel of the image for the largest
    skeletonisation box and the sparse voxel lists (neurons fill a small share of it)."""
    base = 320 * 2**20
    try:
        return base + 2 * math.prod(truth_spatial_shape(truth, keys))
    except Unusable:  # an unreadable truth fails properly in its task
        return base


def truth_spatial_shape(truth: Path, keys: tuple[str, ...]) -> tuple[int, ...]:
    """The image's (z, y, x) shape from the ground truth's metadata (a public phase's header)."""
    if public.is_header(truth):
        return public.read_header(truth).shape
    with open_labels(truth, keys, "ground truth") as array:
        return array.shape[-3:]


def publish(phase: Phase, options: Options, output: Path) -> None:
    """A header of every sample's ground truth: its (z, y, x) shape and data type, nothing of
    its instance channels (their number is the number of neurons)."""
    truth_root = phase.path(options.truth)
    if not truth_root.is_dir():
        raise PhaseError("the ground-truth folder named in phase.yaml does not exist")
    for sample, path in truth_files(truth_root).items():
        with organizer_file(), open_labels(path, options.truth_key, "ground truth") as array:
            if len(array.shape) not in (3, 4):
                raise PhaseError(f"ground truth of sample {sample} has {len(array.shape)} dimensions after squeezing")
            header = public.Header(shape=array.shape[-3:], dtype=np.dtype(array.array.dtype).name)
        public.header_of(phase, path, output, header)


# --------------------------------------------------------------------------------------------
# Reading one sample: squeeze, check, centre crop, stream the nonzero voxels


def prediction_voxel_limit(truth_spatial: tuple[int, ...]) -> int:
    """Voxels a prediction for an image of ``truth_spatial`` may declare (see
    ``MAX_PREDICTION_CHANNELS``)."""
    return MAX_PREDICTION_SPATIAL_FACTOR * MAX_PREDICTION_CHANNELS * int(np.prod(truth_spatial, dtype=np.int64))


def check_ndim(labels: LabelArray) -> None:
    if len(labels.shape) not in (3, 4):
        raise SubmissionError(
            f"{labels.display}: has shape {labels.shape} after dropping size-1 axes; "
            "expected a (z, y, x) label image or a (channels, z, y, x) stack"
        )
    if len(labels.shape) == 4 and labels.shape[0] > MAX_PREDICTION_CHANNELS:
        raise SubmissionError(
            f"{labels.display}: has {labels.shape[0]} channels; a channel stack may hold at most "
            f"{MAX_PREDICTION_CHANNELS} (one per predicted instance): submit a label image instead"
        )


def crops(gt_shape: tuple, pred_shape: tuple, display: str) -> tuple[tuple, tuple]:
    """Spatial regions of GT and prediction after the reference's centre crop
    (``util.check_and_fix_sizes`` and ``util.crop``): the larger array is cropped to the
    smaller, offset (a-b)//2; shapes larger in some axes and smaller in others are refused."""
    full = lambda s: tuple(slice(0, n) for n in s)  # noqa: E731
    if gt_shape == pred_shape:
        return full(gt_shape), full(pred_shape)
    centre = lambda big, small: tuple(slice((a - b) // 2, (a - b) // 2 + b) for a, b in zip(big, small))  # noqa: E731
    if all(g <= p for g, p in zip(gt_shape, pred_shape)):
        return full(gt_shape), centre(pred_shape, gt_shape)
    if all(p <= g for g, p in zip(gt_shape, pred_shape)):
        return centre(gt_shape, pred_shape), full(pred_shape)
    raise SubmissionError(
        f"{display}: has spatial shape {pred_shape}, which is larger than the image in some axes and "
        "smaller in others; write the prediction on the image's grid"
    )


def read_sample(sample: Sample) -> SamplePair:
    """Both arrays of ``sample`` as sparse channels on the cropped grid; a missing prediction
    is one empty channel on the ground truth's grid."""
    with ExitStack() as files:
        with organizer_file():
            gt_array = files.enter_context(open_labels(Path(sample.truth), sample.truth_key, "ground truth"))
        if len(gt_array.shape) not in (3, 4):
            raise PhaseError(f"ground truth of sample {sample.sample} has {len(gt_array.shape)} dimensions after squeezing")
        dims = list(gt_array.attrs.get("dim_neurons", [])) if sample.truth.endswith(".zarr") else []
        gt_spatial = gt_array.shape[-3:]
        if sample.prediction is None:
            gt_region, pred_channels = (
                tuple(slice(0, n) for n in gt_spatial),
                [Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))],
            )
        else:  # the participant's file: a refusal is assigned to them by the pipeline (grading)
            gt_region, pred_channels = read_prediction(sample, gt_spatial)
        with organizer_file():
            gt_channels = stream_channels(gt_array, gt_region)
    for channel in gt_channels:
        if channel.values.size and channel.values.min() < 0:
            raise PhaseError("ground truth holds negative ids")
    return SamplePair(gt_channels, pred_channels, dims, tuple(s.stop - s.start for s in gt_region))


def read_prediction(sample: Sample, gt_spatial: tuple[int, ...]) -> tuple[tuple, list[Channel]]:
    """(the image's region after the centre crop, the prediction's channels on it), within the
    limits a prediction for an image of ``gt_spatial`` must respect."""
    limit = prediction_voxel_limit(gt_spatial)
    with open_labels(Path(sample.prediction), sample.prediction_key, sample.display, max_voxels=limit) as pred_array:
        check_ndim(pred_array)
        gt_region, pred_region = crops(gt_spatial, pred_array.shape[-3:], sample.display)
        return gt_region, stream_channels(pred_array, pred_region)
