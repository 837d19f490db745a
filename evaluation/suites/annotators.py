"""Several annotators, one or more models: overlap, distances, agreement and STAPLE consensus.

Reference: MMV-Lab/string_vessel_project@c90f9ec (``core/evaluation.py``:
``evaluation_metrics``, ``jaccard_computing``, ``hausdorff_computing``, ``msd_computing``,
``thicken_segmentation_skimage``, ``generate_statistical_summaries``; the notebook
``model_evaluation.ipynb``). Definitions, constants and quirks follow the conformance kit's
``SPEC.md``; section numbers below refer to it.

Per image and model, the model's mask M is compared with every annotator A_i, with their
union, their intersection and the STAPLE consensus (SimpleITK, probability > 0.5): Jaccard,
Dice = 2J/(1+J), Hausdorff and mean surface distance over all foreground pixels (the tool's
definition; the boundary-based variants are phase options). Agreement among the annotators,
with and without the model, and STAPLE's per-annotator sensitivity and specificity complete
the row. Rows are summarised per model (mean, std, variance, min, max over images).

Ground truth: ``<annotations>/<annotator folder>/<image>.<ext>``; the annotator's column name
is its folder name after the last ``_`` (the tool's rule). Submission: one prediction per
image, ``<image>.<ext>`` or ``<image>_segPred.<ext>``, either directly (one model) or in one
subfolder per model (the tool's batch mode; the model id is the folder name after the last
``_``).
"""

import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

from evaluation import log
from evaluation.errors import GraderError, PhaseError, SubmissionError
from evaluation.metrics.staple import staple
from evaluation.metrics.surface import PointSet, distances
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.submission import Submission
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register

_log = log.get(__name__)

REFERENCE = {
    "repository": "MMV-Lab/string_vessel_project",
    "commit": "c90f9ec1c6c63bd4d232ad0d7bf3c1f35e9db8c6",
    "staple": "SimpleITK STAPLEImageFilter, at most 100 iterations",
}
STAPLE_ITERATIONS = 100  # SetMaximumIterations(100) in evaluation_metrics
EMPTY_SENTINEL = 100.0  # HD/MSD when exactly one of the two masks is empty (SPEC 3)
GENERATED = ("Union", "Intersection", "Staple")
AGREEMENTS = ("annotators_agree", "annotators_model_agree")
METRICS = ("jaccard", "dice", "hausdorff", "msd")
PRED_SUFFIX = "_segPred"  # stripped from prediction file stems, as the tool does
SINGLE_MODEL = "submission"  # the model id of predictions placed directly in the submission
RANKING = "Staple_dice"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_IGNORED_FOLDERS = {"__MACOSX"}


# --------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Options:
    """Phase options; defaults are the tool's (its notebook UI's defaults where it has one)."""

    annotations: str = "annotations"
    annotators: tuple[str, ...] | None = None  # folder names, in column order; default: all, sorted
    eval_class: int = 2  # UI default: class 2, "string vessel"
    dilation_radius: int | None = 3  # UI default: dilation on, radius 3, disk
    dilation_footprint: str = "disk"
    staple_threshold: float = 0.5
    surface_distance: str = "all_pixels"  # all_pixels | boundary | boundary_pooled
    missing_prediction: str = "empty"  # empty | skip (the tool's behaviour)
    max_models: int | None = None
    report: bool = True

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        dilation = o.get("dilation", {})
        return cls(
            annotations=o.get("annotations", cls.annotations),
            annotators=tuple(o["annotators"]) if "annotators" in o else None,
            eval_class=o.get("eval_class", cls.eval_class),
            dilation_radius=None if dilation is False else dilation.get("radius", cls.dilation_radius),
            dilation_footprint=cls.dilation_footprint if dilation is False else dilation.get("footprint", cls.dilation_footprint),
            staple_threshold=o.get("staple_threshold", cls.staple_threshold),
            surface_distance=o.get("surface_distance", cls.surface_distance),
            missing_prediction=o.get("missing_prediction", cls.missing_prediction),
            max_models=o.get("max_models"),
            report=o.get("report", cls.report),
        )


# --------------------------------------------------------------------------------------------
# Masks (SPEC 2)


def as_zyx(array: np.ndarray, display: str) -> np.ndarray:
    """Z, Y, X as the tool reads images (``get_image_data("ZYX")``): a 2-D image becomes one
    slice; singleton leading axes (e.g. T or C of size 1) are dropped."""
    while array.ndim > 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim == 2:
        return array[None]
    if array.ndim != 3:
        raise SubmissionError(f"{display}: has shape {tuple(array.shape)}; expected a 2-D image or a 3-D stack (Z, Y, X)")
    return array


