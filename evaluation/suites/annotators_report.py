"""The ``annotators`` suite's files for people: CSV tables, PNG plots and one HTML report.

Tables keep the names and layout of MMV-Lab/string_vessel_project@c90f9ec (``evaluation_metrics``
writes ``model_evaluation_<id>.csv``; ``generate_statistical_summaries`` writes
``single_summary.csv``, or ``mean_summary.csv``, ``std_summary.csv``, ``variance_summary.csv``
and ``min_max_summary.csv`` for several models), so its users' spreadsheets keep working;
``summary.csv`` adds min and max per model in one long table.

Plots follow the tool's families (``graph_generator``: per image line plots, box and violin
plots) with what its figures lack for a reader: every series in the legend, markers so a single
image is visible, a constant series drawn instead of an empty violin, labelled axes, and the
sentinel 100 explained. They are rendered headless (Agg) at a screen resolution and embedded
as base64 in ``report.html``, which is self-contained.
"""

import base64
import html
import io
import math

from evaluation.suites.annotators import AGREEMENTS, EMPTY_SENTINEL, GENERATED, METRICS, REFERENCE, csv_values

DPI = 100
STATISTICS = ("mean", "std", "min", "max")
HEADLINE = ("Staple_dice", "Staple_jaccard", "Staple_hausdorff", "Staple_msd", "annotators_agree_dice", "annotators_model_agree_dice")
AXIS = {"jaccard": "Jaccard index", "dice": "Dice index", "hausdorff": "Hausdorff distance (pixels)",
        "msd": "Mean surface distance (pixels)"}


# --------------------------------------------------------------------------------------------
# CSV


