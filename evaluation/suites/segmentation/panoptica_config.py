"""panoptica's evaluator configuration (``Panoptica_Evaluator``) as a phase: read from its YAML
file or from the same fields in phase.yaml, checked, and held as plain data.

panoptica saves an evaluator as YAML with one tag per class (``!Panoptica_Evaluator``,
``!MaxBipartiteMatching {...}``, ``!Metric DSC``: ``panoptica/utils/config.py``). Here the
tags are read by a safe loader that builds data only (no object is ever constructed from the
file): a tagged mapping becomes the mapping with its tag under ``type``, a tagged scalar its
value. phase.yaml may spell the same fields without tags, in that form. The defaults are
panoptica's own (``panoptica_evaluator.py: Panoptica_Evaluator.__init__``,
``utils/edge_case_handling.py: EdgeCaseHandler.__init__``).
"""

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from evaluation.errors import PhaseError
from evaluation.suites.segmentation import metrics_table
from evaluation.suites.segmentation.keys import COUNT, FIELD, SCORE, TALLY, Kind, in_reference_table

# panoptica's Metric enum, in its order (metrics/metrics.py: Metric); the metric table's row of
# the same quantity is metrics_table.BY_PANOPTICA[name].
METRICS = ("DSC", "IOU", "ASSD", "clDSC", "RVD", "RVAE", "CEDI", "HD", "HD95", "NSD")
# panoptica's own decreasing flag (its decision metric's test), NSD included: not the ranking
# direction, which is the metric table's
DECREASING = {"ASSD", "RVD", "RVAE", "CEDI", "HD", "HD95", "NSD"}
# panoptica_result.py: _INSTANCE_METRIC_SPECS, the order of the sq_/pq_ keys in its result
SPEC_ORDER = ("IOU", "DSC", "clDSC", "ASSD", "RVD", "RVAE", "CEDI", "HD", "HD95", "NSD")
WITH_PQ = ("IOU", "DSC", "clDSC")
EDGE_VALUES = {"INF": math.inf, "NAN": math.nan, "ZERO": 0.0, "ONE": 1.0, "NONE": None}
INPUTS = {"SEMANTIC": "semantic", "UNMATCHED_INSTANCE": "unmatched_instance", "MATCHED_INSTANCE": "matched_instance"}
MATCHERS = {
    "NaiveThresholdMatching": "naive",
    "MaxBipartiteMatching": "max_bipartite",
    "MaximizeMergeMatching": "maximize_merge",
}


def suffix(metric: str) -> str:
    """``Metric.get_result_key``: IoU has no suffix (``sq``, ``pq``), the others their name."""
    return "" if metric == "IOU" else f"_{metric.lower()}"


@dataclass(frozen=True)
class Group:
    """A named class of labels (``LabelGroup``); ``merge``: its labels are one region, as
    ``LabelMergeGroup`` binarises them, rather than each label its own instances;
    ``single_instance``: the whole group is one instance."""

    name: str
    labels: tuple[int, ...]
    merge: bool = False
    single_instance: bool = False


@dataclass(frozen=True)
class ZeroTP:
    """``MetricZeroTPEdgeCaseHandling``: a list metric's value when nothing matched."""

    no_instances: float | None
    empty_prediction: float | None
    empty_reference: float | None
    normal: float | None

    def value(self, n_pred: int, n_ref: int) -> float | None:
        if n_pred + n_ref == 0:
            return self.no_instances
        if n_ref == 0:
            return self.empty_reference
        if n_pred == 0:
            return self.empty_prediction
        return self.normal


@dataclass(frozen=True)
class Matcher:
    kind: str  # naive, max_bipartite, maximize_merge
    metric: str  # IOU or DSC
    threshold: float
    many_to_one: bool = False
    strict: bool = False


def _zero_tp(no_instances=None, default=None, **specific) -> ZeroTP:
    pick = {k: specific.get(k, default) for k in ("empty_prediction", "empty_reference", "normal")}
    return ZeroTP(no_instances if no_instances is not None else default, **pick)


# EdgeCaseHandler's default table: the rows' zero-TP rules where panoptica has one
DEFAULT_ZERO_TP = {
    name: _zero_tp(*row.zero_tp)
    for name, row in metrics_table.BY_PANOPTICA.items()
    if row.zero_tp not in (None, metrics_table.RAISES)
}


