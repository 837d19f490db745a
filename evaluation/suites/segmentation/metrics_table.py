"""The metric table: one row per metric a phase can name, and the definitions it can follow.

A row (``Metric``) says everything the suite knows about one metric: its name as the phase
spells it (``metrics``, ``instance_metrics`` in ``schemas/phase.schema.json``), its family
(whose definition it follows), the keys it writes and their kinds (``keys.Kind``: direction,
worst value, plotted), what empty masks do to it (``empties``), panoptica's zero-TP rule and
name for it, the function computing it under each definition, and which keys each library
itself returns (``provenance``). Every list the suite needs (the keys of a phase, which keys
rank and which way, which metrics read masks or surfaces, the zero-TP tables, the sources)
is read from the rows; docs/adding-a-metric.md shows how a row is added.

A definition (``Definition``) is a library at one version. A later version of a library names
the one it is ``based_on``: every row's function and source it does not give are those of
the earlier version (``resolve``), so a version that changes a few metrics adds only those.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from evaluation.suites.segmentation import autopet, betti_errors, distances, instance_detail, multiclass, overlap, shape
from evaluation.suites.segmentation import metricsreloaded_2bf9c91 as mr2bf9c91
from evaluation.suites.segmentation.keys import AVERAGE, CORRELATION, COUNT, DISTANCE, ERROR, SCORE, TALLY, Kind, number_key


@dataclass(frozen=True)
class Definition:
    """``name`` as a phase's ``definition`` spells it; ``reference``: what it reproduces;
    ``instances``: it has an instance evaluation; ``nsd_tolerance``: its NSD's default
    tolerance (None: the library requires one, ``nsd_function`` names where)."""

    name: str
    reference: str
    instances: bool = True
    nsd_tolerance: float | str | None = None
    nsd_function: str = ""
    based_on: str | None = None


DEFINITIONS = (
    # panoptica: min(voxelspacing) (metrics/normalized_surface_dice.py: _compute_normalized_surface_dice)
    Definition("panoptica", "BrainLesion/panoptica 2.1.7 (metric code as at b0ac3e4)", nsd_tolerance="min_spacing"),
    # MetricsReloaded: 1 (metrics/pairwise_measures.py: normalised_surface_distance, dict_args "nsd")
    Definition("metricsreloaded", "Project-MONAI/MetricsReloaded@cb38dfc0a5ed4fa3bdc559e4960b6e2b93c3b967", nsd_tolerance=1.0),
    Definition("monai", "Project-MONAI/MONAI 1.6.1 (monai.metrics)", nsd_function="MONAI's SurfaceDiceMetric"),
    Definition(
        "deepmind",
        "google-deepmind/surface-distance@1f805cea446805e559badc80dd27f34175e4173d",
        instances=False,
        nsd_function="DeepMind's compute_surface_dice_at_tolerance",
    ),
    # MetricsReloaded's branch of PR #57: NaN for empty masks where cb38dfc has fixed values
    # (metricsreloaded_2bf9c91.py); the rest, matching and units included, are cb38dfc's
    Definition(mr2bf9c91.NAME, mr2bf9c91.REFERENCE, based_on="metricsreloaded"),
)
BY_DEFINITION = {d.name: d for d in DEFINITIONS}
LIBRARIES = tuple(BY_DEFINITION)
# The families a phase chooses a definition for (``definition``, ``definitions.<family>``)
FAMILIES = ("overlap", "distance", "boundary_iou", "topology", "centre", "instances")


def resolve(mapping: Mapping, definition: str):
    """``mapping``'s entry for ``definition``, or for the version it is based on; None."""
    while definition is not None:
        if definition in mapping:
            return mapping[definition]
        definition = BY_DEFINITION[definition].based_on if definition in BY_DEFINITION else None
    return None


def library(definition: str) -> str:
    """The library a definition is a version of (the end of its ``based_on`` chain). Code that
    follows a library's rules beyond the table's functions (its instance matching and
    summaries, its units, its nan policy) asks this, so that a version behaves as its library
    there until it says otherwise."""
    while definition in BY_DEFINITION and BY_DEFINITION[definition].based_on:
        definition = BY_DEFINITION[definition].based_on
    return definition


@dataclass(frozen=True)
class Keys:
    """The keys a metric writes, each with its kind: ``names`` as they are, or, with
    ``parameter``, each name (a template with ``{}``) for every value of that option, numbers
    as ``number_key`` writes them (``bins``: for every bin the option's edges make)."""

    names: tuple[tuple[str, Kind], ...]
    parameter: str | None = None
    bins: bool = False

    def kinds(self, options) -> list[tuple[str, Kind]]:
        if self.parameter is None:
            return list(self.names)
        values = getattr(options, self.parameter)
        values = range(len(values) + 1) if self.bins else values
        return [(name.format(number_key(v)), kind) for v in values for name, kind in self.names]

    def __call__(self, options) -> list[str]:
        return [key for key, _ in self.kinds(options)]


