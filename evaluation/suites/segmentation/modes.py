"""Whole evaluations a phase can name instead of listing metrics: panoptica's evaluator
configuration (``panoptica``), BraTS_evaluation 0.0.10's six bundled configurations
(``preset: brats-gli`` ... ``brats-goat``) and the BraTS 2023 lesion-wise metrics
(``preset: brats2023-gli`` ... ``brats2023-met``).

The bundled configurations are written here as data (the groups and settings of
``brats_evaluation/configs/config_<task>.yaml``): all six match greedily nothing but optimally,
``MaxBipartiteMatching`` on Dice above 1e-6, measure Dice, NSD and HD95 per lesion and
globally, and score a metric with no match 0 (HD95: infinite; NaN when there is no lesion at
all). They differ in their groups only.
"""

import math
from dataclasses import dataclass, field

from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.suites.segmentation import panoptica_config
from evaluation.suites.segmentation.panoptica_config import EvaluatorConfig, Group, Matcher, ZeroTP

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
BRATS2023_REGIONS = (("wt", (1, 2, 3)), ("tc", (1, 3)), ("et", (3,)))
BRATS2023_COLUMNS = (
    "Num_TP",
    "Num_FP",
    "Num_FN",
    "Sensitivity",
    "Specificity",
    "Legacy_Dice",
    "Legacy_HD95",
    "GT_Complete_Volume",
    "LesionWise_Score_Dice",
    "LesionWise_Score_HD95",
)
SEG_TABLE = (
    "all_instance_tp",
    "all_instance_fp",
    "all_instance_fn",
    "all_instance_prec",
    "all_instance_rec",
    "all_instance_f1",
    "global_dsc",
    "global_nsd",
    "global_hd95",
    "lesionwise_dsc_mean",
    "lesionwise_dsc_std",
    "lesionwise_nsd_mean",
    "lesionwise_nsd_std",
    "lesionwise_hd95_mean",
    "lesionwise_hd95_std",
)
METS_TABLE = (
    *SEG_TABLE[:6],
    *(f"large_instance_{k}" for k in ("tp", "fp", "fn", "prec", "rec", "f1")),
    "lesionwise_dsc_mean",
    "lesionwise_dsc_std",
    "lesionwise_hd95_mean",
    "lesionwise_hd95_std",
    "lesionwise_nsd_mean",
    "lesionwise_nsd_std",
    *(f"small_instance_{k}" for k in ("tp", "fn", "fp", "prec", "rec", "f1")),
    "global_dsc",
    "global_nsd",
    "global_hd95",
)
# What each evaluation reproduces (metrics.json: reference.evaluation)
REFERENCES = {
    "panoptica": "BrainLesion/panoptica 2.1.7, Panoptica_Evaluator",
    "brats": "BraTS_evaluation 0.0.10 (PyPI brats-evaluation) with panoptica 2.1.7, brats-evaluate and brats-parse-metrics",
    "brats2023": "rachitsaluja/BraTS-2023-Metrics@43c9052, metrics.py: get_LesionWiseResults",
}
# Options a preset sets when the phase does not: BraTS_evaluation gives a subject without a
# prediction its penalty row rather than refusing the submission.
PRESET_DEFAULTS = {"brats": {"missing_cases": "penalty"}}


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


@dataclass(frozen=True)
class Mode:
    """``kind``: ``panoptica`` (its result keys per group), ``brats`` (BraTS_evaluation's
    table fields per region) or ``brats2023`` (the lesion-wise table per region)."""

    kind: str
    preset: str | None = None
    config: EvaluatorConfig | None = None
    parser: str = "seg"  # brats: metrics_parser's seg or mets
    challenge: str = ""  # brats2023
    volume_threshold: float = 20.0
    overlap_threshold: float = 0.1
    defaults: dict = field(default_factory=dict)

    @property
    def classes(self) -> list[tuple[str, tuple[int, ...], bool, bool]]:
        """(name, labels, merged, single instance) of every class, in output order."""
        if self.kind == "brats2023":
            return [(name, labels, True, False) for name, labels in BRATS2023_REGIONS]
        return [(g.name, g.labels, g.merge, g.single_instance) for g in self.config.groups]

    @property
    def labels(self) -> tuple[int, ...]:
        return (1, 2, 3) if self.kind == "brats2023" else self.config.labels

    def keys(self) -> list[str]:
        if self.kind == "brats2023":
            return list(BRATS2023_COLUMNS)
        if self.kind == "brats":
            return list(METS_TABLE if self.parser == "mets" else SEG_TABLE)
        return panoptica_config.result_keys(self.config)

    @property
    def ranking(self) -> str:
        """The default ranking key: the lesion-wise Dice, or panoptica's PQ."""
        if self.kind == "brats2023":
            return "LesionWise_Score_Dice"
        if self.kind == "brats":
            return "lesionwise_dsc_mean"
        return next((k for k in ("pq_dsc", "pq", "rq") if k in self.keys()), "rq")


# Options a whole evaluation defines itself: setting them beside it is refused, not ignored
OWN_OPTIONS = ("classes", "metrics", "instance_metrics", "definition", "definitions", "matching", "match_threshold")


def from_phase(phase: Phase) -> Mode | None:
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
    if preset and preset.startswith("brats2023-"):
        return Mode("brats2023", preset=preset, challenge=preset.removeprefix("brats2023-"))
    if preset:
        task = preset.removeprefix("brats-")
        return Mode(
            "brats",
            preset=preset,
            config=brats_config(task),
            parser="mets" if task == "mets" else "seg",
            volume_threshold=volume,
            overlap_threshold=overlap,
            defaults=PRESET_DEFAULTS["brats"],
        )
    if evaluator is None:
        return None
    if isinstance(evaluator, str):
        return Mode("panoptica", config=panoptica_config.parse(panoptica_config.read_file(phase.path(evaluator))))
    return Mode("panoptica", config=panoptica_config.parse(evaluator))
