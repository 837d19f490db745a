"""The phase's choices: which classes, which metrics, whose definition of each.

Every default is the schema's (``schemas/phase.schema.json``, suite ``segmentation``), read
through ``Phase.option``. Metrics are grouped in families; each family follows one library's
definition (``definition``, overridable per family in ``definitions``), because the libraries
disagree family by family: what a surface is and how a percentile, a mean or a tolerance is
taken (distance), what empty masks score and in which precision (overlap), how instances are
matched and counted (instances).
"""

import re
from dataclasses import dataclass, replace

from evaluation.errors import PhaseError
from evaluation.phase import Phase

LIBRARIES = ("panoptica", "metricsreloaded", "monai", "deepmind")
OVERLAP = (
    "counts",
    "dice",
    "iou",
    "precision",
    "recall",
    "fbeta",
    "specificity",
    "npv",
    "accuracy",
    "balanced_accuracy",
    "mcc",
    "cohens_kappa",
    "youden",
    "lr_plus",
    "volume_difference",
    "abs_volume_difference",
)
DISTANCE = ("hd", "hd_percentile", "assd", "masd", "asd", "nsd", "surface_overlap", "surface_size")
FAMILY = {
    **dict.fromkeys(OVERLAP, "overlap"),
    **dict.fromkeys(DISTANCE, "distance"),
    "boundary_iou": "boundary_iou",
    "cldice": "topology",
    "topology": "topology",
    "centre_distance": "centre",
}
FAMILIES = ("overlap", "distance", "boundary_iou", "topology", "centre", "instances")
SUMMARIES = ("detection", "panoptic")
PER_INSTANCE = (
    "dice",
    "iou",
    "hd",
    "hd_percentile",
    "assd",
    "masd",
    "nsd",
    "boundary_iou",
    "cldice",
    "volume_difference",
    "abs_volume_difference",
    "centre_distance",
    "ref_size",
)
# Keys where a lower value is better; ranking by a signed difference or a count is refused.
LOWER_IS_BETTER = re.compile(r"^(hd.*|assd|masd|asd_.*|abs_volume_difference|centre_distance)$")
UNRANKABLE = re.compile(r"^(tp|fp|fn|tn|n_ref|n_pred|volume_difference|surface_.*|iou_sum|ref_.*)$")
INSTANCE_KEYS = ("n_ref", "n_pred", "tp", "fp", "fn", "precision", "recall", "f1")
PANOPTIC_KEYS = ("sq", "pq", "rq", "iou_sum")


def number_key(value) -> str:
    """A number as part of a metrics key (keys hold no dots): 95 -> '95', 0.5 -> '0p5'."""
    return value if isinstance(value, str) else f"{float(value):g}".replace(".", "p").replace("-", "m")


@dataclass(frozen=True)
class ClassDef:
    name: str
    labels: tuple[int, ...]
    # ---- issue 23 (label groups): panoptica's LabelMergeGroup (merge: the labels are one
    # region, as a list of ids always was) or LabelGroup (each label its own instances) ----
    merge: bool = True
    single_instance: bool = False  # the whole class is one instance (matched when both have it)
    # ---- end issue 23 (label groups) ----


