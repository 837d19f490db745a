"""One image's row: the model against every annotator, their union, intersection and STAPLE
consensus, and the agreement among the annotators.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``:
``evaluation_metrics`` (the row, the STAPLE consensus, the reduced row of a single annotator),
``jaccard_computing`` (overlap and generalized agreement), ``hausdorff_computing`` and
``msd_computing`` (distances, their empty-mask rules and the agreement means), with Dice
derived from Jaccard as the tool does. The distances come from ``metrics.surface``, which gets
the tool's numbers without its all-pairs search.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, public
from evaluation.metrics.staple import staple
from evaluation.metrics.surface import PointSet, distances
from evaluation.suites.annotators.definitions import (
    EMPTY_SENTINEL,
    GENERATED,
    STAPLE_ITERATIONS,
)
from evaluation.suites.annotators.inputs import (
    ImageTask,
    read_annotations,
    read_prediction,
    zyx_volume,
)
from evaluation.suites.annotators.masks import component_count, dilate, footprint

_log = log.get(__name__)
# The preflight's time model: a 2048^2 image with 3 annotators scores in 3.3-3.9 s
# (bench/README.md), about 300 s per G voxel and annotator.
SECONDS_PER_GVOXEL_AND_ANNOTATOR = 300.0


@dataclass(frozen=True)
class Settings:
    """What ``score_image`` needs besides the masks."""

    staple_threshold: float
    surface_distance: str


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
    """The tool's per-image row for 0/1 (Z, Y, X) masks (after dilation), keyed by the CSV
    columns of ``evaluation_metrics`` (component counts under ``counts``)."""
    names = list(annotators)
    masks = [annotators[n].astype(bool) for n in names]
    m = model.astype(bool)
    surface = "all_pixels" if settings.surface_distance == "all_pixels" else "boundary"
    if len(masks) < 2:  # no consensus; the tool keeps only the first annotator's columns (evaluation_metrics)
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
    pairwise HD/MSD among annotators, where a pair with an empty mask counts 0.0 (the
    generalized values of ``jaccard_computing``, ``hausdorff_computing``, ``msd_computing``)."""
    j_ann = jaccard(inter, union)
    u_all = int(np.count_nonzero(union | m))
    j_model = int(np.count_nonzero(inter & m)) / u_all if u_all else 1.0
    pairs = [_pair(sets[i], sets[k], 0.0, msd) for i in range(len(sets)) for k in range(i + 1, len(sets))]
    return {
        "annotators_agree_jaccard": j_ann,
        "annotators_agree_dice": dice_from_jaccard(j_ann),
        "annotators_agree_hausdorff": float(np.mean([p[0] for p in pairs])) if pairs else 0.0,
        "annotators_agree_msd": float(np.mean([p[1] for p in pairs])) if pairs else 0.0,
        "annotators_model_agree_jaccard": j_model,
        "annotators_model_agree_dice": dice_from_jaccard(j_model),
    }


def score_task(task: ImageTask) -> dict:
    """Read the image's files, select the evaluated class (``extract_sv``), dilate if asked,
    and score; the row's ``status`` says whether the prediction was missing."""
    o = task.options
    annotations, truth = read_annotations(task.annotations, task.image)
    shape = truth[0].array.shape
    if task.prediction is None:
        model = np.zeros(shape, dtype=np.uint8)
    else:
        volume = read_prediction(Path(task.prediction), truth, task.display)
        model = (volume.array == o.eval_class).astype(np.uint8)
        if not model.any() and volume.array.any():
            _log.warning("no_pixel_of_eval_class", prediction=task.display, eval_class=o.eval_class)
    if o.dilation_radius:
        element = footprint(o.dilation_radius, o.dilation_footprint)
        model = dilate(model, element)
        annotations = {name: dilate(mask, element) for name, mask in annotations.items()}
    row = score_image(annotations, model, Settings(o.staple_threshold, o.surface_distance))
    return {**row, "status": "scored" if task.prediction else "missing"}


def check_task(task: ImageTask) -> dict:
    """The preflight of one image: the prediction read as ``score_task`` reads it, checked
    against the first annotation's header; the estimated seconds of scoring it."""
    first = public.read_header(Path(next(path for path in task.annotations.values() if path)))
    if task.prediction is not None:
        read_prediction(Path(task.prediction), zyx_volume(first.volume(), "annotation"), task.display)
    return {"seconds": first.voxels / 1e9 * SECONDS_PER_GVOXEL_AND_ANNOTATOR * len(task.annotations)}
