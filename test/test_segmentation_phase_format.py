"""The segmentation phase format: every value's source in ``reference.definitions`` (checked
against the keys the conformance kit recorded from each library), colliding keys refused,
MetricsReloaded's matching names, NSD tolerances where a library has no default, MONAI's
aggregate implied by its definition, and the units of instance distances."""

from pathlib import Path

import pytest
from helpers.grading import run_cli, validate_metrics
from test_segmentation_parity import GLOBAL, MONAI_PQ, MR_DETECTION, PANOPTICA, key, pairwise_maps
from test_segmentation_suite import case_folders  # noqa: F401 (a fixture)

from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.suites.segmentation import provenance
from evaluation.suites.segmentation.options import Options

EVERY_METRIC = [
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
    "hd",
    "hd_percentile",
    "assd",
    "masd",
    "asd",
    "nsd",
    "surface_overlap",
    "surface_size",
    "boundary_iou",
    "cldice",
    "topology",
    "centre_distance",
]


def options(**settings) -> Options:
    return Options.from_phase(Phase(Path("."), "segmentation", {"classes": [1], **settings}))


def every_key(definition: str, **extra) -> Options:
    return options(
        definition=definition,
        metrics=EVERY_METRIC,
        nsd_tolerances=[1.0, 2.0, "min_spacing"],
        fbeta=[1, 2],
        boundary_iou_distances=[1, 2],
        **extra,
    )


# --------------------------------------------------------------------------------------------
# Where every value comes from


@pytest.mark.parametrize("definition", ["panoptica", "metricsreloaded", "monai", "deepmind"])
def test_every_key_the_kit_recorded_from_a_library_is_attributed_to_it(definition):
    """The conformance kit recorded, per library, the values that library returns; every suite
    key compared with one of them must name that library as its source, and no key may be
    attributed to a library that does not compute under its family's definition."""
    found = provenance.sources(every_key(definition))
    recorded = set(pairwise_maps("bin2d_disks_iso")[definition].values()) | {f"nsd_{key(2)}"}
    assert {k: found[k] for k in recorded} == dict.fromkeys(recorded, definition)
    # keys no library of this family returns are the suite's (or, for boundary IoU and the
    # shape metrics, the one library that has them)
    assert found["boundary_iou_1"] == found["boundary_iou_2"] == "metricsreloaded"
    assert found["topology_precision"] == "metricsreloaded"
    assert set(found.values()) <= {definition, "suite", "none", "metricsreloaded", "panoptica"}


def test_values_filled_in_by_the_suite_say_so():
    monai = provenance.sources(every_key("monai"))
    assert (monai["precision"], monai["masd"], monai["asd_ref_to_pred"], monai["surface_area_ref"]) == (
        "suite",
        "suite",
        "suite",
        "none",
    )
    assert (monai["cldice"], monai["centre_distance"]) == ("metricsreloaded", "panoptica")
    panoptica = provenance.sources(every_key("panoptica", percentiles=[95, 99]))
    assert (panoptica["hd95"], panoptica["hd99"], panoptica["mcc"]) == ("panoptica", "suite", "suite")
    deepmind = provenance.sources(every_key("deepmind"))
    assert (deepmind["assd"], deepmind["masd"], deepmind["asd_ref_to_pred"]) == ("suite", "suite", "deepmind")


@pytest.mark.parametrize(
    "definition,recorded",
    [("panoptica", PANOPTICA), ("metricsreloaded", MR_DETECTION), ("monai", MONAI_PQ)],
)
def test_instance_keys_the_kit_recorded_are_attributed_to_their_library(definition, recorded):
    instance_metrics = ["detection", "panoptic"] + (
        ["dice", "iou", "hd", "hd_percentile", "assd", "nsd", "cldice", "volume_difference", "abs_volume_difference", "ref_size"]
        if definition == "panoptica"
        else []
    )
    found = provenance.sources(
        options(definition=definition, metrics=["dice"], instance_metrics=instance_metrics, nsd_tolerances=["min_spacing"])
    )
    assert {f"instances_{k}": found[f"instances_{k}"] for k in recorded.values()} == {
        f"instances_{k}": definition for k in recorded.values()
    }