def footprint(radius: int, shape: str) -> np.ndarray:
    """``disk(r)`` or ``square(2r + 1)`` of scikit-image (``thicken_segmentation_skimage``)."""
    from skimage import morphology

    if shape == "disk":
        return morphology.disk(radius).astype(bool)
    if shape == "square":
        return morphology.footprint_rectangle((2 * radius + 1, 2 * radius + 1)).astype(bool)
    raise PhaseError(f"dilation footprint must be 'disk' or 'square', not {shape!r}")


def dilate(mask: np.ndarray, element: np.ndarray) -> np.ndarray:
    """Slice-by-slice dilation of a 0/1 (Z, Y, X) mask. For 0/1 values scikit-image's grey
    dilation is binary dilation, and its reflected border never adds foreground for these
    symmetric footprints, so one binary dilation with a depth-1 element is the same."""
    return ndimage.binary_dilation(mask.astype(bool), structure=element[None]).astype(np.uint8)


def component_count(mask: np.ndarray) -> int:
    """``scipy.ndimage.label`` with its default face-connected structure (``count_components``)."""
    return int(ndimage.label(mask)[1]) if mask.any() else 0


# --------------------------------------------------------------------------------------------
# Metrics of one image (SPEC 3 - 5)


@dataclass(frozen=True)
class Settings:
    """What ``score_image`` needs besides the masks."""

    staple_threshold: float = 0.5
    surface_distance: str = "all_pixels"


def jaccard(x: np.ndarray, m: np.ndarray) -> float:
    """|X & M| / |X | M|, 1.0 when both are empty (``jaccard_computing``)."""
    union = int(np.count_nonzero(x | m))
    return int(np.count_nonzero(x & m)) / union if union else 1.0


def dice_from_jaccard(j: float) -> float:
    """The tool derives Dice column by column from Jaccard: 2J / (1 + J)."""
    return (2 * j) / (1 + j) if j >= 0 else 0


def _pair(a: PointSet, b: PointSet, one_empty: float, surface: str) -> tuple[float, float]:
    """(HD, MSD) of two point sets with the tool's rules for empty masks."""
    if a.empty and b.empty:
        return 0.0, 0.0
    if a.empty or b.empty:
        return one_empty, one_empty
    d = distances(a, b)
    return d.hausdorff, (d.pooled if surface == "boundary_pooled" else d.mean_of_means)


def score_image(annotators: dict[str, np.ndarray], model: np.ndarray, settings: Settings) -> dict:
    """The tool's per-image row for 0/1 (Z, Y, X) masks (after dilation), keyed as in SPEC 0."""
    names = list(annotators)
    masks = [annotators[n].astype(bool) for n in names]
    m = model.astype(bool)
    surface = "all_pixels" if settings.surface_distance == "all_pixels" else "boundary"
    if len(masks) < 2:  # no consensus; the tool keeps only the first annotator's columns (SPEC 2)
        return against_model(list(zip(names, masks)), m, surface, settings.surface_distance)[0]

    consensus = staple([annotators[n] for n in names], STAPLE_ITERATIONS)
    s = consensus.probability > settings.staple_threshold
    union, inter = np.logical_or.reduce(masks), np.logical_and.reduce(masks)
    compared = list(zip(names, masks)) + list(zip(GENERATED, (union, inter, s)))
    row, sets = against_model(compared, m, surface, settings.surface_distance)
    row.update(agreement(union, inter, m, sets[: len(masks)], settings.surface_distance))
    row["annotators_model_agree_hausdorff"] = float(np.mean([row[f"{x}_hausdorff"] for x, _ in compared]))
    row["annotators_model_agree_msd"] = float(np.mean([row[f"{x}_msd"] for x, _ in compared]))
    row.update({f"{n}_sensivity": v for n, v in zip(names, consensus.sensitivity)})  # [sic], the tool's name
    row.update({f"{n}_specificity": v for n, v in zip(names, consensus.specificity)})
    row["staple_fg_pixels"] = int(np.count_nonzero(s))
    row["staple_elapsed_iterations"] = consensus.iterations
    return row