def _cell(value) -> str:
    """pandas ``to_csv`` formatting: repr for floats, empty for NaN/None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = repr(value) if isinstance(value, float) else str(value)
    return f'"{text}"' if any(ch in text for ch in ',"\n') else text


def csv_text(header: list[str], records: list[list]) -> str:
    return "".join(",".join(_cell(v) for v in line) + "\n" for line in [header, *records])


def tables(rows: dict[str, dict], summaries: dict[str, dict], all_columns: list[str]) -> dict[str, str]:
    """The per-image CSV of every model and the summaries across models."""
    summarized = all_columns[all_columns.index("Model") + 1:]
    files = {}
    for model, images in rows.items():
        records = [[image] + [csv_values(row).get(c) for c in all_columns[1:]] for image, row in images.items()]
        files[f"model_evaluation_{model}.csv"] = csv_text(all_columns, records)
    if len(summaries) == 1:
        (summary,) = summaries.values()
        files["single_summary.csv"] = csv_text(
            ["Statistic", *summarized],
            [[name] + [summary[statistic][c] for c in summarized] for statistic, name in (("mean", "mean"), ("std", "std"), ("variance", "variance"))],
        )
    else:
        from evaluation.suites.annotators import min_max_ids

        for statistic in ("mean", "std", "variance"):
            files[f"{statistic}_summary.csv"] = csv_text(["id", *summarized], [[m] + [s[statistic][c] for c in summarized] for m, s in summaries.items()])
        table = min_max_ids(summaries, summarized)
        files["min_max_summary.csv"] = csv_text(["Statistic", *summarized], [[k] + [v[c] for c in summarized] for k, v in table.items()])
    files["summary.csv"] = csv_text(
        ["model", "statistic", *summarized],
        [[m, statistic] + [s[statistic][c] for c in summarized] for m, s in summaries.items() for statistic in STATISTICS],
    )
    return files


# --------------------------------------------------------------------------------------------
# Plot families


def families(names: list[str]) -> list[dict]:
    """What is plotted per model: a title, the y axis, and (label, column) series."""
    if len(names) < 2:
        compared = names
        found = [{"key": "findings", "title": "Connected components", "axis": "Components", "xaxis": "Mask",
                  "series": [(n, n) for n in names] + [("Model", "Model")]}]
    else:
        compared = names + list(GENERATED)
        found = [{"key": "findings", "title": "Connected components of each mask", "axis": "Components", "xaxis": "Mask",
                  "series": [(n, n) for n in compared] + [("Model", "Model")]}]
    for metric in METRICS:
        found.append({"key": metric, "title": f"{AXIS[metric].split(' (')[0]} of the model against each reference mask",
                      "axis": AXIS[metric], "xaxis": "Reference mask", "series": [(x, f"{x}_{metric}") for x in compared]})
    if len(names) >= 2:
        labels = {"annotators_agree": "among annotators", "annotators_model_agree": "annotators + model"}
        found.append({"key": "agreement_overlap", "title": "Generalized agreement (overlap)", "axis": "Jaccard / Dice", "xaxis": "",
                      "series": [(f"{m.capitalize()} {labels[a]}", f"{a}_{m}") for m in ("jaccard", "dice") for a in AGREEMENTS]})
        for metric in ("hausdorff", "msd"):
            series = [("mean over annotator pairs", f"annotators_agree_{metric}"),
                      ("mean of model vs every reference mask", f"annotators_model_agree_{metric}")]
            found.append({"key": f"agreement_{metric}", "title": f"Agreement: {AXIS[metric].split(' (')[0]}",
                          "axis": AXIS[metric], "xaxis": "", "series": series})
        found.append({"key": "staple_sensitivity", "title": "STAPLE sensitivity of each annotator", "axis": "Sensitivity", "xaxis": "Annotator",
                      "series": [(n, f"{n}_sensivity") for n in names]})
        found.append({"key": "staple_specificity", "title": "STAPLE specificity of each annotator", "axis": "Specificity", "xaxis": "Annotator",
                      "series": [(n, f"{n}_specificity") for n in names]})
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
    import matplotlib.pyplot as plt

    colors = plt.get_cmap("tab10").colors
    dashed = label in GENERATED or label == "Model"
    return {"color": colors[index % len(colors)], "linestyle": "--" if dashed else "-",
            "marker": MARKERS[index % len(MARKERS)], "markersize": max(4.0, 8.0 - 0.5 * index),
            "markerfacecolor": "none", "markeredgewidth": 1.4}  # hollow: a marker on top hides none below


def _finish(fig, ax, title: str, axis: str, sentinel: bool) -> bytes:
    if axis == "Components":
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=12)
    ax.set_ylabel(axis)
    ax.grid(axis="y", linestyle=":", alpha=0.6)
    if sentinel:
        fig.text(0.01, -0.02, f"{EMPTY_SENTINEL:g} = the tool's value when exactly one of the two masks is empty",
                 fontsize=8, style="italic", ha="left", va="top")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buffer.getvalue()


def line_plot(images: dict[str, dict], family: dict, model: str) -> bytes:
    """The metric per image, one line per series (the tool's ``plot_curves``)."""
    import matplotlib.pyplot as plt

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
    import matplotlib.pyplot as plt

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
        ax.boxplot([data[i] for i in present], positions=[i + 1 for i in present], widths=0.5, patch_artist=True,
                   boxprops={"facecolor": "#cfe2f3"}, medianprops={"color": "#b45309", "linewidth": 1.8})
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
        parts = ax.violinplot([data[i] for i in spread], positions=[i + 1 for i in spread], widths=0.7, showmeans=True, showextrema=True)
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
    import matplotlib.pyplot as plt
    import numpy as np

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
        ax.bar(x + (i - (len(models) - 1) / 2) * width, means, width, yerr=[below, above], capsize=3, label=model,
               color=colors[i % len(colors)], edgecolor="black", linewidth=0.4)
    ax.set_xticks(x)
    ax.set_xticklabels(compared)
    ax.set_xlabel("Reference mask the model is compared with")
    ax.legend(title="Model", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title = f"{AXIS[metric].split(' (')[0]} by model and reference mask\nmean over images (error bars: one std, within the metric's range)"
    return _finish(fig, ax, title, AXIS[metric], False)


def plots(rows: dict[str, dict], summaries: dict[str, dict], names: list[str]) -> dict[str, bytes]:
    """Every PNG, keyed by its path in the output folder."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    files = {}
    for model, images in rows.items():
        if not images:
            continue
        for family in families(names):
            for kind, draw in (("line", line_plot), ("box", box_plot), ("violin", violin_plot)):
                files[f"plots/{model}/{family['key']}_{kind}.png"] = draw(images, family, model)
    if len(summaries) > 1:
        for metric in METRICS:
            files[f"plots/models_{metric}.png"] = model_comparison(summaries, names, metric)
    return files


# --------------------------------------------------------------------------------------------
# HTML


def _number(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "&ndash;"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}"


def _image(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _table(header: list[str], body: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{h}</th>" for h in header)
    lines = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in line) + "</tr>" for line in body)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>'


def _settings_table(context: dict) -> str:
    o = context["options"]
    dilation = f"{o['dilation_footprint']}, radius {o['dilation_radius']}" if o["dilation_radius"] else "off"
    surface = {"all_pixels": "all foreground pixels, MSD = mean of the two directed means (the tool's definition)",
               "boundary": "boundary pixels, MSD = mean of the two directed means",
               "boundary_pooled": "boundary pixels, MSD pooled over both boundaries"}[o["surface_distance"]]
    rows = [("Annotators (column order)", ", ".join(context["annotators"])), ("Images", str(len(context["images"]))),
            ("Models", ", ".join(context["models"])), ("Evaluated class of the prediction", str(o["eval_class"])),
            ("Dilation of masks", dilation), ("STAPLE mask", f"probability &gt; {o['staple_threshold']}"),
            ("Surface distances", surface), ("Missing predictions", o["missing_prediction"]),
            ("Reference", f"{REFERENCE['repository']}@{REFERENCE['commit'][:7]}")]
    return _table(["Setting", "Value"], [[html.escape(k), v if k == "STAPLE mask" else html.escape(v)] for k, v in rows])


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#1f2933;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #cbd2d9;padding-bottom:.3rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin-top:1.6rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #d9e2ec;padding:.25rem .55rem;text-align:right}th{background:#f0f4f8}
td:first-child,th:first-child{text-align:left}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,1fr));gap:.8rem}
.plots img{width:100%;border:1px solid #e4e7eb}
.note{color:#52606d;font-size:.88rem}details{margin:.8rem 0}summary{cursor:pointer;font-weight:600}
.scroll{overflow-x:auto}
"""

NOTES = """<ul class="note">
<li>Union, Intersection and Staple are generated from the annotators; Staple is the SimpleITK STAPLE
consensus, thresholded strictly above the STAPLE threshold.</li>
<li>Dice is derived from Jaccard as 2J/(1+J), also for the generalized agreement values (not the multi-set Dice).</li>
<li>Hausdorff and mean surface distance are in pixels. When exactly one of the two masks is empty the tool reports
100; between two annotators such a pair counts 0. The model agreement distances average the model's distance to every
reference mask, the generated ones included.</li>
<li>STAPLE sensitivity and specificity are the estimated performance of each annotator against the consensus
(column name <code>_sensivity</code> as spelled by the tool).</li>
</ul>"""


def report_html(context: dict, rows: dict[str, dict], summaries: dict[str, dict], all_columns: list[str],
                pngs: dict[str, bytes], ranked: str) -> str:
    names = context["annotators"]
    summarized = all_columns[all_columns.index("Model") + 1:]
    headline = [c for c in HEADLINE if c in summarized] or summarized[:4]
    parts = [f"<h1>Multi-annotator evaluation</h1>{_settings_table(context)}", "<h2>Summary by model</h2>"]
    body = []
    for model, summary in summaries.items():
        cells = [f"<strong>{html.escape(model)} (ranked)</strong>" if model == ranked else html.escape(model)]
        cells += [f"{_number(summary['mean'][c])} &plusmn; {_number(summary['std'][c])}" for c in headline]
        body.append(cells)
    parts.append('<p class="note">Mean &plusmn; standard deviation over images.</p>')
    parts.append(_table(["Model", *map(html.escape, headline)], body))
    if len(summaries) > 1:
        parts.append('<h2>Models compared</h2><div class="plots">')
        parts += [_image(pngs[f"plots/models_{m}.png"], f"models {m}") for m in METRICS if f"plots/models_{m}.png" in pngs]
        parts.append("</div>")
    for model, images in rows.items():
        parts.append(f"<h2>Model {html.escape(model)}</h2>")
        if not images:
            parts.append('<p class="note">No image of this model could be scored.</p>')
            continue
        summary = summaries[model]
        stat_rows = [[html.escape(c)] + [_number(summary[s][c]) for s in STATISTICS] for c in summarized]
        parts.append(f'<details><summary>Statistics over {len(images)} image(s)</summary>{_table(["Column", *STATISTICS], stat_rows)}</details>')
        per_image = [[html.escape(image) + ("" if row.get("status") == "scored" else f" ({html.escape(str(row.get('status')))})")]
                     + [_number(csv_values(row).get(c)) for c in all_columns[1:]] for image, row in images.items()]
        parts.append(f'<details><summary>Per-image values</summary><div class="scroll">{_table(all_columns, per_image)}</div></details>')
        for family in families(names):
            parts.append(f"<h3>{html.escape(family['title'])}</h3><div class=\"plots\">")
            parts += [_image(pngs[f"plots/{model}/{family['key']}_{kind}.png"], f"{family['key']} {kind}") for kind in ("line", "box", "violin")]
            parts.append("</div>")
    parts.append(f"<h2>Definitions</h2>{NOTES}")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Multi-annotator evaluation</title>'
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")


def outputs(context: dict, rows: dict[str, dict], summaries: dict[str, dict], all_columns: list[str], with_report: bool) -> dict:
    """Every file the suite writes beside metrics.json."""
    files: dict[str, str | bytes] = dict(tables(rows, summaries, all_columns))
    if not with_report:
        return files
    pngs = plots(rows, summaries, context["annotators"])
    files.update(pngs)
    ranked = context.get("ranked_model", next(iter(summaries)))
    files["report.html"] = report_html(context, rows, summaries, all_columns, pngs, ranked)
    return files
