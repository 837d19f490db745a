"""Where every value comes from: metrics.json ``reference.definitions``, one entry per key.

A phase chooses a definition per metric family, but a library does not define every metric of
its family: panoptica has no precision, MONAI no boundary IoU, only DeepMind gives surface
areas. The suite then fills the value in itself (a textbook formula, or a library's formula
carried to a parameter it does not offer, such as panoptica's pooled percentile at 99), or
takes it from the one library that has it (boundary IoU is MetricsReloaded's whatever the
definition). Each key is therefore attributed to:

* a library (``panoptica``, ``metricsreloaded``, ``monai``, ``deepmind``): that library
  returns this very value (its function named on the suite's page), which the parity tests
  compare where the conformance kit recorded it;
* ``suite``: no library returns it; the suite computes it (docs/suites/segmentation.md,
  "Where every value comes from");
* ``none``: the value is always null under this definition (surface areas exist in DeepMind's
  surfels only).

Which keys each library returns is the metric table's (``metrics_table.Metric.sources`` and
``instance_sources``); the suite's page names each library's function.
"""

from evaluation.suites.segmentation import metrics_table
from evaluation.suites.segmentation.metrics_table import BY_DEFINITION, Metric
from evaluation.suites.segmentation.options import Options


def class_source(options: Options, metric: Metric, key: str) -> str:
    """The source of a class-level ``key`` of ``metric``: the
    library the metric's family follows if it returns the key, else the metric's fallback
    (``suite``, or the one library that has it), or ``none`` for a key that is always null."""
    library = options.definitions.get(metric.family)
    if library is not None and metric.returns(metric.sources, library, key):
        return library
    if key in metric.null_elsewhere:
        return "none"
    if options.panoptica_global and library == "panoptica" and key in ("n_ref", "n_pred"):
        return "panoptica"  # its pipeline's global_bin_volume_ref / _pred
    return metric.fallback


def instance_source(options: Options, metric: Metric, key: str) -> str:
    """The source of an instance summary key (unprefixed). Under MetricsReloaded and MONAI the
    per-instance means and deviations are the suite's, over the library's per-instance values
    (instances.json); panoptica returns its own (``sq_<m>``, ``sq_<m>_std``). A definition
    without an instance evaluation is summarised as MONAI summarises."""
    library = options.definition("instances")
    library = library if library in BY_DEFINITION and BY_DEFINITION[library].instances else "monai"
    return library if metric.returns(metric.instance_sources, library, key) else "suite"


def sources(options: Options) -> dict[str, str]:
    """Key -> source, for every key the phase's metrics produce (instance keys prefixed
    ``instances_``, as in cases.csv and ``ranking``); a metric of one set per case
    (``multiclass``) under its own name."""
    listed = metrics_table.rows(options.metrics)
    found = {key: class_source(options, metric, key) for metric in listed for key in metric.keys(options)}
    found.update({metric.name: metric.fallback for metric in listed if metric.per_case})
    for metric in metrics_table.rows(options.instance_metrics):
        found.update(
            {
                f"instances_{key}": instance_source(options, metric, key)
                for key, _ in metrics_table.instance_kinds(metric, options)
            }
        )
    return found


def units(options: Options) -> dict[str, str]:
    """The units of the distances and tolerances, which differ between class-level and
    instance keys where the instances follow MetricsReloaded (``Options.instance_units``):
    ``instances_mean_nsd_1`` then has a tolerance of 1 voxel where ``nsd_1`` has 1 mm.
    Values: ``header`` (the truth header's spacing units, e.g. mm), ``voxel``, or the phase's
    explicit spacing."""
    spacing = options.spacing if isinstance(options.spacing, str) else "explicit"
    found = {"distances": spacing}
    if options.instance_evaluation:
        found["instance_distances"] = "voxel" if options.instance_units == "voxel" else spacing
    return found


def reference(options: Options) -> dict:
    """metrics.json ``reference``: the source of every key (``definitions``), the definition
    the phase chose per family (``families``) and the units of the distances."""
    return {"definitions": sources(options), "families": dict(options.definitions), "units": units(options)}
