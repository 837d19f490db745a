"""The annotators suite's plots: the tool's figure families, drawn for a reader.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``: ``graph_generator``
draws, per model, the metric of every reference mask per image (``plot_curves``) and its
distribution over images (``plot_distributions``: box and violin plots). Added here for a
reader: every series in the legend, markers so a single image is visible, a constant series
drawn instead of an empty violin, labelled axes, the sentinel 100 explained, and a comparison
of the models. Rendered headless at a screen resolution (``figures``).
"""

import math

import numpy as np

from evaluation import figures
from evaluation.suites.annotators.definitions import (
    AGREEMENTS,
    EMPTY_SENTINEL,
    GENERATED,
    METRICS,
    csv_values,
)

DPI = 100
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


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _style(label: str, index: int) -> dict:
    """Colour, marker and dash per series, so overlapping series stay distinguishable."""
    colors = figures.pyplot().get_cmap("tab10").colors
    dashed = label in GENERATED or label == "Model"
    return {
        "color": colors[index % len(colors)],
        "linestyle": "--" if dashed else "-",
        "marker": MARKERS[index % len(MARKERS)],
        "markersize": max(4.0, 8.0 - 0.5 * index),
        "markerfacecolor": "none",
        "markeredgewidth": 1.4,
    }  # hollow: a marker on top hides none below


def _finish(fig, ax, title: str, axis: str, sentinel: bool) -> bytes:
    if axis == "Components":
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=12)
    ax.set_ylabel(axis)
    ax.grid(axis="y", linestyle=":", alpha=0.6)
    if sentinel:
        fig.text(
            0.01,
            -0.02,
            f"{EMPTY_SENTINEL:g} = the tool's value when exactly one of the two masks is empty",
            fontsize=8,
            style="italic",
            ha="left",
            va="top",
        )
    return figures.png(fig, DPI)


def line_plot(images: dict[str, dict], family: dict, model: str) -> bytes:
    """The metric per image, one line per series (the tool's ``plot_curves``)."""
    plt = figures.pyplot()
    ids = list(images)
    fig, ax = plt.subplots(figsize=(9, 4.6))
    sentinel = False
    for i, (label, column) in enumerate(family["series"]):
        values = _values(images, column)
        sentinel |= family["key"] in ("hausdorff", "msd") and EMPTY_SENTINEL in values
        ax.plot(range(len(ids)), values, linewidth=1.4, label=label, **_style(label, i))
    step = max(1, math.ceil(len(ids) / 30))
    ax.set_xticks(range(0, len(ids), step))
    ax.set_xticklabels(ids[::step], rotation=45 if len(ids) > 4 else 0, ha="right" if len(ids) > 4 else "center", fontsize=8)
    ax.set_xlabel("Image")
    if len(ids) == 1:
        ax.set_xlim(-0.5, 0.5)
    ax.legend(title="Series", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, title_fontsize=9)
    return _finish(fig, ax, f"{family['title']}\nper image, model {model}", family["axis"], sentinel)


def _distribution_axes(family: dict, images: dict[str, dict]):
    plt = figures.pyplot()
    data = [[v for v in _values(images, column) if not math.isnan(v)] for _, column in family["series"]]
    labels = [label for label, _ in family["series"]]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(labels) + 2), 4.6))
    return fig, ax, data, labels


def _label_series(ax, labels: list[str], xaxis: str) -> None:
    """Tick labels under each series, set after drawing (boxplot would renumber them)."""
    ax.set_xlabel(xaxis)
    ax.set_xticks(range(1, len(labels) + 1))
    long_labels = max(len(label) for label in labels) > 8
    ax.set_xticklabels(labels, rotation=25 if long_labels else 0, ha="right" if long_labels else "center", fontsize=9)
    ax.set_xlim(0.4, len(labels) + 0.6)


