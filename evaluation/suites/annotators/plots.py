"""The annotators suite's plots: the tool's figure families, drawn for a reader.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``: ``graph_generator``
draws, per model, the metric of every reference mask per image (``plot_curves``) and its
distribution over images (``plot_distributions``: box and violin plots). Added here for a
reader: every series in the legend, markers so a single image is visible, a constant series
drawn instead of an empty violin, labelled axes, the sentinel 100 explained, and a comparison
of the models. Drawn as SVG (``charts``): 64 matplotlib figures took 4.7 s of a 5.8 s run.
"""

import math

from evaluation import charts
from evaluation.suites.annotators.definitions import (
    AGREEMENTS,
    EMPTY_SENTINEL,
    GENERATED,
    METRICS,
    csv_values,
)

AXIS = {
    "jaccard": "Jaccard index",
    "dice": "Dice index",
    "hausdorff": "Hausdorff distance (pixels)",
    "msd": "Mean surface distance (pixels)",
}


def families(names: list[str]) -> list[dict]:
    """What is plotted per model: a title, the y axis, and (label, column) series."""
    if len(names) < 2:
        compared = names
        found = [
            {
                "key": "findings",
                "title": "Connected components",
                "axis": "Components",
                "xaxis": "Mask",
                "series": [(n, n) for n in names] + [("Model", "Model")],
            }
        ]
    else:
        compared = names + list(GENERATED)
        found = [
            {
                "key": "findings",
                "title": "Connected components of each mask",
                "axis": "Components",
                "xaxis": "Mask",
                "series": [(n, n) for n in compared] + [("Model", "Model")],
            }
        ]
    for metric in METRICS:
        found.append(
            {
                "key": metric,
                "title": f"{AXIS[metric].split(' (')[0]} of the model against each reference mask",
                "axis": AXIS[metric],
                "xaxis": "Reference mask",
                "series": [(x, f"{x}_{metric}") for x in compared],
            }
        )
    if len(names) >= 2:
        labels = {"annotators_agree": "among annotators", "annotators_model_agree": "annotators + model"}
        found.append(
            {
                "key": "agreement_overlap",
                "title": "Generalized agreement (overlap)",
                "axis": "Jaccard / Dice",
                "xaxis": "",
                "series": [(f"{m.capitalize()} {labels[a]}", f"{a}_{m}") for m in ("jaccard", "dice") for a in AGREEMENTS],
            }
        )
        for metric in ("hausdorff", "msd"):
            series = [
                ("mean over annotator pairs", f"annotators_agree_{metric}"),
                ("mean of model vs every reference mask", f"annotators_model_agree_{metric}"),
            ]
            found.append(
                {
                    "key": f"agreement_{metric}",
                    "title": f"Agreement: {AXIS[metric].split(' (')[0]}",
                    "axis": AXIS[metric],
                    "xaxis": "",
                    "series": series,
                }
            )
        found.append(
            {
                "key": "staple_sensitivity",
                "title": "STAPLE sensitivity of each annotator",
                "axis": "Sensitivity",
                "xaxis": "Annotator",
                "series": [(n, f"{n}_sensivity") for n in names],
            }
        )
        found.append(
            {
                "key": "staple_specificity",
                "title": "STAPLE specificity of each annotator",
                "axis": "Specificity",
                "xaxis": "Annotator",
                "series": [(n, f"{n}_specificity") for n in names],
            }
        )
    return found


def _values(images: dict[str, dict], column: str) -> list[float]:
    out = []
    for row in images.values():
        v = csv_values(row).get(column)
        out.append(math.nan if v is None else float(v))
    return out


SENTINEL_NOTE = f"{EMPTY_SENTINEL:g} = the tool's value when exactly one of the two masks is empty"


def _title(family: dict, images: dict, model: str, what: str) -> str:
    sentinel = family["key"] in ("hausdorff", "msd") and any(
        EMPTY_SENTINEL in _values(images, column) for _, column in family["series"]
    )
    return f"{family['title']}, {what}, model {model}" + (f" ({SENTINEL_NOTE})" if sentinel else "")


def line_plot(images: dict[str, dict], family: dict, model: str) -> str:
    """The metric per image, one line per series (the tool's ``plot_curves``); the generated
    masks and the model dashed."""
    ids = list(images)
    series = [(label, range(len(ids)), _values(images, column)) for label, column in family["series"]]
    step = max(1, math.ceil(len(ids) / 30))
    return charts.lines(
        _title(family, images, model, "per image"),
        series,
        "Image",
        family["axis"],
        x_ticks=[(i, ids[i]) for i in range(0, len(ids), step)],
        dashed=frozenset([*GENERATED, "Model"]),
    )


def _distributions(images: dict[str, dict], family: dict) -> tuple[list[str], list[list[float]]]:
    labels = [label for label, _ in family["series"]]
    return labels, [[v for v in _values(images, column) if not math.isnan(v)] for _, column in family["series"]]


def box_plot(images: dict[str, dict], family: dict, model: str) -> str:
    """Distribution over images per series (the tool's ``plot_distributions``, box part)."""
    labels, data = _distributions(images, family)
    title = _title(family, images, model, f"over {len(images)} image(s)")
    return charts.boxes(title, labels, data, family["axis"], family["xaxis"])


def violin_plot(images: dict[str, dict], family: dict, model: str) -> str:
    """Distribution over images per series; a series without spread is a bar mark."""
    labels, data = _distributions(images, family)
    title = _title(family, images, model, f"over {len(images)} image(s)")
    return charts.violins(title, labels, data, family["axis"], family["xaxis"])


def model_comparison(summaries: dict[str, dict], names: list[str], metric: str) -> str:
    """Mean (bars) and std over images (error bars, within the metric's range) of one metric per
    reference mask, per model."""
    compared = names + list(GENERATED) if len(names) >= 2 else names
    series = []
    for model, summary in summaries.items():
        means = [summary["mean"][f"{c}_{metric}"] for c in compared]
        stds = [0.0 if math.isnan(s) else s for s in (summary["std"][f"{c}_{metric}"] for c in compared)]
        below = [min(s, m) if not math.isnan(m) else 0.0 for s, m in zip(stds, means)]  # no bar below 0
        above = [min(s, 1 - m) if metric in ("jaccard", "dice") and not math.isnan(m) else s for s, m in zip(stds, means)]
        series.append((model, means, below, above))
    title = f"{AXIS[metric].split(' (')[0]} by model and reference mask (mean over images, one std)"
    return charts.bars(title, compared, series, AXIS[metric], "Reference mask the model is compared with")


def plots(rows: dict[str, dict], summaries: dict[str, dict], names: list[str]) -> dict[str, str]:
    """Every chart, as SVG text keyed by its path in the output folder."""
    files = {}
    for model, images in rows.items():
        if not images:
            continue
        for family in families(names):
            for kind, draw in (("line", line_plot), ("box", box_plot), ("violin", violin_plot)):
                files[f"plots/{model}/{family['key']}_{kind}.svg"] = draw(images, family, model)
    if len(summaries) > 1:
        for metric in METRICS:
            files[f"plots/models_{metric}.svg"] = model_comparison(summaries, names, metric)
    return files
