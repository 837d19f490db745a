"""The annotator folders, the participant's predictions, and one task per (model, image).

The tool's layout (MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``): one folder
per annotator, its column name the folder name after the last ``_`` (``evaluation_metrics``);
predictions named ``<image>_segPred.<ext>``, directly in the chosen folder or one subfolder per
model in batch mode (``create_evaluation_menu``), the model id again the name after the last
``_`` (``eval_id`` in ``evaluation_metrics``); images read as Z, Y, X
(``read_file``) and any non-zero annotation value counting as foreground
(``binarizar_matrix``). Where the tool writes an all-zero file for an annotator that lacks an
image (``add_missing_files``), the grader treats the annotator as empty and writes nothing.
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, names, public
from evaluation.contract import Payload, Plan, Resources, Task
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.submission import Submission
from evaluation.suites.annotators import masks
from evaluation.suites.annotators.definitions import (
    GENERATED,
    PRED_SUFFIX,
    SINGLE_MODEL,
)
from evaluation.suites.annotators.options import Options

_log = log.get(__name__)

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_IGNORED_FOLDERS = {"__MACOSX"}


@dataclass(frozen=True)
class ImageTask(Payload):
    """One model's prediction of one image (None: missing, scored as empty) and every
    annotator's file for that image (None: the annotator drew nothing)."""

    image: str
    model: str
    prediction: str | None
    annotations: dict[str, str | None]
    display: str
    options: Options


@dataclass(frozen=True)
class Context:
    """What ``summarize`` needs from the plan: column names of the annotators, the images,
    the models, and per model the images skipped and the files that matched no image."""

    options: Options
    annotators: list[str]
    images: list[str]
    models: list[str]
    skipped: dict[str, list[str]]
    ignored: dict[str, list[str]]


# --------------------------------------------------------------------------------------------
# Ground truth


def column_name(folder: str) -> str:
    """The tool's column name of an annotator folder: the text after its last '_'."""
    return folder.rsplit("_", 1)[-1]


def find_annotators(phase: Phase, options: Options) -> dict[str, Path]:
    """Column name -> annotator folder, in column order."""
    root = phase.path(options.annotations)
    if not root.is_dir():
        raise PhaseError(f"the annotations folder {options.annotations!r} named in phase.yaml does not exist")
    folders = options.annotators or tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")))
    if not folders:
        raise PhaseError("the annotations folder holds no annotator folder")
    found = {}
    for folder in folders:
        name = column_name(folder)
        if not (root / folder).is_dir():
            raise PhaseError(f"annotator folder {folder!r} listed in phase.yaml does not exist")
        if name in found or name in (*GENERATED, "Model", "image_id") or not _SAFE_ID.match(name):
            raise PhaseError(f"annotator folder {folder!r} gives the column name {name!r}, which is empty, repeated or reserved")
        found[name] = phase.path(f"{options.annotations}/{folder}")
    return found