def box_plot(images: dict[str, dict], family: dict, model: str) -> bytes:
    """Distribution over images per series (the tool's ``plot_distributions``, box part)."""
    fig, ax, data, labels = _distribution_axes(family, images)
    present = [i for i, d in enumerate(data) if d]
    if present:
        ax.boxplot(
            [data[i] for i in present],
            positions=[i + 1 for i in present],
            widths=0.5,
            patch_artist=True,
            boxprops={"facecolor": "#cfe2f3"},
            medianprops={"color": "#b45309", "linewidth": 1.8},
        )
    _label_series(ax, labels, family["xaxis"])
    sentinel = family["key"] in ("hausdorff", "msd") and any(EMPTY_SENTINEL in d for d in data)
    title = f"{family['title']}\nover {len(images)} image(s), model {model} (orange: median, circles: outliers)"
    return _finish(fig, ax, title, family["axis"], sentinel)


def violin_plot(images: dict[str, dict], family: dict, model: str) -> bytes:
    """Distribution over images per series; a series without spread is drawn as a bar mark,
    since a kernel density of one value is undefined."""
    fig, ax, data, labels = _distribution_axes(family, images)
    spread = [i for i, d in enumerate(data) if len(set(d)) > 1]
    if spread:
        parts = ax.violinplot(
            [data[i] for i in spread], positions=[i + 1 for i in spread], widths=0.7, showmeans=True, showextrema=True
        )
        for body in parts["bodies"]:
            body.set_facecolor("#9fc5e8")
            body.set_alpha(0.8)
    flat = [i for i, d in enumerate(data) if len(set(d)) == 1]
    for i in flat:
        ax.hlines(data[i][0], i + 0.7, i + 1.3, color="#1f4e79", linewidth=2.5)
    if flat:
        ax.plot([], [], color="#1f4e79", linewidth=2.5, label="same value on every image")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    _label_series(ax, labels, family["xaxis"])
    sentinel = family["key"] in ("hausdorff", "msd") and any(EMPTY_SENTINEL in d for d in data)
    title = f"{family['title']}\nover {len(images)} image(s), model {model} (bars: min, mean, max)"
    return _finish(fig, ax, title, family["axis"], sentinel)


def model_comparison(summaries: dict[str, dict], names: list[str], metric: str) -> bytes:
    """Mean (bars) and std over images (error bars) of one metric per reference mask, per model."""
    plt = figures.pyplot()
    compared = names + list(GENERATED) if len(names) >= 2 else names
    models = list(summaries)
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(compared) + 3), 4.6))
    x = np.arange(len(compared))
    colors = plt.get_cmap("tab10").colors
    for i, model in enumerate(models):
        means = [summaries[model]["mean"][f"{c}_{metric}"] for c in compared]
        stds = [summaries[model]["std"][f"{c}_{metric}"] for c in compared]
        stds = [0.0 if math.isnan(s) else s for s in stds]
        below = [min(s, m) if not math.isnan(m) else 0.0 for s, m in zip(stds, means)]  # no bar below 0
        above = [min(s, 1 - m) if metric in ("jaccard", "dice") and not math.isnan(m) else s for s, m in zip(stds, means)]
        ax.bar(
            x + (i - (len(models) - 1) / 2) * width,
            means,
            width,
            yerr=[below, above],
            capsize=3,
            label=model,
            color=colors[i % len(colors)],
            edgecolor="black",
            linewidth=0.4,
        )
    ax.set_xticks(x)
    ax.set_xticklabels(compared)
    ax.set_xlabel("Reference mask the model is compared with")
    ax.legend(title="Model", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title = f"{AXIS[metric].split(' (')[0]} by model and reference mask\nmean over images (error bars: one std, within the metric's range)"
    return _finish(fig, ax, title, AXIS[metric], False)


def plots(rows: dict[str, dict], summaries: dict[str, dict], names: list[str]) -> dict[str, bytes]:
    """Every PNG, keyed by its path in the output folder."""
    jobs = {}
    for model, images in rows.items():
        if not images:
            continue
        for family in families(names):
            for kind, draw in (("line", line_plot), ("box", box_plot), ("violin", violin_plot)):
                jobs[f"plots/{model}/{family['key']}_{kind}.png"] = (draw, images, family, model)
    if len(summaries) > 1:
        for metric in METRICS:
            jobs[f"plots/models_{metric}.png"] = (model_comparison, summaries, names, metric)
    return figures.render(jobs)