def against_model(compared: list[tuple[str, np.ndarray]], m: np.ndarray, surface: str, msd: str) -> tuple[dict, list[PointSet]]:
    """Component counts and every X in ``compared`` against M: Jaccard, Dice, HD, MSD (100 when
    exactly one of the two is empty). Also returns the point sets, reused for the pairs."""
    model_set = PointSet.of(m, surface)
    sets = [PointSet.of(x, surface) for _, x in compared]
    row = {"counts": {name: component_count(x) for name, x in compared}, "Model_count": component_count(m)}
    for (name, x), x_set in zip(compared, sets):
        j = jaccard(x, m)
        hd, distance = _pair(x_set, model_set, EMPTY_SENTINEL, msd)
        row.update({f"{name}_jaccard": j, f"{name}_dice": dice_from_jaccard(j), f"{name}_hausdorff": hd, f"{name}_msd": distance})
    return row, sets


def agreement(union: np.ndarray, inter: np.ndarray, m: np.ndarray, sets: list[PointSet], msd: str) -> dict:
    """Generalized Jaccard/Dice among annotators (with and without the model) and the mean
    pairwise HD/MSD among annotators, where a pair with an empty mask counts 0.0 (SPEC 5)."""
    j_ann = jaccard(inter, union)
    u_all = int(np.count_nonzero(union | m))
    j_model = int(np.count_nonzero(inter & m)) / u_all if u_all else 1.0
    pairs = [_pair(sets[i], sets[k], 0.0, msd) for i in range(len(sets)) for k in range(i + 1, len(sets))]
    return {
        "annotators_agree_jaccard": j_ann, "annotators_agree_dice": dice_from_jaccard(j_ann),
        "annotators_agree_hausdorff": float(np.mean([p[0] for p in pairs])) if pairs else 0.0,
        "annotators_agree_msd": float(np.mean([p[1] for p in pairs])) if pairs else 0.0,
        "annotators_model_agree_jaccard": j_model, "annotators_model_agree_dice": dice_from_jaccard(j_model),
    }


def columns(names: list[str]) -> list[str]:
    """The per-image CSV's columns in the tool's order (``evaluation_metrics``), the counts
    first; with fewer than two annotators only positions 0, 1, 5, 6, 12, 18, 24 remain."""
    if len(names) < 2:
        return ["image_id", names[0], "Model"] + [f"{names[0]}_{metric}" for metric in METRICS]
    compared = names + list(GENERATED) + list(AGREEMENTS)
    metric_columns = [f"{x}_{metric}" for metric in METRICS for x in compared]
    staple_columns = [f"{n}_sensivity" for n in names] + [f"{n}_specificity" for n in names]
    return ["image_id", *names, *GENERATED, "Model", *metric_columns, *staple_columns]


def csv_values(row: dict) -> dict:
    """A metrics row flattened to the CSV's column names (counts under their mask's name)."""
    flat = {k: v for k, v in row.items() if k not in ("counts", "Model_count", "status")}
    return {**row.get("counts", {}), "Model": row.get("Model_count"), **flat}


