"""The phase's choices: which classes, which metrics, whose definition of each.

Every default is the schema's (``schemas/phase.schema.json``, suite ``segmentation``), read
through ``Phase.option``. Metrics are grouped in families; each family follows one library's
definition (``definition``, overridable per family in ``definitions``), because the libraries
disagree family by family: what a surface is and how a percentile, a mean or a tolerance is
taken (distance), what empty masks score and in which precision (overlap), how instances are
matched and counted (instances).
"""

from dataclasses import dataclass, fields, replace
from functools import cached_property

from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.suites.segmentation import metrics_table, modes
from evaluation.suites.segmentation.keys import Kind
from evaluation.suites.segmentation.metrics_table import FAMILIES, LIBRARIES
from evaluation.suites.segmentation.modes import ClassDef

__all__ = ["FAMILIES", "LIBRARIES", "ClassDef", "Options"]


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
    # what the phase evaluates: its listed metrics (modes.Listed) or a whole evaluation
    # (panoptica's configuration, a BraTS preset), scored by segmentation.EVALUATIONS[mode.kind]
    mode: object
    size_bins: tuple[float, ...] = ()  # lesion-size bin edges (instance_detail.py)
    size_unit: str = "volume"

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        mode = modes.from_phase(phase)
        phase = Phase(phase.root, phase.suite, {**mode.defaults, **phase.options})
        instances_input = phase.option("input") == "instances"
        chosen = dict(phase.option("definitions"))
        definitions = {family: chosen.get(family, phase.option("definition")) for family in FAMILIES}
        options = cls(
            truth=phase.option("truth"),
            instances_input=instances_input,
            classes=mode.classes,
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
        return "voxel" if metrics_table.library(self.definition("instances")) == "metricsreloaded" else "header"

    @property
    def label_ids(self) -> tuple[int, ...]:
        return tuple(sorted({label for c in self.classes for label in c.labels}))

    @cached_property
    def key_kinds(self) -> dict[str, Kind]:
        """Every per-class key the phase writes, in output order, with its kind."""
        return dict(self.mode.kinds(self))

    def keys(self) -> list[str]:
        """Every per-class key the phase writes, in output order."""
        return [key for key, _ in self.mode.kinds(self)]  # a key written twice too (refused)

    def kind(self, key: str) -> Kind:
        return self.key_kinds[key]

    def __post_init__(self):
        if not self.ranking:  # the evaluation's own default
            object.__setattr__(self, "ranking", self.mode.default_ranking(self.mode.kinds(self)))

    def validate(self) -> None:
        refuse_colliding_keys(self)
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise PhaseError("phase.yaml: two classes have the same name")
        if self.ranking not in self.keys():
            raise PhaseError(
                f"phase.yaml: ranking {self.ranking!r} is not one of the metrics this phase computes ({', '.join(self.keys())})"
            )
        if not self.kind(self.ranking).rankable:
            raise PhaseError(f"phase.yaml: ranking {self.ranking!r} has no better direction; rank by a score")
        unknown = sorted(set(self.empty_values) - metrics_table.EMPTY_RULES)
        if unknown:
            raise PhaseError(f"phase.yaml: empty_values names unknown metrics {unknown}")


def refuse_colliding_keys(options: Options) -> None:
    """Two values that write the same key (a key holds a number to 6 significant digits:
    ``nsd_tolerances: [0.7, 0.7000001]`` both write ``nsd_0p7``) would silently keep one
    result for both: refused, naming the values. The options are checked in their order."""
    numbered = metrics_table.parameters()
    for option in (f.name for f in fields(Options) if f.name in numbered):
        seen = {}
        for value in getattr(options, option):
            key = metric_keys(numbered[option], replace(options, **{option: (value,)}))[0]
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


def nsd_tolerances(phase: Phase, definitions: dict) -> tuple:
    """``nsd_tolerances`` as given, or (``definition``) the default of each library that
    measures an NSD in this phase (the NSD's default tolerance of its ``Definition``): the
    family's of the class metrics numbered by the tolerances (``nsd``, ``surface_overlap``),
    the instance family's for an instance ``nsd``; refused where that library has none."""
    value = phase.option("nsd_tolerances")
    if value != "definition":
        return tuple(t if isinstance(t, str) else float(t) for t in value)
    tolerant = [m for m in metrics_table.METRICS if m.keys.parameter == "nsd_tolerances"]
    families = [m.family for m in tolerant if m.per_class and m.name in phase.option("metrics")]
    families += ["instances"] if any(m.per_instance and m.name in phase.option("instance_metrics") for m in tolerant) else []
    found = []
    for family in dict.fromkeys(families):
        library = metrics_table.BY_DEFINITION[metrics_table.library(definitions[family])]
        if library.nsd_tolerance is None:
            raise PhaseError(
                f"phase.yaml: {library.nsd_function} has no default NSD tolerance ({family} follows "
                f"{library.name}): set nsd_tolerances, in the units of the spacing (e.g. [1.0] for 1 mm)"
            )
        found.append(library.nsd_tolerance)
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
            if metrics_table.library(instances) != library:
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
    return "monai" if metrics_table.library(definition) == "monai" else "ignore"


def metric_keys(metric: str, options: Options) -> list[str]:
    """The keys a metric of ``metrics`` writes per class (none for one set per case)."""
    return metrics_table.BY_NAME[metric].keys(options)


def instance_keys(options: Options) -> list[str]:
    """The instance keys (unprefixed) of the phase's ``instance_metrics``, in output order."""
    return [key for m in metrics_table.rows(options.instance_metrics) for key, _ in metrics_table.instance_kinds(m, options)]