@dataclass(frozen=True)
class Options:
    truth: str
    instances_input: bool  # label maps hold instance ids (one class: the foreground)
    classes: tuple[ClassDef, ...]
    metrics: tuple[str, ...]
    definitions: dict  # family -> library
    percentiles: tuple[float, ...]
    nsd_tolerances: tuple  # floats, or "min_spacing"
    fbeta: tuple[float, ...]
    boundary_iou_distances: tuple[float, ...]
    monai_subvoxels: bool
    panoptica_global: bool  # panoptica's pipeline zero-TP rules where the masks do not intersect
    corrections: tuple[str, ...]  # library bugs corrected (the library's value by default)
    spacing: object  # "header", "voxel" or a list of numbers
    empty_masks: str
    empty_values: dict
    instance_metrics: tuple[str, ...]
    matching: str
    match_threshold: float
    match_rule: str
    connectivity: str
    instance_spacing: str
    statistics: tuple[str, ...]
    nan_policy: str
    ranking: str
    ranking_statistic: str
    missing_cases: str
    unknown_labels: str
    # ---- issue 23 (whole evaluations, lesion detail): see modes.py and instance_detail.py ----
    mode: object = None  # modes.Mode: panoptica's evaluator or a BraTS preset, None otherwise
    size_bins: tuple[float, ...] = ()
    size_unit: str = "volume"
    # ---- end issue 23 ----

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        # ---- issue 23: a whole evaluation (panoptica's configuration, a BraTS preset) ----
        from evaluation.suites.segmentation import modes

        mode = modes.from_phase(phase)
        if mode is not None:
            phase = Phase(phase.root, phase.suite, {**mode.defaults, **phase.options})
        # ---- end issue 23 ----
        instances_input = phase.option("input") == "instances"
        chosen = dict(phase.option("definitions"))
        definitions = {family: chosen.get(family, phase.option("definition")) for family in FAMILIES}
        options = cls(
            truth=phase.option("truth"),
            instances_input=instances_input,
            classes=mode_classes(mode) if mode else parse_classes(phase.option("classes"), instances_input),
            metrics=tuple(phase.option("metrics")),
            definitions=definitions,
            percentiles=tuple(float(p) for p in phase.option("percentiles")),
            nsd_tolerances=nsd_tolerances(phase, definitions),
            fbeta=tuple(float(b) for b in phase.option("fbeta")),
            boundary_iou_distances=tuple(float(d) for d in phase.option("boundary_iou_distances")),
            monai_subvoxels=phase.option("monai_subvoxels"),
            panoptica_global=phase.option("panoptica_global"),
            corrections=tuple(phase.option("corrections")),
            spacing=phase.option("spacing"),
            empty_masks=phase.option("empty_masks"),
            empty_values=dict(phase.option("empty_values")),
            instance_metrics=tuple(phase.option("instance_metrics")),
            matching=matching(phase.option("matching"), definitions["instances"]),
            match_threshold=float(phase.option("match_threshold")),
            match_rule=phase.option("match_rule"),
            connectivity=phase.option("connectivity"),
            instance_spacing=phase.option("instance_spacing"),
            statistics=tuple(phase.option("statistics")),
            nan_policy=nan_policy(phase.option("nan_policy"), phase.option("definition")),
            ranking=phase.option("ranking") or "",
            ranking_statistic=phase.option("ranking_statistic"),
            missing_cases=phase.option("missing_cases"),
            unknown_labels=phase.option("unknown_labels"),
            mode=mode,
            size_bins=tuple(sorted(float(b) for b in phase.option("size_bins"))),
            size_unit=phase.option("size_unit"),
        )
        options.validate()
        return options

    def definition(self, family: str) -> str:
        return self.definitions[family]

    @property
    def instance_evaluation(self) -> bool:
        return bool(self.instance_metrics)

    @property
    def instance_units(self) -> str:
        """``voxel`` or ``header``: the spacing of the per-instance distances. By definition,
        MetricsReloaded's per-instance measures drop it (``MixedLocSegPairwiseMeasure`` builds
        ``BinaryPairwiseMeasures`` without ``pixdim``); panoptica's and MONAI's keep it."""
        if self.instance_spacing != "definition":
            return self.instance_spacing
        return "voxel" if self.definition("instances") == "metricsreloaded" else "header"

    @property
    def label_ids(self) -> tuple[int, ...]:
        return tuple(sorted({label for c in self.classes for label in c.labels}))

    def keys(self) -> list[str]:
        """Every per-class key the chosen metrics produce, in output order."""
        if self.mode is not None:  # issue 23: a whole evaluation's own keys
            return self.mode.keys()
        found = [key for metric in self.metrics for key in metric_keys(metric, self)]
        if self.instance_evaluation:
            found += [f"instances_{key}" for key in instance_keys(self)]
        return found

    def __post_init__(self):
        if not self.ranking and self.mode is not None:  # issue 23: the evaluation's own key
            object.__setattr__(self, "ranking", self.mode.ranking)
        if not self.ranking:  # the first key with a better direction
            object.__setattr__(
                self,
                "ranking",
                next(
                    (
                        k
                        for k in self.keys()
                        if not UNRANKABLE.match(k.removeprefix("instances_")) and not MODE_UNRANKABLE.match(k)
                    ),
                    "",
                ),
            )

    def validate(self) -> None:
        refuse_colliding_keys(self)
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise PhaseError("phase.yaml: two classes have the same name")
        if self.ranking not in self.keys():
            raise PhaseError(
                f"phase.yaml: ranking {self.ranking!r} is not one of the metrics this phase computes ({', '.join(self.keys())})"
            )
        if UNRANKABLE.match(self.ranking.removeprefix("instances_")) or MODE_UNRANKABLE.match(self.ranking):
            raise PhaseError(f"phase.yaml: ranking {self.ranking!r} has no better direction; rank by a score")
        unknown = sorted(set(self.empty_values) - set(FAMILY) - set(SUMMARIES))
        if unknown:
            raise PhaseError(f"phase.yaml: empty_values names unknown metrics {unknown}")