def test_panoptica_global_counts_are_panopticas():
    found = provenance.sources(options(definition="panoptica", metrics=["counts", "dice", "hd"], panoptica_global=True))
    assert {k: found[k] for k in GLOBAL.values() if k in found} == {k: "panoptica" for k in GLOBAL.values() if k in found}


def test_the_command_line_writes_each_values_source(case_folders):  # noqa: F811
    """boundary_iou under ``definition: monai`` is MetricsReloaded's, and metrics.json says so."""
    phase, submission, output = case_folders(
        "classes: [1, 2, 3]\ndefinition: monai\nmetrics: [dice, precision, boundary_iou, nsd]\nnsd_tolerances: [1.0]\n"
        "instance_metrics: [detection]\ndefinitions: {instances: metricsreloaded}\n"
    )
    done = run_cli(submission, phase, output)
    assert done.code == 0, done.stderr[-2000:]
    validate_metrics(done.metrics)
    reference = done.metrics["reference"]
    assert reference["definitions"]["boundary_iou_1"] == "metricsreloaded"
    assert (reference["definitions"]["dice"], reference["definitions"]["precision"]) == ("monai", "suite")
    assert reference["definitions"]["instances_f1"] == "metricsreloaded"
    assert reference["families"]["boundary_iou"] == "monai"  # what the phase chose
    # MetricsReloaded's per-instance distances drop the spacing: instances_mean_nsd_1 is 1 voxel
    assert reference["units"] == {"distances": "header", "instance_distances": "voxel"}


# --------------------------------------------------------------------------------------------
# Refused or resolved phase options


@pytest.mark.parametrize(
    "settings",
    [
        {"metrics": ["nsd"], "nsd_tolerances": [0.7, 0.7000001]},
        {"metrics": ["hd_percentile"], "percentiles": [95, 95.0000001]},
        {"metrics": ["fbeta"], "fbeta": [1, 1.0000001]},
        {"metrics": ["boundary_iou"], "boundary_iou_distances": [2, 2.0000001]},
    ],
)
def test_values_that_write_one_key_are_refused(settings):
    with pytest.raises(PhaseError, match="both give the key"):
        options(**settings)


def test_a_colliding_key_is_a_phase_error_on_the_command_line(case_folders):  # noqa: F811
    phase, submission, output = case_folders("classes: [1]\nmetrics: [nsd]\nnsd_tolerances: [0.7, 0.7000001]\n")
    done = run_cli(submission, phase, output)
    assert done.code == 1 and "nsd_tolerances 0.7 and 0.7000001 both give the key 'nsd_0p7'" in done.stdout
    assert not (output / "metrics.json").exists()


def test_metricsreloaded_matching_names():
    assert options(definition="metricsreloaded", matching="hungarian").matching == "optimal_all_pairs"
    assert options(definition="metricsreloaded", matching="greedy_matching").matching == "greedy_lowest_first"
    with pytest.raises(PhaseError, match="metricsreloaded's name"):
        options(definition="panoptica", matching="hungarian")


def test_nsd_tolerance_is_the_librarys_default_or_required():
    assert options(definition="metricsreloaded", metrics=["nsd"]).keys() == ["nsd_1"]
    assert options(definition="panoptica", metrics=["nsd"]).keys() == ["nsd_min_spacing"]
    assert options(definition="panoptica", metrics=["dice"], instance_metrics=["nsd"]).nsd_tolerances == ("min_spacing",)
    for library in ("monai", "deepmind"):
        with pytest.raises(PhaseError, match="no default NSD tolerance"):
            options(definition=library, metrics=["dice", "nsd"])
        assert options(definition=library, metrics=["nsd"], nsd_tolerances=[2]).keys() == ["nsd_2"]
        assert options(definition=library, metrics=["dice", "hd"]).keys() == ["dice", "hd"]  # no NSD asked: nothing to give
    # a MONAI distance under a MetricsReloaded phase: MetricsReloaded's default
    assert options(definition="monai", definitions={"distance": "metricsreloaded"}, metrics=["nsd"]).keys() == ["nsd_1"]


def test_monais_aggregate_follows_its_definition():
    assert options(definition="monai", metrics=["dice"]).nan_policy == "monai"
    assert options(definition="panoptica", metrics=["dice"]).nan_policy == "ignore"
    assert options(definition="monai", metrics=["dice"], nan_policy="ignore").nan_policy == "ignore"