# --------------------------------------------------------------------------------------------
# Ground truth and submission layout


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
    annotator without a file for it counts as empty (SPEC 2.5, without writing files)."""
    per_annotator = {}
    for name, folder in annotators.items():
        stems = {}
        for path in image_files(folder):
            image = images.stem(path)
            if image in stems:
                raise PhaseError(f"annotator {name!r} has two files for image {image!r}")
            if "." in image:
                raise PhaseError(f"annotation file {path.name!r}: image names must not contain '.' (metrics.json keys are dotted paths)")
            stems[image] = str(path)
        per_annotator[name] = stems
    every = sorted(set().union(*per_annotator.values()))
    if not every:
        raise PhaseError("the annotator folders hold no image file")
    return {image: {name: per_annotator[name].get(image) for name in annotators} for image in every}


def _model_id(folder: str) -> str:
    model = column_name(folder)
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
        subfolders = [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".") and p.name not in _IGNORED_FOLDERS]
        with_images = [p for p in subfolders if image_files(p)]
        if with_images:
            models = {}
            for folder in with_images:
                model = _model_id(folder.name)
                if model in models:
                    raise SubmissionError(f"model folders '{models[model].name}' and '{folder.name}' both give the model id '{model}'; rename one")
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
            raise SubmissionError(f"{where}: two files predict image '{image}' ({Path(found[image]).name} and {path.name}); keep one")
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


def _zyx_volume(volume: images.Volume, display: str) -> tuple[images.Volume, int]:
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
            volume = _zyx_volume(images.read(Path(path), display="annotation", trusted=True), "annotation")
            if first is not None and volume[0].array.shape != first[0].array.shape:
                raise PhaseError(f"the annotations of image {image!r} differ in shape")
            first = first or volume
            masks[name] = (volume[0].array != 0).astype(np.uint8)
    except SubmissionError as exc:
        raise PhaseError(f"an annotation of image {image!r} cannot be used: {exc}") from None
    shape = first[0].array.shape
    return {name: masks.get(name, np.zeros(shape, dtype=np.uint8)) for name in files}, first


def read_prediction(path: Path, truth: tuple[images.Volume, int], display: str) -> images.Volume:
    """The prediction as (Z, Y, X), on the annotations' grid: same shape (the tool's check), and
    the same spacing, origin and direction where both files carry them in the same dimension."""
    reference, truth_ndim = truth
    volume, ndim = _zyx_volume(images.read(path, display=display, max_voxels=reference.array.size), display)
    if ndim != truth_ndim:
        volume, reference = images.Volume(volume.array), images.Volume(reference.array)
    images.check_geometry(volume, reference, display)
    return volume


def _voxels(path: str) -> int:
    """Voxel count of a (trusted) annotation file from its header, for the memory estimate."""
    try:
        return int(np.prod(images.probe_shape(Path(path), display="annotation", trusted=True), dtype=np.int64))
    except GraderError:  # an estimate only; the worker reports the unreadable file
        return Path(path).stat().st_size * 4


# --------------------------------------------------------------------------------------------
# Summaries (``generate_statistical_summaries``)


def column_stats(values: list) -> dict:
    """mean, std (ddof 1), variance, min, max over images, NaN skipped, computed the way pandas
    does (NaN filled with 0 in the sums, divided by the count of numbers)."""
    v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
    valid = ~np.isnan(v)
    count = int(valid.sum())
    if count == 0:
        return dict.fromkeys(("mean", "std", "variance", "min", "max"), math.nan)
    filled = np.where(valid, v, 0.0)
    mean = float(filled.sum() / count)
    variance = float(np.where(valid, (v - mean) ** 2, 0.0).sum() / (count - 1)) if count > 1 else math.nan
    return {"mean": mean, "std": math.sqrt(variance) if count > 1 else math.nan, "variance": variance,
            "min": float(v[valid].min()), "max": float(v[valid].max())}


def model_summary(rows: dict[str, dict], summarized: list[str]) -> dict[str, dict]:
    """statistic -> column -> value over one model's scored images."""
    stats = {c: column_stats([csv_values(r).get(c) for r in rows.values()]) for c in summarized}
    return {s: {c: stats[c][s] for c in summarized} for s in ("mean", "std", "variance", "min", "max")}


def min_max_ids(summaries: dict[str, dict], summarized: list[str]) -> dict[str, dict]:
    """``min_max_summary.csv``: per statistic, the model ids reaching the min and max of each
    column, comma-joined; 'independent of model election' when all models tie."""
    table = {}
    for statistic in ("mean", "std", "variance"):
        low, high = {}, {}
        for c in summarized:
            values = {m: s[statistic][c] for m, s in summaries.items()}
            finite = [v for v in values.values() if not math.isnan(v)]
            if not finite:
                low[c] = high[c] = ""
            elif min(finite) == max(finite):
                low[c] = high[c] = "independent of model election"
            else:
                low[c] = ",".join(m for m, v in values.items() if v == min(finite))
                high[c] = ",".join(m for m, v in values.items() if v == max(finite))
        table[f"min_{statistic}"], table[f"max_{statistic}"] = low, high
    return table


# --------------------------------------------------------------------------------------------
# The suite