# The options whose entries become part of a key, and the metric whose keys they make.
NUMBERED = {"percentiles": "hd_percentile", "nsd_tolerances": "nsd", "fbeta": "fbeta", "boundary_iou_distances": "boundary_iou"}


def refuse_colliding_keys(options: Options) -> None:
    """Two values that write the same key (a key holds a number to 6 significant digits:
    ``nsd_tolerances: [0.7, 0.7000001]`` both write ``nsd_0p7``) would silently keep one
    result for both: refused, naming the values."""
    for option, metric in NUMBERED.items():
        seen = {}
        for value in getattr(options, option):
            key = metric_keys(metric, replace(options, **{option: (value,)}))[0]
            if key in seen:
                raise PhaseError(
                    f"phase.yaml: {option} {seen[key]!r} and {value!r} both give the key {key!r} "
                    "(keys hold numbers to 6 significant digits); give values that differ there"
                )
            seen[key] = value
    keys = options.keys()
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise PhaseError(f"phase.yaml: the metrics give the key(s) {twice} twice")


# NSD's default tolerance where the library has one: panoptica min(voxelspacing)
# (metrics/normalized_surface_dice.py: _compute_normalized_surface_dice), MetricsReloaded 1
# (metrics/pairwise_measures.py: normalised_surface_distance, dict_args "nsd"). MONAI's
# SurfaceDiceMetric requires class_thresholds, DeepMind's compute_surface_dice_at_tolerance a
# tolerance_mm: no default, so a phase must give one.
LIBRARY_TOLERANCE = {"panoptica": "min_spacing", "metricsreloaded": 1.0}
LIBRARY_NAME = {"monai": "MONAI's SurfaceDiceMetric", "deepmind": "DeepMind's compute_surface_dice_at_tolerance"}


def nsd_tolerances(phase: Phase, definitions: dict) -> tuple:
    """``nsd_tolerances`` as given, or (``definition``) the default of each library that
    measures an NSD in this phase: the distance family's for ``nsd``/``surface_overlap``, the
    instance family's for an instance ``nsd``; refused where that library has none."""
    value = phase.option("nsd_tolerances")
    if value != "definition":
        return tuple(t if isinstance(t, str) else float(t) for t in value)
    families = ["distance"] if {"nsd", "surface_overlap"} & set(phase.option("metrics")) else []
    families += ["instances"] if "nsd" in phase.option("instance_metrics") else []
    found = []
    for family in families:
        library = definitions[family]
        if library not in LIBRARY_TOLERANCE:
            raise PhaseError(
                f"phase.yaml: {LIBRARY_NAME.get(library, library)} has no default NSD tolerance ({family} follows "
                f"{library}): set nsd_tolerances, in the units of the spacing (e.g. [1.0] for 1 mm)"
            )
        found.append(LIBRARY_TOLERANCE[library])
    return tuple(dict.fromkeys(found))


# MetricsReloaded's names of its assignments (AssignmentMapping: "greedy_matching",
# "hungarian"), accepted where the instances follow MetricsReloaded.
LIBRARY_MATCHING = {"metricsreloaded": {"greedy_matching": "greedy_lowest_first", "hungarian": "optimal_all_pairs"}}


def matching(value: str, instances: str) -> str:
    """``matching``, a library's own name resolved to the suite's (``hungarian`` under
    MetricsReloaded is ``optimal_all_pairs``: its maximum-total-IoU assignment, pairs above
    the threshold kept). Elsewhere such a name is ambiguous and refused."""
    for library, names in LIBRARY_MATCHING.items():
        if value in names:
            if instances != library:
                raise PhaseError(
                    f"phase.yaml: matching {value!r} is {library}'s name, but the instances follow {instances}; "
                    f"use {names[value]!r} (what it means in {library}) or set definitions.instances: {library}"
                )
            return names[value]
    return value


def nan_policy(value: str, definition: str) -> str:
    """``definition``: MONAI's ``aggregate()`` (``monai``) when the phase's definition is MONAI,
    else undefined values left out (``ignore``)."""
    if value != "definition":
        return value
    return "monai" if definition == "monai" else "ignore"