def fixed(*names: str, kind: Kind) -> Keys:
    return Keys(tuple((name, kind) for name in names))


def each(parameter: str, *templates: str, kind: Kind) -> Keys:
    return Keys(tuple((t, kind) for t in templates), parameter)


@dataclass(frozen=True)
class _Replaced(Keys):
    """The ``nanrep`` metric's keys: ``worse_dist``, ``check_empty``, and ``<key>_nanrep`` (of
    the key's kind) for every key of the phase's metrics that MetricsReloaded 2bf9c91 replaces
    (``metricsreloaded_2bf9c91.NAN_LIST``)."""

    def kinds(self, options) -> list[tuple[str, Kind]]:
        found = [("worse_dist", COUNT), ("check_empty", COUNT)]
        for metric in rows(options.metrics):
            if metric.name in mr2bf9c91.NAN_LIST:
                found += [(f"{key}_nanrep", kind) for key, kind in metric.keys.kinds(options)]
        return found


def _nanrep(m) -> dict:
    """``metricsreloaded_2bf9c91.nanrep`` of the phase's replaced metrics."""
    listed = [(metric.name, metric.keys(m.options)) for metric in rows(m.options.metrics) if metric.name in mr2bf9c91.NAN_LIST]
    return mr2bf9c91.nanrep(m, listed)


ALL = "all"  # sources: every key of the row
RAISES = (None, None)  # a zero-TP rule: panoptica raises (NotImplementedError), the value is null


@dataclass(frozen=True)
class Metric:
    """One row. ``per_class``: a ``metrics`` entry, per (case, class) (``per_case``: one set
    per case instead); ``per_instance``: an ``instance_metrics`` entry, ``pairs`` (its keys per
    matched instance pair, summarised as ``mean_``, ``std_`` and, with ``pq``, ``pq_``) or
    ``summary`` (keys of the matching itself). ``reads``: what ``compute`` reads of a
    ``measured.Measured`` (``counts``, ``surfaces``, ``masks``; ``table``: the case's
    contingency table; ``instances``: the instance evaluation computes it; ``values``: the keys
    the rows before it computed, ``Measured.values``). ``empty``:
    ``replaced`` (``empty_masks``/``empty_values`` replace its compared values when a mask is
    empty), ``kept`` (it describes the masks) or None (no empty-mask rule). ``zero_tp``:
    panoptica's default zero-TP rule (no instance at all, otherwise), ``RAISES``, or None
    (panoptica has no such metric). ``sources``/``instance_sources``: per library, the keys it
    returns itself; any other key is ``fallback``'s (``suite``: the suite computes it), or
    always null (``none``) for ``null_elsewhere``."""

    name: str
    family: str
    keys: Keys
    reads: str
    compute: Mapping[str, Callable] = field(default_factory=dict)
    per_class: bool = True
    per_case: bool = False
    per_instance: str | None = None
    pq: bool = False
    empty: str | None = "replaced"
    zero_tp: tuple | None = None
    panoptica: str | None = None
    sources: Mapping[str, object] = field(default_factory=dict)
    fallback: str = "suite"
    null_elsewhere: tuple[str, ...] = ()
    instance_sources: Mapping[str, object] = field(default_factory=dict)

    @property
    def kind(self) -> Kind:
        """The kind of its (first) key."""
        return self.keys.names[0][1]

    def function(self, definition: str) -> Callable:
        return resolve(self.compute, definition)

    def returns(self, sources: Mapping, library: str, key: str) -> bool:
        """Whether ``library`` (or the version it is based on) returns ``key``, one of the
        row's keys, according to ``sources`` (``sources`` or ``instance_sources``)."""
        found = resolve(sources, library)
        return found == ALL or (found is not None and key in found)


# one function per definition, shared by every row of the family (a later version's own entry)
_OVERLAP = {**overlap.MEASURES, mr2bf9c91.NAME: mr2bf9c91.overlap_measure}
_DISTANCE = {**distances.MEASURES, mr2bf9c91.NAME: mr2bf9c91.distance_measure}