@register
class Annotators(Suite):
    name = "annotators"
    ranking = RANKING
    higher_is_better = True

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        footprint(options.dilation_radius or 1, options.dilation_footprint)  # refuse a bad option early
        import SimpleITK  # noqa: F401 - loaded once here, inherited by every forked worker
        annotators = find_annotators(phase, options)
        truth = truth_images(annotators)
        models = submitted_models(submission, set(truth))
        if options.max_models is not None and len(models) > options.max_models:
            raise SubmissionError(f"the submission holds {len(models)} models ({', '.join(sorted(models))}); this phase accepts at most {options.max_models}")
        settings = {**asdict(options), "annotators": list(annotators)}
        voxels = {image: _voxels(next(f for f in files.values() if f)) for image, files in truth.items()}
        tasks, skipped, ignored = [], {}, {}
        for model, (found, unmatched) in sorted(models.items()):
            ignored[model] = unmatched
            if unmatched:
                _log.warning("unmatched_prediction_files", model=model, files=unmatched[:20], count=len(unmatched))
            for image, files in truth.items():
                if image not in found and options.missing_prediction == "skip":
                    skipped.setdefault(model, []).append(image)
                else:
                    tasks.append(_task(model, image, files, found.get(image), settings, voxels[image]))
        _log.info("annotators_plan", images=len(truth), annotators=len(annotators), models=len(models), tasks=len(tasks))
        context = {"options": settings, "annotators": list(annotators), "images": list(truth), "models": sorted(models),
                   "skipped": skipped, "ignored": ignored}
        return Plan(tasks=tasks, context=context)

    def score(self, payload: dict) -> dict:
        o = payload["settings"]
        display = payload["display"]
        annotations, truth = read_annotations(payload["annotations"], payload["image"])
        shape = truth[0].array.shape
        if payload["prediction"] is None:
            model = np.zeros(shape, dtype=np.uint8)
        else:
            volume = read_prediction(Path(payload["prediction"]), truth, display)
            model = (volume.array == o["eval_class"]).astype(np.uint8)
            if not model.any() and volume.array.any():
                _log.warning("no_pixel_of_eval_class", prediction=display, eval_class=o["eval_class"])
        if o["dilation_radius"]:
            element = footprint(o["dilation_radius"], o["dilation_footprint"])
            model = dilate(model, element)
            annotations = {name: dilate(mask, element) for name, mask in annotations.items()}
        row = score_image(annotations, model, Settings(o["staple_threshold"], o["surface_distance"]))
        return {**row, "status": "scored" if payload["prediction"] else "missing"}

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        from evaluation.suites import annotators_report

        names = plan.context["annotators"]
        summarized = columns(names)[columns(names).index("Model") + 1:]
        rows: dict[str, dict[str, dict]] = {m: {} for m in plan.context["models"]}
        case: dict[str, dict] = {}
        for task in plan.tasks:
            outcome, model, image = outcomes[task.key], task.payload["model"], task.payload["image"]
            if outcome.ok:
                rows[model][image] = outcome.value
                case.setdefault(image, {})[model] = outcome.value
            else:
                case.setdefault(image, {})[model] = {"status": "failed", "error": outcome.message}
        case = {image: case[image] for image in plan.context["images"] if image in case}
        summaries = {m: model_summary(r, summarized) for m, r in rows.items()}
        ranking_column = RANKING if len(names) >= 2 else f"{names[0]}_dice"
        ranked = max(sorted(summaries), key=lambda m: _finite_or(summaries[m]["mean"][ranking_column], -math.inf))
        aggregates = {
            **summaries[ranked], "ranked_model": ranked, "ranking_column": ranking_column,
            "models": summaries, "scored_images": {m: len(r) for m, r in rows.items()},
            "skipped_images": plan.context["skipped"], "ignored_files": plan.context["ignored"],
        }
        if len(summaries) > 1:
            aggregates["min_max"] = min_max_ids(summaries, summarized)
        leaderboard = {c: v for c, v in summaries[ranked]["mean"].items() if math.isfinite(v)}
        leaderboard[RANKING] = _finite_or(summaries[ranked]["mean"][ranking_column], 0.0)
        metrics = {"case": case, "aggregates": aggregates, "reference": {**REFERENCE, "settings": _settings_node(plan.context["options"])}}
        files = annotators_report.outputs({**plan.context, "ranked_model": ranked}, rows, summaries, columns(names), bool(plan.context["options"]["report"]))
        return Result(
            metrics=metrics,
            leaderboard=leaderboard,
            case_scores={image: r[ranking_column] for image, r in rows[ranked].items()},
            files=files,
        )


def _task(model: str, image: str, files: dict, prediction: str | None, settings: dict, voxels: int) -> Task:
    """One (model, image) pair. Peak memory measured by bench/annotators_image.py: about
    45 bytes per voxel for three annotators (masks, STAPLE's float64 output, point coordinates
    and KD-trees); the estimate adds headroom for label maps wider than uint8."""
    display = Path(prediction).name if prediction else image
    if model != SINGLE_MODEL and prediction:
        display = f"{Path(prediction).parent.name}/{display}"
    payload = {"image": image, "model": model, "prediction": prediction, "annotations": files, "display": display, "settings": settings}
    return Task(key=f"{model}/{image}", payload=payload, memory_bytes=voxels * (40 + 12 * len(files)))


def _finite_or(value: float, default: float) -> float:
    return value if math.isfinite(value) else default


def _settings_node(settings: dict) -> dict:
    """The options as a metrics.json node (no tuples, no None lists), without the name of the
    ground-truth folder: nothing of the ground truth's layout reaches the participant."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in settings.items() if k != "annotations"}