def image_files(folder: Path) -> list[Path]:
    """Files of a supported image format directly in ``folder`` (the tool globs one level)."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and images.suffix(p) in images.SUFFIXES)


def truth_images(annotators: dict[str, Path]) -> dict[str, dict[str, str | None]]:
    """Image -> {annotator: file or None}; an image is any file of any annotator, and an
    annotator without a file for it counts as empty (``add_missing_files``, without writing)."""
    per_annotator = {}
    for name, folder in annotators.items():
        stems = {}
        for path in image_files(folder):
            image = images.stem(path)
            if image in stems:
                raise PhaseError(f"annotator {name!r} has two files for image {image!r}")
            if "." in image:
                raise PhaseError(
                    f"annotation file {path.name!r}: image names must not contain '.' (metrics.json keys are dotted paths)"
                )
            stems[image] = str(path)
        per_annotator[name] = stems
    every = sorted(set().union(*per_annotator.values()))
    if not every:
        raise PhaseError("the annotator folders hold no image file")
    return {image: {name: per_annotator[name].get(image) for name in annotators} for image in every}


def annotation_voxels(path: str) -> int:
    """Voxel count of a (trusted) annotation file from its header, for the memory estimate."""
    try:
        return public.voxel_count(Path(path), "annotation")
    except Unusable:  # an estimate only; the worker reports the unreadable file
        return Path(path).stat().st_size * 4


# --------------------------------------------------------------------------------------------
# Submission


def _model_id(folder: str) -> str:
    model = names.checked(column_name(names.checked(folder, "model folder")), "model id")
    if not _SAFE_ID.match(model):
        raise SubmissionError(
            f"model folder '{folder}': its id '{model}' (the name after the last '_') may only hold letters, digits and '-'"
        )
    return model


def model_folders(root: Path) -> dict[str, Path]:
    """Model id -> folder. Images directly in the submission are one model; otherwise every
    subfolder holding images is a model (the tool's batch mode). Single wrapper folders, as
    zipping a folder produces, are looked through."""
    while not image_files(root):
        subfolders = [
            p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".") and p.name not in _IGNORED_FOLDERS
        ]
        with_images = [p for p in subfolders if image_files(p)]
        if with_images:
            models = {}
            for folder in with_images:
                model = _model_id(folder.name)
                if model in models:
                    raise SubmissionError(
                        f"model folders '{models[model].name}' and '{folder.name}' both give the model id '{model}'; rename one"
                    )
                models[model] = folder
            return models
        if len(subfolders) != 1:
            raise SubmissionError(
                "no prediction found: put one image file per test image (<image>.tif or <image>_segPred.tif) "
                "in the submission, or one subfolder of such files per model"
            )
        root = subfolders[0]
    return {SINGLE_MODEL: root}


def predictions(files: list[Path], known: set[str], where: str) -> tuple[dict[str, str], list[str]]:
    """Image -> prediction file for the files of one model, and the files matching no image."""
    found, unmatched = {}, []
    for path in files:
        image = images.stem(path).replace(PRED_SUFFIX, "")
        if image not in known:
            unmatched.append(path.name)
            continue
        if image in found:
            raise SubmissionError(
                f"{where}: two files predict image '{image}' ({Path(found[image]).name} and {path.name}); keep one"
            )
        found[image] = str(path)
    return found, unmatched


def submitted_models(submission: Submission, known: set[str]) -> dict[str, tuple[dict[str, str], list[str]]]:
    """Model id -> (image -> prediction file, unmatched file names)."""
    if submission.named_files is not None:  # Grand-Challenge: one job output per input image, named by the platform
        named = {case.replace(PRED_SUFFIX, ""): str(path) for case, path in submission.named_files.items()}
        found = {image: path for image, path in named.items() if image in known}
        if not found:
            raise SubmissionError("none of the algorithm's outputs belongs to a test image")
        return {SINGLE_MODEL: (found, sorted(Path(p).name for image, p in named.items() if image not in known))}
    models = {}
    for model, folder in model_folders(submission.root).items():
        where = "the submission" if model == SINGLE_MODEL else f"model folder '{folder.name}'"
        found, unmatched = predictions(image_files(folder), known, where)
        if not found:
            shown = f" (found {', '.join(unmatched[:3])}{', ...' if len(unmatched) > 3 else ''})" if unmatched else ""
            raise SubmissionError(
                f"{where}: none of its files is named after a test image{shown}; name each prediction "
                "<image>.<ext> or <image>_segPred.<ext> after the input image it segments"
            )
        models[model] = (found, unmatched)
    return models


# --------------------------------------------------------------------------------------------
# Reading one image's files (in the worker)


def as_zyx(array: np.ndarray, display: str) -> np.ndarray:
    """Z, Y, X as the tool reads images (``read_file``: ``get_image_data("ZYX")``): a 2-D
    image becomes one slice; singleton leading axes (e.g. T or C of size 1) are dropped."""
    while array.ndim > 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 2:
        return array[None]
    if array.ndim != 3:
        raise SubmissionError(f"{display}: has shape {tuple(array.shape)}; expected a 2-D image or a 3-D stack (Z, Y, X)")
    return array


def zyx_volume(volume: images.Volume, display: str) -> tuple[images.Volume, int]:
    """The volume as (Z, Y, X), and the number of axes it had (its geometry's length)."""
    return images.Volume(as_zyx(volume.array, display), volume.spacing, volume.origin, volume.direction), volume.array.ndim


def read_annotations(files: dict[str, str | None], image: str) -> tuple[dict[str, np.ndarray], tuple[images.Volume, int]]:
    """Annotator -> 0/1 (Z, Y, X) mask (``binarizar_matrix``: any non-zero label counts; no file:
    empty), and the first annotation's volume for the prediction's geometry check. A broken
    annotation is the phase's fault, never the participant's."""
    masks, first = {}, None
    try:
        for name, path in files.items():
            if path is None:
                continue
            volume = zyx_volume(images.read(Path(path), display="annotation"), "annotation")
            if first is not None and volume[0].array.shape != first[0].array.shape:
                raise PhaseError(f"the annotations of image {image!r} differ in shape")
            first = first or volume
            masks[name] = (volume[0].array != 0).astype(np.uint8)
    except (Unusable, SubmissionError) as exc:  # the organizer's file
        raise PhaseError(f"an annotation of image {image!r} cannot be used: {exc}") from None
    shape = first[0].array.shape
    return {name: masks.get(name, np.zeros(shape, dtype=np.uint8)) for name in files}, first


def read_prediction(path: Path, truth: tuple[images.Volume, int], display: str) -> images.Volume:
    """The prediction as (Z, Y, X), on the annotations' grid: same shape (the tool's check in
    ``evaluation_metrics``), and the same spacing, origin and direction where both files carry
    them in the same dimension."""
    reference, truth_ndim = truth
    volume, ndim = zyx_volume(images.read(path, display=display, max_voxels=reference.array.size), display)
    if ndim != truth_ndim:
        volume, reference = images.Volume(volume.array), images.Volume(reference.array)
    images.check_geometry(volume, reference, display)
    return volume


# --------------------------------------------------------------------------------------------
# The plan


def _task(model: str, image: str, files: dict, prediction: str | None, options: Options, voxels: int) -> Task:
    """One (model, image) pair. Peak memory measured by bench/annotators_image.py: about
    45 bytes per voxel for three annotators (masks, STAPLE's float64 output, point coordinates
    and KD-trees); the estimate adds headroom for label maps wider than uint8."""
    display = Path(prediction).name if prediction else image
    if model != SINGLE_MODEL and prediction:
        display = f"{Path(prediction).parent.name}/{display}"
    payload = ImageTask(image=image, model=model, prediction=prediction, annotations=files, display=display, options=options)
    return Task(key=f"{model}/{image}", payload=payload, memory_bytes=voxels * (40 + 12 * len(files)))


def plan(submission: Submission, phase: Phase, resources: Resources) -> Plan:
    """Every (model, image) pair as a task, images without a prediction left out under
    ``missing_prediction: skip`` (the tool scores only the files it finds)."""
    options = Options.from_phase(phase)
    masks.footprint(options.dilation_radius or 1, options.dilation_footprint)  # refuse a bad option early
    import SimpleITK  # noqa: F401 - loaded once here, inherited by every forked worker

    annotators = find_annotators(phase, options)
    truth = truth_images(annotators)
    models = submitted_models(submission, set(truth))
    if len(models) > options.max_models:
        shown = ", ".join(sorted(models)[:5]) + (", ..." if len(models) > 5 else "")
        raise SubmissionError(
            f"the submission holds {len(models)} models ({shown}); this phase accepts at most {options.max_models}"
        )
    voxels = {image: annotation_voxels(next(f for f in files.values() if f)) for image, files in truth.items()}
    tasks, skipped, ignored = [], {}, {}
    for model, (found, unmatched) in sorted(models.items()):
        ignored[model] = unmatched
        if unmatched:
            _log.warning("unmatched_prediction_files", model=model, files=unmatched[:20], count=len(unmatched))
        for image, files in truth.items():
            if image not in found and options.missing_prediction == "skip":
                skipped.setdefault(model, []).append(image)
            else:
                tasks.append(_task(model, image, files, found.get(image), options, voxels[image]))
    _log.info("annotators_plan", images=len(truth), annotators=len(annotators), models=len(models), tasks=len(tasks))
    context = Context(
        options=options, annotators=list(annotators), images=list(truth), models=sorted(models), skipped=skipped, ignored=ignored
    )
    missing = [f"{model}/{image}" for model in sorted(models) for image in truth if image not in models[model][0]]
    return Plan(tasks=tasks, context=context, missing=missing)


def publish(phase: Phase, output: Path) -> None:
    """A header of every annotation file, and for an annotator without a file for an image the
    header of the image's first file under the same name (the tool's missing file: an absent
    one would tell that the annotator drew nothing), so the first annotator's header is
    always the file grading checks a prediction against."""
    annotators = find_annotators(phase, Options.from_phase(phase))
    for files in truth_images(annotators).values():
        with organizer_file():
            headers = {
                name: public.Header.of(images.read(Path(path), display="annotation")) for name, path in files.items() if path
            }
        first = next(iter(headers))
        name_of_first = Path(files[first]).name
        for name, folder in annotators.items():
            path = Path(files[name]) if files[name] else folder / name_of_first
            public.header_of(phase, path, output, headers.get(name, headers[first]))