def _overlap(name, kind=SCORE, sources=None, **more) -> Metric:
    """An overlap metric: a function of the four confusion counts (MetricsReloaded's
    ``BinaryPairwiseMeasures`` returns most of them)."""
    keys = more.pop("keys", fixed(name, kind=kind))
    sources = {"metricsreloaded": ALL} if sources is None else sources
    return Metric(name, "overlap", keys, "counts", _OVERLAP, sources=sources, **more)


def _distance(name, keys, sources, **more) -> Metric:
    """A distance metric: a reduction of the two directed distance lists."""
    return Metric(name, "distance", keys, "surfaces", _DISTANCE, sources=sources, **more)


def _metricsreloaded_alone(name, family, keys, function, versions=None, **more) -> Metric:
    """A shape metric only MetricsReloaded has: its value whatever the family's definition (a
    later version's own function under that version, ``versions``)."""
    compute = {**dict.fromkeys(LIBRARIES, function), **(versions or {})}
    return Metric(name, family, keys, "masks", compute, sources={"metricsreloaded": ALL}, fallback="metricsreloaded", **more)


def _autopet_alone(name) -> Metric:
    """A lesion volume only autoPET defines (``autopet.lesion_volumes``): its value whatever the
    overlap definition, its source autoPET's evaluation (``SOURCES``)."""
    compute = dict.fromkeys(LIBRARIES, autopet.lesion_volumes)
    return Metric(name, "overlap", fixed(name, kind=ERROR), "masks", compute, fallback="autopet")


# Sources that are no definition a phase chooses: one challenge's evaluation
SOURCES = {"autopet": autopet.LISTED_REFERENCE}
_EVERY = dict.fromkeys(LIBRARIES, ALL)
_PAIRS = {"per_instance": "pairs", "instance_sources": {"panoptica": ALL}}  # panoptica's sq_<m>, sq_<m>_std
_NAN = float("nan")

