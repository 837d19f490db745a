"""What a phase evaluates, chosen once from phase.yaml: the metrics it lists (``Listed``: its
classes, ``metrics`` and ``instance_metrics``, the keys the metric table gives them) or a whole
evaluation it names instead: panoptica's evaluator configuration (``panoptica``),
BraTS_evaluation 0.0.10's six bundled configurations (``preset: brats-gli`` ...
``brats-goat``), the BraTS 2023 lesion-wise metrics (``preset: brats2023-gli`` ...
``brats2023-met``), an autoPET edition's evaluation (``preset: autopet4`` ... ``autopet1``)
or TopCoW 2024's multiclass evaluation (``preset: topcow2024-task1``).

Each says what ``Options`` needs before anything is scored: its classes, every key it writes
with the key's kind (``keys.Kind``), its default ranking key and the options it sets itself.
How it scores and summarises is the suite's ``EVALUATIONS[kind]``
(the ``evaluations.Evaluation`` interface).

The bundled configurations are written here as data (the groups and settings of
``brats_evaluation/configs/config_<task>.yaml``): all six match greedily nothing but optimally,
``MaxBipartiteMatching`` on Dice above 1e-6, measure Dice, NSD and HD95 per lesion and
globally, and score a metric with no match 0 (HD95: infinite; NaN when there is no lesion at
all). They differ in their groups only.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.suites.segmentation import autopet, brats2023, brats_table, metrics_table, panoptica_config, topcow
from evaluation.suites.segmentation.keys import COUNT, Kind, in_reference_table
from evaluation.suites.segmentation.panoptica_config import EvaluatorConfig, Group, Matcher, ZeroTP


@dataclass(frozen=True)
class ClassDef:
    """A class: its labels (a region, their union, when ``merge``; panoptica's LabelGroup,
    each label its own instances, when not), or one instance (``single_instance``: matched
    whenever both maps have it)."""

    name: str
    labels: tuple[int, ...]
    merge: bool = True
    single_instance: bool = False


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
        single = bool(group.get("single_instance", False))
        if single and (len(members) != 1 or instances_input):
            raise PhaseError(f"phase.yaml: class {name!r} is a single instance: it needs exactly one label (semantic input)")
        found.append(ClassDef(str(name), members, bool(group.get("merge", True)), single))
    return tuple(found)


@dataclass(frozen=True)
class Listed:
    """The phase's own classes and metrics."""

    classes: tuple[ClassDef, ...]
    kind: ClassVar[str] = "metrics"
    defaults: ClassVar[dict] = {}

    def kinds(self, options) -> list[tuple[str, Kind]]:
        return metrics_table.listed_kinds(options)

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        """The first key with a direction."""
        return next((key for key, kind in kinds if kind.rankable), "")


_SCORE_RULE = ZeroTP(math.nan, 0.0, 0.0, 0.0)
_HD95_RULE = ZeroTP(math.nan, math.inf, math.inf, math.inf)


def _groups(*spec) -> tuple[Group, ...]:
    return tuple(Group(name, tuple(labels), merge) for name, labels, merge in spec)


BRATS_GROUPS = {
    "gli": _groups(
        ("snfh", [2], False),
        ("et", [3], False),
        ("netc", [1], False),
        ("rc", [4], False),
        ("tc", [1, 3], True),
        ("wt", [1, 2, 3], True),
    ),
    "mets": _groups(("et", [3], False), ("rc", [4], False), ("tc", [1, 3], True), ("wt", [1, 2, 3], True)),
    "ped": _groups(
        ("et", [1], False),
        ("netc", [2], False),
        ("cc", [3], False),
        ("ed", [4], False),
        ("tc", [1, 2, 3], True),
        ("wt", [1, 2, 3, 4], True),
    ),
    "menrt": _groups(("gtv", [1], False)),
    "menpre": _groups(("et", [3], False), ("tc", [1, 3], True), ("wt", [1, 2, 3], True)),
    "goat": _groups(("et", [3], False), ("tc", [1, 3], True), ("wt", [1, 2, 3], True)),
}


def brats_config(task: str) -> EvaluatorConfig:
    return EvaluatorConfig(
        expected_input="semantic",
        backend=None,
        matcher=Matcher("max_bipartite", "DSC", 1e-6),
        instance_metrics=("DSC", "NSD", "HD95"),
        global_metrics=("DSC", "NSD", "HD95"),
        zero_tp={"DSC": _SCORE_RULE, "NSD": _SCORE_RULE, "HD95": _HD95_RULE},
        empty_list_std=math.nan,
        groups=BRATS_GROUPS[task],
    )


