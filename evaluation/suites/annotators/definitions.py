"""The tool's names and fixed values, shared by scoring, the summaries and the reports.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``. The column layout is
that of the per-image CSV ``evaluation_metrics`` writes (``model_evaluation_<id>.csv``), so
the tables, metrics.json rows and plots all use the tool's column names.
"""

REFERENCE = {
    "repository": "MMV-Lab/string_vessel_project",
    "commit": "c90f9ec1c6c63bd4d232ad0d7bf3c1f35e9db8c6",
    "staple": "SimpleITK STAPLEImageFilter, at most 100 iterations",
}
STAPLE_ITERATIONS = 100  # SetMaximumIterations(100) in evaluation_metrics
# HD/MSD when exactly one of the two masks is empty (hausdorff_computing, msd_computing)
EMPTY_SENTINEL = 100.0
GENERATED = ("Union", "Intersection", "Staple")
AGREEMENTS = ("annotators_agree", "annotators_model_agree")
METRICS = ("jaccard", "dice", "hausdorff", "msd")
PRED_SUFFIX = "_segPred"  # stripped from prediction file stems, as the tool does
SINGLE_MODEL = "submission"  # the model id of predictions placed directly in the submission
RANKING = "Staple_dice"


def columns(names: list[str]) -> list[str]:
    """The per-image CSV's columns in the tool's order (``evaluation_metrics``), the counts
    first; with fewer than two annotators only positions 0, 1, 5, 6, 12, 18, 24 remain."""
    if len(names) < 2:
        return ["image_id", names[0], "Model"] + [f"{names[0]}_{metric}" for metric in METRICS]
    compared = names + list(GENERATED) + list(AGREEMENTS)
    metric_columns = [f"{x}_{metric}" for metric in METRICS for x in compared]
    staple_columns = [f"{n}_sensivity" for n in names] + [f"{n}_specificity" for n in names]
    return ["image_id", *names, *GENERATED, "Model", *metric_columns, *staple_columns]


def summarized(names: list[str]) -> list[str]:
    """The columns ``generate_statistical_summaries`` summarises: every one after 'Model'."""
    all_columns = columns(names)
    return all_columns[all_columns.index("Model") + 1 :]


def csv_values(row: dict) -> dict:
    """A metrics row flattened to the CSV's column names (counts under their mask's name)."""
    flat = {k: v for k, v in row.items() if k not in ("counts", "Model_count", "status")}
    return {**row.get("counts", {}), "Model": row.get("Model_count"), **flat}