METRICS = (
    _overlap(
        "counts",
        keys=fixed("tp", "fp", "fn", "tn", "n_ref", "n_pred", kind=COUNT),
        empty="kept",
        sources={"metricsreloaded": ("tp", "fp", "fn", "n_ref", "n_pred")},
    ),
    _overlap("dice", zero_tp=(_NAN, 0.0), panoptica="DSC", sources=_EVERY, pq=True, **_PAIRS),
    _overlap(
        "iou",
        zero_tp=(_NAN, 0.0),
        panoptica="IOU",
        sources={"panoptica": ALL, "metricsreloaded": ALL, "monai": ALL},
        pq=True,
        **_PAIRS,
    ),
    _overlap("precision"),
    _overlap("recall"),
    _overlap("fbeta", keys=each("fbeta", "f{}", kind=SCORE)),
    _overlap("specificity"),
    _overlap("npv"),
    _overlap("accuracy"),
    _overlap("balanced_accuracy"),
    _overlap("mcc", CORRELATION),
    _overlap("cohens_kappa", CORRELATION),
    _overlap("youden", CORRELATION),
    _overlap("lr_plus"),
    _overlap(
        "volume_difference", COUNT, {"panoptica": ALL}, zero_tp=(_NAN, _NAN), panoptica="RVD", **_PAIRS
    ),  # a signed difference: no direction
    _overlap(
        "abs_volume_difference",
        ERROR,
        {"panoptica": ALL, "metricsreloaded": ALL},
        zero_tp=(_NAN, _NAN),
        panoptica="RVAE",
        **_PAIRS,
    ),
    _autopet_alone("fpv_ml"),  # autoPET's false-positive and false-negative lesion volumes
    _autopet_alone("fnv_ml"),
    _distance("hd", fixed("hd", kind=DISTANCE), _EVERY, zero_tp=RAISES, panoptica="HD", **_PAIRS),
    _distance(
        "hd_percentile",
        each("percentiles", "hd{}", kind=DISTANCE),
        {**_EVERY, "panoptica": ("hd95",)},  # panoptica's HD95 only; other percentiles are its pooled rule carried on
        zero_tp=RAISES,
        panoptica="HD95",
        per_instance="pairs",
        instance_sources={"panoptica": ("mean_hd95", "std_hd95")},
    ),
    _distance(
        "assd",
        fixed("assd", kind=DISTANCE),
        {"panoptica": ALL, "metricsreloaded": ALL, "monai": ALL},
        zero_tp=(_NAN, float("inf")),
        panoptica="ASSD",
        **_PAIRS,
    ),
    _distance("masd", fixed("masd", kind=DISTANCE), {"panoptica": ALL, "metricsreloaded": ALL}, **_PAIRS),
    _distance(
        "asd",
        fixed("asd_ref_to_pred", "asd_pred_to_ref", kind=DISTANCE),
        {"monai": ("asd_pred_to_ref",), "deepmind": ALL},  # MONAI: symmetric=False, prediction to truth
    ),
    _distance(
        "nsd",
        each("nsd_tolerances", "nsd_{}", kind=SCORE),
        _EVERY,
        zero_tp=RAISES,
        panoptica="NSD",
        per_instance="pairs",
        instance_sources={"panoptica": ("mean_nsd_min_spacing", "std_nsd_min_spacing")},
    ),
    _distance("surface_overlap", each("nsd_tolerances", "nsd_ref_{}", "nsd_pred_{}", kind=SCORE), {"deepmind": ALL}),
    _distance(
        "surface_size",
        fixed("surface_ref", "surface_pred", "surface_area_ref", "surface_area_pred", kind=COUNT),
        {"deepmind": ALL},  # compute_surface_distances: its surfels (their number) and their areas
        empty="kept",
        null_elsewhere=("surface_area_ref", "surface_area_pred"),  # areas exist in DeepMind's surfels only
    ),
    # the shape of the masks: skeletons, boundary bands, centres (shape.py). clDice is
    # panoptica's and MetricsReloaded's (the same number), its two fractions MetricsReloaded's.
    Metric(
        "cldice",
        "topology",
        fixed("cldice", kind=SCORE),
        "masks",
        dict.fromkeys(LIBRARIES, shape.cldice_measure),
        zero_tp=(_NAN, 0.0),
        panoptica="clDSC",
        sources={"panoptica": ALL, "metricsreloaded": ALL},
        fallback="metricsreloaded",
        pq=True,
        **_PAIRS,
    ),
    _metricsreloaded_alone(
        "topology", "topology", fixed("topology_precision", "topology_sensitivity", kind=SCORE), shape.cldice_measure
    ),
    _metricsreloaded_alone(  # BinaryPairwiseMeasures.boundary_iou
        "boundary_iou",
        "boundary_iou",
        each("boundary_iou_distances", "boundary_iou_{}", kind=SCORE),
        shape.boundary_iou_measure,
        versions={mr2bf9c91.NAME: mr2bf9c91.boundary_iou_measure},
        per_instance="pairs",
    ),
    # Betti-number errors (TopCoW's: components and tunnels), the same under every definition
    Metric(
        "betti0_error",
        "topology",
        fixed("betti0_error", kind=ERROR),
        "masks",
        dict.fromkeys(LIBRARIES, betti_errors.betti_errors),
    ),
    Metric(
        "betti1_error",
        "topology",
        fixed("betti1_error", kind=ERROR),
        "masks",
        dict.fromkeys(LIBRARIES, betti_errors.betti_errors),
    ),
    Metric(  # CEDI (nan when a mask is empty) unless MetricsReloaded's com_dist (-1)
        "centre_distance",
        "centre",
        fixed("centre_distance", kind=DISTANCE),
        "masks",
        {"panoptica": shape.cedi, "metricsreloaded": shape.com_dist, "monai": shape.cedi, "deepmind": shape.cedi},
        zero_tp=RAISES,
        panoptica="CEDI",
        sources={"panoptica": ALL, "metricsreloaded": ALL},
        fallback="panoptica",
        **_PAIRS,
    ),
    Metric(  # MetricsReloaded 2bf9c91's worse_dist, check_empty and <key>_nanrep (after the values they replace)
        "nanrep",
        "overlap",
        _Replaced(()),
        "values",
        dict.fromkeys(LIBRARIES, _nanrep),
        empty=None,
        sources={mr2bf9c91.NAME: ALL},
        fallback=mr2bf9c91.NAME,
    ),
    Metric(  # MultiClassPairwiseMeasures: one set per case over every label, not per class
        "multiclass",
        "multiclass",
        fixed(kind=SCORE),
        "table",
        dict.fromkeys(LIBRARIES, multiclass.measures),
        per_case=True,
        empty=None,
        fallback="metricsreloaded",
    ),
    # the instance evaluation's own keys (instance_scores.py, instance_detail.py)
    Metric(
        "detection",
        "instances",
        Keys(
            tuple((k, COUNT) for k in ("n_ref", "n_pred", "tp", "fp", "fn"))
            + tuple((k, SCORE) for k in ("precision", "recall", "f1"))
        ),
        "instances",
        per_class=False,
        per_instance="summary",
        instance_sources={"panoptica": ALL, "metricsreloaded": ALL, "monai": ("tp", "fp", "fn", "f1")},
    ),
    Metric(
        "panoptic",
        "instances",
        Keys((("sq", SCORE), ("pq", SCORE), ("rq", SCORE), ("iou_sum", COUNT))),
        "instances",
        per_class=False,
        per_instance="summary",
        instance_sources={"panoptica": ("sq", "pq", "rq"), "metricsreloaded": ("sq", "pq", "rq"), "monai": ALL},
    ),
    Metric(
        "ref_size",
        "instances",
        fixed("ref_voxels", "ref_volume", kind=COUNT),
        "instances",
        per_class=False,
        per_instance="pairs",
        empty=None,
        zero_tp=(_NAN, _NAN),
        instance_sources={"panoptica": ("mean_ref_voxels", "mean_ref_volume")},
    ),
    Metric(
        "size_bins",
        "instances",
        Keys(
            tuple((f"{name}_bin{{}}", SCORE) for name in ("recall", "precision"))
            + tuple((f"{name}_bin{{}}", TALLY) for name in ("n_ref", "n_pred", "tp_ref", "tp_pred")),
            "size_bins",
            bins=True,
        ),
        "instances",
        per_class=False,
        per_instance="summary",
        empty=None,
    ),
    Metric(
        "ap",
        "instances",
        fixed(*instance_detail.AP_KEYS, kind=SCORE),
        "instances",
        per_class=False,
        per_instance="summary",
        empty=None,
    ),
)
BY_NAME = {m.name: m for m in METRICS}
CLASS_METRICS = tuple(m.name for m in METRICS if m.per_class)  # the schema's metrics enum
INSTANCE_METRICS = tuple(m.name for m in METRICS if m.per_instance)  # its instance_metrics enum
BY_PANOPTICA = {m.panoptica: m for m in METRICS if m.panoptica}
# empty_values may name these (the metrics with an empty-mask rule)
EMPTY_RULES = frozenset(m.name for m in METRICS if m.empty is not None)
# The spreads (std_) of the per-instance HD, HD95 and ASSD rank lower-is-better, every other
# spread higher-is-better: the directions the suite has always given them. A spread is seldom
# a ranking key; they stay rankable so that no phase that ranks by one is refused.
LOWER_SPREADS = ("hd", "hd95", "assd")