def _classes(groups: tuple[Group, ...]) -> tuple[ClassDef, ...]:
    return tuple(ClassDef(g.name, g.labels, g.merge, g.single_instance) for g in groups)


@dataclass(frozen=True)
class PanopticaConfiguration:
    """panoptica's evaluator configuration: its result keys per group."""

    config: EvaluatorConfig
    name: str = "panoptica"  # metrics.json reference.evaluation: panoptica, or the preset
    kind: ClassVar[str] = "panoptica"
    reference: ClassVar[str] = "BrainLesion/panoptica 2.1.7, Panoptica_Evaluator"
    defaults: ClassVar[dict] = {}

    @property
    def classes(self) -> tuple[ClassDef, ...]:
        return _classes(self.config.groups)

    def kinds(self, options) -> list[tuple[str, Kind]]:
        return panoptica_config.result_kinds(self.config)

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        """panoptica's PQ (of Dice where it measures Dice), else its RQ."""
        keys = [key for key, _ in kinds]
        return next((k for k in ("pq_dsc", "pq", "rq") if k in keys), "rq")


@dataclass(frozen=True)
class BratsPreset(PanopticaConfiguration):
    """BraTS_evaluation's table fields per region: ``parser`` is metrics_parser's ``seg`` or
    ``mets``."""

    parser: str = "seg"
    volume_threshold: float = 20.0
    overlap_threshold: float = 0.1
    kind: ClassVar[str] = "brats"
    reference: ClassVar[str] = (
        "BraTS_evaluation 0.0.10 (PyPI brats-evaluation) with panoptica 2.1.7, brats-evaluate and brats-parse-metrics"
    )
    # BraTS_evaluation gives a subject without a prediction its penalty row rather than
    # refusing the submission
    defaults: ClassVar[dict] = {"missing_cases": "penalty"}

    def kinds(self, options) -> list[tuple[str, Kind]]:
        return list(brats_table.METS_TABLE if self.parser == "mets" else brats_table.SEG_TABLE)

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        return "lesionwise_dsc_mean"


@dataclass(frozen=True)
class Brats2023Preset:
    """The BraTS 2023 lesion-wise table per region, for one challenge's settings."""

    name: str  # the preset
    challenge: str
    kind: ClassVar[str] = "brats2023"
    reference: ClassVar[str] = "rachitsaluja/BraTS-2023-Metrics@43c9052, metrics.py: get_LesionWiseResults"
    defaults: ClassVar[dict] = {}
    # The 2023 code reads each region as a set of labels (``get_LesionWiseResults``: the masks
    # of labels 1, 2, 3), so a negative value (-1, as some label maps mark unlabelled voxels)
    # is background there: read it as 0, where the other evaluations refuse it.
    negative_labels_are_background: ClassVar[bool] = True

    @property
    def classes(self) -> tuple[ClassDef, ...]:
        return tuple(ClassDef(name, labels) for name, labels in brats2023.REGIONS)

    def kinds(self, options) -> list[tuple[str, Kind]]:
        return list(brats2023.COLUMNS)

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        return "LesionWise_Score_Dice"


@dataclass(frozen=True)
class AutopetPreset:
    """An autoPET edition's evaluation (``autopet.PRESETS``): one class, ``lesion`` (every
    non-zero value, as the references read it), and the metric table's ``dice``, ``fpv_ml`` and
    ``fnv_ml`` with their voxel counts, or, ``interactive``, their areas over the click steps,
    their last values and every step's values."""

    name: str  # the preset
    rules: autopet.Rules
    aggregation: str  # autopet.AGGREGATIONS: which cases each mean leaves out
    interactive: bool
    numpy: int  # the numpy generation whose float rounding the volumes take
    steps: int  # click steps of the interactive task
    kind: ClassVar[str] = "autopet"
    # the reference skips a case without prediction (get_metrics: "Missing prediction", continue)
    defaults: ClassVar[dict] = {"missing_cases": "skip"}

    @property
    def classes(self) -> tuple[ClassDef, ...]:
        return (ClassDef("lesion", ()),)

    @property
    def reference(self) -> str:
        return autopet.REFERENCES[self.rules.edition] + (", compute_interactive_metrics" if self.interactive else "")

    def kinds(self, options) -> list[tuple[str, Kind]]:
        scored = [(key, metrics_table.BY_NAME[key].kind) for key in autopet.SCORED]
        counts = [(key, COUNT) for key in autopet.COUNTED]
        if not self.interactive:
            return scored + counts
        found = [(f"{key}_{what}", kind) for what in ("auc", "final") for key, kind in scored]
        every_step = [(key, Kind(kind.direction, kind.worst, plotted=False)) for key, kind in scored + counts]
        return found + [(f"{key}_step{i}", kind) for key, kind in every_step for i in range(self.steps)]

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        return "dice_auc" if self.interactive else "dice"


