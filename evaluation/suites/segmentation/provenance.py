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

The sets below restate, per library, what its functions return (the suite's page has the
function of each).
"""

import re

from evaluation.suites.segmentation.options import FAMILY, Options, instance_keys, metric_keys

_NUMBER = r"[0-9][0-9pem+]*"  # options.number_key
# class-level keys each library returns, per family (regular expressions over the keys)
LIBRARY_KEYS = {
    "overlap": {
        "panoptica": r"dice|iou|volume_difference|abs_volume_difference",  # DSC, IOU, RVD, RVAE
        "metricsreloaded": (  # BinaryPairwiseMeasures.measures_dict
            r"tp|fp|fn|n_ref|n_pred|dice|iou|precision|recall|specificity|npv|accuracy|balanced_accuracy|mcc"
            rf"|cohens_kappa|youden|lr_plus|abs_volume_difference|f{_NUMBER}"
        ),
        "monai": r"dice|iou",  # DiceMetric, MeanIoU
        "deepmind": r"dice",  # compute_dice_coefficient
    },
    "distance": {
        "panoptica": rf"hd|hd95|assd|masd|nsd_{_NUMBER}|nsd_min_spacing",  # HD, HD95, ASSD (mean of means), NSD(threshold)
        "metricsreloaded": rf"hd|hd{_NUMBER}|assd|masd|nsd_{_NUMBER}|nsd_min_spacing",  # hd, hd_perc, assd, masd, nsd
        "monai": rf"hd|hd{_NUMBER}|assd|asd_pred_to_ref|nsd_{_NUMBER}|nsd_min_spacing",  # symmetric=False: pred -> truth
        "deepmind": (
            rf"hd|hd{_NUMBER}|asd_ref_to_pred|asd_pred_to_ref|nsd_(ref_|pred_)?({_NUMBER}|min_spacing)"
            r"|surface_(area_)?(ref|pred)"  # compute_surface_distances: its surfels (their number) and their areas
        ),
    },
}
ALWAYS_NULL = {"distance": r"surface_area_ref|surface_area_pred"}  # DeepMind's surfels only
# instance summaries each library returns (keys of instance_keys, unprefixed)
INSTANCE_KEYS = {
    "panoptica": (  # PanopticaResult: counts, prec, rec, rq, sq, pq, sq_<m>, sq_<m>_std, pq_dsc, pq_cldsc
        r"n_ref|n_pred|tp|fp|fn|precision|recall|f1|rq|sq|pq"
        r"|(mean|std)_(dice|iou|hd|hd95|assd|masd|cldice|volume_difference|abs_volume_difference|centre_distance"
        r"|nsd_min_spacing)|pq_(dice|iou|cldice)|mean_ref_voxels|mean_ref_volume"
    ),
    "metricsreloaded": r"n_ref|n_pred|tp|fp|fn|precision|recall|f1|rq|sq|pq",  # detection rows, PQ, segmentation_quality
    "monai": r"tp|fp|fn|f1|rq|sq|pq|iou_sum",  # PanopticQualityMetric
}


def _matches(pattern: str | None, key: str) -> bool:
    return pattern is not None and re.fullmatch(pattern, key) is not None


def class_source(options: Options, metric: str, key: str) -> str:
    """The source of a class-level ``key`` of ``metric``."""
    if metric == "boundary_iou":  # BinaryPairwiseMeasures.boundary_iou: MetricsReloaded's alone
        return "metricsreloaded"
    if metric == "multiclass":  # MultiClassPairwiseMeasures
        return "metricsreloaded"
    family = FAMILY[metric]
    library = options.definition(family)
    if family == "topology":  # clDice: panoptica's and MetricsReloaded's (the same number); topology_*: MetricsReloaded's
        return "panoptica" if key == "cldice" and library == "panoptica" else "metricsreloaded"
    if family == "centre":  # CEDI (panoptica, nan when empty) unless MetricsReloaded's com_dist (-1 when empty)
        return "metricsreloaded" if library == "metricsreloaded" else "panoptica"
    if _matches(ALWAYS_NULL.get(family), key) and not _matches(LIBRARY_KEYS[family][library], key):
        return "none"
    if options.panoptica_global and library == "panoptica" and key in ("n_ref", "n_pred"):
        return "panoptica"  # its pipeline's global_bin_volume_ref / _pred
    return library if _matches(LIBRARY_KEYS[family][library], key) else "suite"


def instance_source(options: Options, key: str) -> str:
    """The source of an instance summary key (unprefixed). Under MetricsReloaded and MONAI the
    per-instance means and deviations are the suite's, over the library's per-instance values
    (instances.json); panoptica returns its own (``sq_<m>``, ``sq_<m>_std``)."""
    library = options.definition("instances")
    library = library if library in INSTANCE_KEYS else "monai"  # the summaries scoring uses
    return library if _matches(INSTANCE_KEYS[library], key) else "suite"


def sources(options: Options) -> dict[str, str]:
    """Key -> source, for every key the phase's metrics produce (instance keys prefixed
    ``instances_``, as in cases.csv and ``ranking``); ``multiclass`` for the multi-class set."""
    found = {key: class_source(options, metric, key) for metric in options.metrics for key in metric_keys(metric, options)}
    if "multiclass" in options.metrics:
        found["multiclass"] = "metricsreloaded"
    if options.instance_evaluation:
        found.update({f"instances_{key}": instance_source(options, key) for key in instance_keys(options)})
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