@dataclass(frozen=True)
class EvaluatorConfig:
    expected_input: str
    backend: str | None  # connected components: cc3d, scipy, or None (cc3d in 3-D, scipy in 2-D)
    matcher: Matcher | None
    instance_metrics: tuple[str, ...]
    global_metrics: tuple[str, ...]
    zero_tp: dict
    empty_list_std: float | None
    groups: tuple[Group, ...]
    decision_metric: str | None = None
    decision_threshold: float | None = None

    @property
    def labels(self) -> tuple[int, ...]:
        return tuple(sorted({label for g in self.groups for label in g.labels}))


# --------------------------------------------------------------------------------------------
# Reading


class _TagLoader(yaml.SafeLoader):
    """A safe loader that reads panoptica's tags as data."""


def _tagged(loader: yaml.SafeLoader, tag: str, node: yaml.Node):
    name = tag.lstrip("!")
    if isinstance(node, yaml.MappingNode):
        return {"type": name, **loader.construct_mapping(node, deep=True)}
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node) or name


_TagLoader.add_multi_constructor("!", _tagged)


def read_file(path: Path) -> dict:
    """A panoptica YAML file as plain data."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_TagLoader)  # noqa: S506 - a SafeLoader subclass
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PhaseError(f"panoptica configuration {path.name}: cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise PhaseError(f"panoptica configuration {path.name}: expected a Panoptica_Evaluator mapping")
    return data


def parse(data: dict) -> EvaluatorConfig:
    """The evaluator's settings from its fields (tagged YAML read as data, or phase.yaml)."""
    data = {k: v for k, v in data.items() if k != "type"}
    known = {
        "expected_input",
        "instance_approximator",
        "instance_matcher",
        "edge_case_handler",
        "segmentation_class_groups",
        "instance_metrics",
        "global_metrics",
        "decision_metric",
        "decision_threshold",
        "per_region_evaluation",
        "save_group_times",
        "log_intermediate_steps",
        "log_times",
        "verbose",
        "speed_toggles",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise PhaseError(f"panoptica configuration: unknown fields {unknown}")
    if data.get("per_region_evaluation"):
        raise PhaseError("panoptica configuration: per_region_evaluation (Voronoi regions) is not supported")
    expected = _name(data.get("expected_input", "MATCHED_INSTANCE"), INPUTS, "expected_input")
    if expected == "matched_instance":
        raise PhaseError("panoptica configuration: expected_input MATCHED_INSTANCE is not supported; use UNMATCHED_INSTANCE")
    decision = data.get("decision_metric")
    config = EvaluatorConfig(
        expected_input=expected,
        backend=_backend(data.get("instance_approximator")),
        matcher=_matcher(data.get("instance_matcher")),
        instance_metrics=_metrics(data.get("instance_metrics", ["DSC", "IOU", "ASSD", "RVD"]), "instance_metrics"),
        global_metrics=_metrics(data.get("global_metrics", ["DSC"]), "global_metrics"),
        zero_tp=_zero_tp_table(data.get("edge_case_handler")),
        empty_list_std=_edge_value((data.get("edge_case_handler") or {}).get("empty_list_std", "NAN")),
        groups=_groups(data.get("segmentation_class_groups")),
        decision_metric=_metric(decision) if decision is not None else None,
        decision_threshold=None if data.get("decision_threshold") is None else float(data["decision_threshold"]),
    )
    if config.decision_metric is not None and config.decision_threshold is None:
        raise PhaseError("panoptica configuration: decision_metric set but no decision_threshold")
    if config.decision_metric is not None and config.decision_metric not in config.instance_metrics:
        raise PhaseError("panoptica configuration: the decision_metric must be one of the instance_metrics")
    if config.matcher is None and expected != "matched_instance":
        raise PhaseError("panoptica configuration: instance_matcher is required")
    return config


def _name(value, table: dict, field: str) -> str:
    if value not in table:
        raise PhaseError(f"panoptica configuration: {field} {value!r} is not one of {sorted(table)}")
    return table[value]


def _metric(value) -> str:
    if value not in METRICS:
        raise PhaseError(f"panoptica configuration: unknown metric {value!r} (known: {', '.join(METRICS)})")
    return str(value)


def _metrics(values, field: str) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise PhaseError(f"panoptica configuration: {field} must be a list of metrics")
    return tuple(_metric(v) for v in values)


def _edge_value(value) -> float | None:
    if value not in EDGE_VALUES:
        raise PhaseError(f"panoptica configuration: edge case result {value!r} is not one of {sorted(EDGE_VALUES)}")
    return EDGE_VALUES[value]


def _backend(approximator) -> str | None:
    if approximator is None:
        return None
    if not isinstance(approximator, dict) or approximator.get("type") not in (None, "ConnectedComponentsInstanceApproximator"):
        raise PhaseError("panoptica configuration: only the ConnectedComponentsInstanceApproximator is supported")
    backend = approximator.get("cca_backend")
    if backend not in (None, "cc3d", "scipy"):
        raise PhaseError(f"panoptica configuration: cca_backend {backend!r} is not cc3d, scipy or null")
    return backend


def _matcher(matcher) -> Matcher | None:
    if matcher is None:
        return None
    if not isinstance(matcher, dict):
        raise PhaseError("panoptica configuration: instance_matcher must be a mapping")
    kind = _name(matcher.get("type", "NaiveThresholdMatching"), MATCHERS, "instance_matcher")
    metric = _metric(matcher.get("matching_metric", "IOU"))
    if metric not in ("IOU", "DSC"):
        raise PhaseError(f"panoptica configuration: matching_metric {metric} is not supported (IOU or DSC)")
    return Matcher(
        kind=kind,
        metric=metric,
        threshold=float(matcher.get("matching_threshold", 0.5)),
        many_to_one=bool(matcher.get("allow_many_to_one", False)),
        strict=bool(matcher.get("strict_threshold", False)),
    )


def _zero_tp_table(handler) -> dict:
    if handler is None or "listmetric_zeroTP_handling" not in handler:
        return dict(DEFAULT_ZERO_TP)
    table = {}
    for metric, rule in (handler["listmetric_zeroTP_handling"] or {}).items():
        rule = {k: _edge_value(v) for k, v in rule.items() if k != "type"}
        fields = {
            "no_instances": "no_instances_result",
            "empty_prediction": "empty_prediction_result",
            "empty_reference": "empty_reference_result",
            "normal": "normal",
        }
        if "default_result" not in rule and not all(key in rule for key in fields.values()):
            raise PhaseError(f"panoptica configuration: the zero-TP rule of {metric} needs default_result or all four results")
        table[_metric(metric)] = ZeroTP(**{name: rule.get(key, rule.get("default_result")) for name, key in fields.items()})
    return table


def _groups(groups) -> tuple[Group, ...]:
    if groups is None:
        raise PhaseError("panoptica configuration: segmentation_class_groups is required (the classes to evaluate)")
    entries = groups.get("groups", groups) if isinstance(groups, dict) else groups
    if isinstance(entries, list):
        entries = {f"group_{i}": g for i, g in enumerate(entries)}
    found = []
    for name, group in entries.items():
        if not isinstance(group, dict):
            raise PhaseError(f"panoptica configuration: group {name!r} must be a LabelGroup mapping")
        kind = group.get("type", "LabelGroup")
        if kind not in ("LabelGroup", "LabelMergeGroup"):
            raise PhaseError(f"panoptica configuration: group {name!r}: {kind} is not supported (LabelGroup, LabelMergeGroup)")
        labels = group.get("value_labels")
        labels = [labels] if isinstance(labels, int) else labels
        if not labels or not all(isinstance(v, int) and v > 0 for v in labels):
            raise PhaseError(f"panoptica configuration: group {name!r} needs value_labels, positive integers")
        single = bool(group.get("single_instance", False))
        if single and len(labels) != 1:
            raise PhaseError(f"panoptica configuration: group {name!r} is single_instance with more than one label")
        found.append(Group(str(name).lower(), tuple(labels), kind == "LabelMergeGroup", single))
    if len({g.name for g in found}) != len(found):
        raise PhaseError("panoptica configuration: two groups have the same name")
    return tuple(found)


def _metric_kind(metric: str) -> Kind:
    return in_reference_table(metrics_table.BY_PANOPTICA[metric].kind)


def result_kinds(config: EvaluatorConfig) -> list[tuple[str, Kind]]:
    """Every key ``evaluate_case`` can give a group, in panoptica's order, with its kind."""
    found = [("n_ref_instances", TALLY), ("n_pred_instances", TALLY)]
    found += [("tp", COUNT), ("fp", COUNT), ("fn", COUNT), ("prec", SCORE), ("rec", SCORE), ("rq", SCORE)]
    for metric in (m for m in SPEC_ORDER if m in config.instance_metrics):
        key = f"sq{suffix(metric)}"
        found += [(key, _metric_kind(metric)), (f"{key}_std", FIELD)]
        found += [(f"pq{suffix(metric)}", SCORE)] if metric in WITH_PQ else []
    found += [(key, FIELD) for key in ("instance_voxel_count_ref", "instance_volume_ref")]
    found += [(key, FIELD) for key in ("global_bin_volume_pred", "global_bin_volume_ref")]
    return found + [(f"global_bin_{m.lower()}", _metric_kind(m)) for m in METRICS if m in config.global_metrics]