def autopet_preset(phase: Phase, preset: str) -> AutopetPreset:
    rules, aggregation, interactive = autopet.PRESETS[preset]
    numpy = phase.option("autopet_numpy")
    numpy = autopet.EDITION_NUMPY[rules.edition] if numpy == "edition" else int(numpy.removeprefix("numpy"))
    if phase.option("missing_cases") == "penalty":
        raise PhaseError(f"phase.yaml: missing_cases: penalty is BraTS_evaluation's; {preset} takes reject, skip or empty")
    return AutopetPreset(preset, rules, aggregation, interactive, numpy, int(phase.option("autopet_steps")))


@dataclass(frozen=True)
class TopcowPreset:
    """TopCoW 2024's task-1 evaluation (``topcow_results``): its metrics per CoW label and for
    the merged masks as metric-table keys; ``roi``: the phase's folder of ROI files
    (``topcow_roi``), ``betti1``: the 2023 release's Betti-1 error too (``topcow_betti1``)."""

    name: str
    roi: str | None = None
    betti1: bool = False
    kind: ClassVar[str] = "topcow"
    reference: ClassVar[str] = topcow.REFERENCE
    defaults: ClassVar[dict] = {}

    @property
    def classes(self) -> tuple[ClassDef, ...]:
        return tuple(ClassDef(name, labels) for name, labels in topcow.CLASSES)

    def kinds(self, options) -> list[tuple[str, Kind]]:
        rows = topcow.KEYS + ((("betti1_error", "betti1_error"),) if self.betti1 else ())
        return [(key, in_reference_table(metrics_table.BY_NAME[row].kind)) for key, row in rows]

    def default_ranking(self, kinds: list[tuple[str, Kind]]) -> str:
        return "dice"


def topcow_preset(phase: Phase, preset: str) -> TopcowPreset:
    if phase.option("missing_cases") == "penalty":
        raise PhaseError("phase.yaml: missing_cases: penalty is BraTS_evaluation's; TopCoW's evaluation needs every case")
    roi = phase.option("topcow_roi")
    return TopcowPreset(preset, None if roi is None else str(phase.path(roi)), bool(phase.option("topcow_betti1")))


# Options a whole evaluation defines itself: setting them beside it is refused, not ignored
OWN_OPTIONS = ("classes", "metrics", "instance_metrics", "definition", "definitions", "matching", "match_threshold")


def from_phase(phase: Phase):
    """The phase's evaluation: ``Listed``, ``PanopticaConfiguration``, ``BratsPreset``,
    ``Brats2023Preset``, ``AutopetPreset`` or ``TopcowPreset``."""
    preset, evaluator = phase.option("preset"), phase.option("panoptica")
    if preset and evaluator is not None:
        raise PhaseError("phase.yaml: set either preset or panoptica, not both")
    clashing = [name for name in OWN_OPTIONS if name in phase.options]
    if (preset or evaluator is not None) and clashing:
        raise PhaseError(
            f"phase.yaml: {preset or 'a panoptica configuration'} defines its own classes and metrics; "
            f"remove {', '.join(clashing)}"
        )
    volume, overlap = float(phase.option("brats_volume_threshold")), float(phase.option("brats_overlap_threshold"))
    if preset in autopet.PRESETS:
        return autopet_preset(phase, preset)
    if preset and preset.startswith("topcow"):
        return topcow_preset(phase, preset)
    if preset and preset.startswith("brats2023-"):
        return Brats2023Preset(preset, preset.removeprefix("brats2023-"))
    if preset:
        task = preset.removeprefix("brats-")
        return BratsPreset(brats_config(task), preset, "mets" if task == "mets" else "seg", volume, overlap)
    if evaluator is None:
        return Listed(parse_classes(phase.option("classes"), phase.option("input") == "instances"))
    if isinstance(evaluator, str):
        return PanopticaConfiguration(panoptica_config.parse(panoptica_config.read_file(phase.path(evaluator))))
    return PanopticaConfiguration(panoptica_config.parse(evaluator))
