"""The metric table (evaluation/suites/segmentation/metrics_table.py) against the phase schema,
and what the suite reads from it: every metric a phase can name has one row and every row can
be named; the keys' kinds decide ranking and the nan policy; a row's function is what scoring
runs (docs/adding-a-metric.md)."""

import math
from pathlib import Path

import numpy as np
import pytest

from evaluation.errors import PhaseError
from evaluation.phase import Phase, option_schemas
from evaluation.suites.segmentation import metrics_table
from evaluation.suites.segmentation.keys import DISTANCE, SCORE
from evaluation.suites.segmentation.options import Options

SCHEMA = option_schemas("segmentation")


def options(**settings) -> Options:
    return Options.from_phase(Phase(Path("."), "segmentation", {"classes": [1], **settings}))


def test_every_metric_of_the_schema_has_a_row_and_every_row_is_in_the_schema():
    assert set(metrics_table.CLASS_METRICS) == set(SCHEMA["metrics"]["items"]["enum"])
    assert set(metrics_table.INSTANCE_METRICS) == set(SCHEMA["instance_metrics"]["items"]["enum"])
    assert len(metrics_table.BY_NAME) == len(metrics_table.METRICS)  # one row per name


def test_definitions_families_and_empty_values_are_the_schemas():
    assert list(metrics_table.LIBRARIES) == SCHEMA["definition"]["enum"]
    families = SCHEMA["definitions"]["properties"]
    assert list(metrics_table.FAMILIES) == list(families)
    assert all(spec["enum"] == list(metrics_table.LIBRARIES) for spec in families.values())
    assert set(SCHEMA["empty_values"]["propertyNames"]["enum"]) == metrics_table.EMPTY_RULES


def test_every_row_computes_under_every_definition_it_can_follow():
    for metric in metrics_table.METRICS:
        if metric.per_class:
            assert metric.family in (*metrics_table.FAMILIES, "multiclass"), metric.name
            assert all(metric.function(library) is not None for library in metrics_table.LIBRARIES), metric.name
        assert metric.reads in ("counts", "surfaces", "masks", "table", "instances", "values"), metric.name
        assert metric.empty in ("replaced", "kept", None), metric.name
        for sources in (metric.sources, metric.instance_sources):
            assert set(sources) <= set(metrics_table.LIBRARIES), metric.name


def test_kinds_decide_direction_ranking_and_the_worst_value():
    found = options(
        metrics=["dice", "hd_percentile", "counts", "mcc", "volume_difference"],
        instance_metrics=["detection", "dice", "volume_difference", "size_bins"],
        percentiles=[95, 99],
        size_bins=[10],
    )
    assert found.ranking == "dice"  # the first key with a direction
    assert found.kind("hd99").direction == "lower" and found.kind("hd99").worst_value(7.0) == 7.0
    assert found.kind("mcc").worst_value(7.0) == -1.0 and found.kind("dice").worst_value(7.0) == 0.0
    assert not found.kind("tp").rankable and not found.kind("tp").plotted
    assert not found.kind("volume_difference").rankable
    assert found.kind("instances_mean_volume_difference").rankable  # a mean over instances ranks
    assert not found.kind("instances_n_ref_bin1").rankable and found.kind("instances_n_ref_bin1").plotted
    assert found.kind("instances_recall_bin0") == SCORE and found.kind("instances_mean_dice") == SCORE
    with pytest.raises(PhaseError, match="has no better direction"):
        options(metrics=["dice", "counts"], ranking="fp")


def test_a_whole_evaluation_ranks_its_references_fields():
    brats = Options.from_phase(Phase(Path("."), "segmentation", {"preset": "brats-gli"}))
    assert brats.ranking == "lesionwise_dsc_mean"
    assert brats.kind("global_hd95").direction == "lower" and brats.kind("global_hd95").worst is None
    assert not brats.kind("all_instance_tp").rankable and brats.kind("all_instance_tp").worst == 0.0


def test_nsd_default_tolerance_is_the_definitions():
    assert options(metrics=["nsd"], definition="panoptica").nsd_tolerances == ("min_spacing",)
    assert options(metrics=["nsd"], definition="metricsreloaded").nsd_tolerances == (1.0,)
    with pytest.raises(PhaseError, match="MONAI's SurfaceDiceMetric has no default NSD tolerance"):
        options(metrics=["nsd"], definition="monai")


@pytest.mark.parametrize(("definition", "empty"), [("panoptica", None), ("metricsreloaded", -1.0)])
def test_centre_distance_by_hand(definition, empty):
    """The row of docs/adding-a-metric.md: two boxes whose centres of mass are (1, 2, 3) voxels
    apart on a (2, 1, 0.5) spacing; an empty prediction scores nan (panoptica's CEDI: null)
    or -1 (MetricsReloaded's com_dist)."""
    from evaluation.suites.segmentation.scoring import score_arrays

    truth = np.zeros((8, 9, 10), np.uint8)
    truth[1:3, 1:4, 1:5] = 1
    pred = np.roll(truth, (1, 2, 3), axis=(0, 1, 2))
    chosen = options(metrics=["centre_distance"], definition=definition)
    found = score_arrays(truth, pred, (2.0, 1.0, 0.5), chosen)["classes"]["1"]["centre_distance"]
    assert found == pytest.approx(math.sqrt(2.0**2 + 2.0**2 + 1.5**2), rel=1e-15)
    missing = score_arrays(truth, np.zeros_like(truth), (2.0, 1.0, 0.5), chosen)["classes"]["1"]["centre_distance"]
    assert missing == empty or (empty is None and math.isnan(missing))
    assert metrics_table.BY_NAME["centre_distance"].kind == DISTANCE