def metric_keys(metric: str, options: Options) -> list[str]:
    if metric == "counts":
        return ["tp", "fp", "fn", "tn", "n_ref", "n_pred"]
    if metric == "fbeta":
        return [f"f{number_key(b)}" for b in options.fbeta]
    if metric == "hd_percentile":
        return [f"hd{number_key(p)}" for p in options.percentiles]
    if metric == "asd":
        return ["asd_ref_to_pred", "asd_pred_to_ref"]
    if metric == "nsd":
        return [f"nsd_{number_key(t)}" for t in options.nsd_tolerances]
    if metric == "surface_overlap":
        return [f"nsd_{side}_{number_key(t)}" for t in options.nsd_tolerances for side in ("ref", "pred")]
    if metric == "surface_size":
        return ["surface_ref", "surface_pred", "surface_area_ref", "surface_area_pred"]
    if metric == "boundary_iou":
        return [f"boundary_iou_{number_key(d)}" for d in options.boundary_iou_distances]
    if metric == "topology":
        return ["topology_precision", "topology_sensitivity"]
    if metric == "multiclass":  # one set per case, not per class (scoring.score_arrays)
        return []
    return [metric]


def instance_keys(options: Options) -> list[str]:
    found = []
    for metric in options.instance_metrics:
        if metric == "detection":
            found += INSTANCE_KEYS
        elif metric == "panoptic":
            found += PANOPTIC_KEYS
        elif metric in ("size_bins", "ap"):  # issue 23: lesion-level detail (instance_detail.py)
            from evaluation.suites.segmentation import instance_detail

            found += instance_detail.bin_keys(options.size_bins) if metric == "size_bins" else list(instance_detail.AP_KEYS)
        else:
            for key in metric_keys(metric, options) if metric != "ref_size" else ["ref_voxels", "ref_volume"]:
                found += [f"mean_{key}", f"std_{key}"] + ([f"pq_{key}"] if key in ("dice", "iou", "cldice") else [])
    return found


def higher_is_better(key: str) -> bool:
    return not LOWER_IS_BETTER.match(key.removeprefix("instances_").removeprefix("mean_")) and not MODE_LOWER.search(key)


# ---- issue 23: the keys of panoptica's results and the BraTS tables ----
MODE_LOWER = re.compile(r"(^|_)(hd|hd95|assd|cedi|rvae)(_mean)?$|_HD95$")
MODE_UNRANKABLE = re.compile(
    r"^(n_ref_instances|n_pred_instances|.*_std|global_bin_volume_.*|instance_vo.*|.*rvd|"
    r"(all|large|small)_instance_(tp|fp|fn)|Num_.*|GT_Complete_Volume|(instances_)?(n|tp)_(ref|pred)_bin\d+)$"
)


def mode_classes(mode) -> tuple[ClassDef, ...]:
    return tuple(ClassDef(name, labels, merge, single) for name, labels, merge, single in mode.classes)


# ---- end issue 23 ----


def parse_classes(value, instances_input: bool) -> tuple[ClassDef, ...]:
    """``classes``: a list of label ids, or {name: id or [ids]} (a region: the union of its
    labels), or {name: {labels: [ids], merge, single_instance}} (a label group). Instance maps
    have one class, their foreground, unless classes list each class's instance ids."""
    if instances_input and not value:
        return (ClassDef("foreground", ()),)
    if not value:
        raise PhaseError("phase.yaml: the segmentation suite needs 'classes' (label ids, or {name: id or [ids]})")
    if isinstance(value, list):
        return tuple(ClassDef(str(label), (int(label),)) for label in value)
    found = []
    for name, labels in value.items():
        group = labels if isinstance(labels, dict) else {"labels": labels}
        listed = group["labels"] if isinstance(group["labels"], list) else [group["labels"]]
        members = tuple(sorted({int(v) for v in listed}))
        if 0 in members:
            raise PhaseError(f"phase.yaml: class {name!r} includes label 0, the background")
        # ---- issue 23 (label groups) ----
        single = bool(group.get("single_instance", False))
        if single and (len(members) != 1 or instances_input):
            raise PhaseError(f"phase.yaml: class {name!r} is a single instance: it needs exactly one label (semantic input)")
        found.append(ClassDef(str(name), members, bool(group.get("merge", True)), single))
        # ---- end issue 23 (label groups) ----
    return tuple(found)