def rows(names) -> list[Metric]:
    return [BY_NAME[name] for name in names]


def zero_tp_values(metric: Metric) -> dict[str, tuple]:
    """The zero-TP rule of each of a per-instance metric's keys, where panoptica has one."""
    if metric.zero_tp in (None, RAISES):
        return {}
    return {key: metric.zero_tp for key, _ in metric.keys.names}


def pair_kinds(metric: Metric, options) -> list[tuple[str, Kind]]:
    """The summary keys of a per-pair metric: the mean over the matched pairs (ranked as the
    key is, or as an ``AVERAGE`` where the key has no direction), its spread, and the mean
    times the recognition quality (``pq_``)."""
    found = []
    for key, kind in metric.keys.kinds(options):
        spread = Kind("lower" if key in LOWER_SPREADS else "higher", None)
        found += [(f"mean_{key}", kind if kind.rankable else AVERAGE), (f"std_{key}", spread)]
        found += [(f"pq_{key}", SCORE)] if metric.pq else []
    return found


def instance_kinds(metric: Metric, options) -> list[tuple[str, Kind]]:
    """An instance metric's keys (unprefixed) with their kinds."""
    return pair_kinds(metric, options) if metric.per_instance == "pairs" else metric.keys.kinds(options)


def listed_kinds(options) -> list[tuple[str, Kind]]:
    """Every per-class key the phase's listed metrics write, in output order: the class keys
    of ``metrics``, then ``instances_`` and the instance keys of ``instance_metrics``."""
    found = [pair for metric in rows(options.metrics) for pair in metric.keys.kinds(options)]
    found += [
        (f"instances_{key}", kind) for metric in rows(options.instance_metrics) for key, kind in instance_kinds(metric, options)
    ]
    return found


def class_functions(options) -> list[Callable]:
    """The functions a (case, class) of this phase runs, each once (the rows of a family share
    their definition's function), in the table's order."""
    found = []
    wanted = set(options.metrics)
    for metric in METRICS:
        if metric.name in wanted and metric.per_class and not metric.per_case:
            function = metric.function(options.definition(metric.family))
            if function not in found:
                found.append(function)
    return found


def parameters() -> dict[str, str]:
    """Option -> the first metric whose keys it numbers (percentiles: hd_percentile, ...)."""
    found = {}
    for metric in METRICS:
        if metric.keys.parameter and not metric.keys.bins:
            found.setdefault(metric.keys.parameter, metric.name)
    return found
