"""The ``annotators`` suite's files for people: CSV tables, SVG plots and one HTML report.

Tables keep the names and layout of MMV-Lab/string_vessel_project@c90f9ec (``evaluation_metrics``
writes ``model_evaluation_<id>.csv``; ``generate_statistical_summaries`` writes
``single_summary.csv``, or ``mean_summary.csv``, ``std_summary.csv``, ``variance_summary.csv``
and ``min_max_summary.csv`` for several models), so its users' spreadsheets keep working;
``summary.csv`` adds min and max per model in one long table. The plots (``plots/*.svg``) are
also inline in ``report.html``, which is self-contained.
"""

import html
import math

from evaluation import figures
from evaluation.suites.annotators.aggregate import Scored, min_max_ids
from evaluation.suites.annotators.definitions import (
    METRICS,
    REFERENCE,
    columns,
    csv_values,
    summarized,
)
from evaluation.suites.annotators.inputs import Context
from evaluation.suites.annotators.plots import families, plots

STATISTICS = ("mean", "std", "min", "max")
HEADLINE = (
    "Staple_dice",
    "Staple_jaccard",
    "Staple_hausdorff",
    "Staple_msd",
    "annotators_agree_dice",
    "annotators_model_agree_dice",
)


# --------------------------------------------------------------------------------------------
# CSV


def tables(rows: dict[str, dict], summaries: dict[str, dict], names: list[str]) -> dict[str, str]:
    """The per-image CSV of every model and the summaries across models."""
    all_columns, summary_columns = columns(names), summarized(names)
    files = {}
    for model, images in rows.items():
        records = [[image] + [csv_values(row).get(c) for c in all_columns[1:]] for image, row in images.items()]
        files[f"model_evaluation_{model}.csv"] = figures.csv_text(all_columns, records)
    if len(summaries) == 1:
        (summary,) = summaries.values()
        files["single_summary.csv"] = figures.csv_text(
            ["Statistic", *summary_columns],
            [[statistic] + [summary[statistic][c] for c in summary_columns] for statistic in ("mean", "std", "variance")],
        )
    else:
        for statistic in ("mean", "std", "variance"):
            files[f"{statistic}_summary.csv"] = figures.csv_text(
                ["id", *summary_columns], [[m] + [s[statistic][c] for c in summary_columns] for m, s in summaries.items()]
            )
        table = min_max_ids(summaries, summary_columns)
        files["min_max_summary.csv"] = figures.csv_text(
            ["Statistic", *summary_columns], [[k] + [v[c] for c in summary_columns] for k, v in table.items()]
        )
    files["summary.csv"] = figures.csv_text(
        ["model", "statistic", *summary_columns],
        [[m, statistic] + [s[statistic][c] for c in summary_columns] for m, s in summaries.items() for statistic in STATISTICS],
    )
    return files


# --------------------------------------------------------------------------------------------
# HTML


def _number(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "&ndash;"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4f}"


def _settings_table(context: Context) -> str:
    o = context.options
    dilation = f"{o.dilation_footprint}, radius {o.dilation_radius}" if o.dilation_radius else "off"
    surface = {
        "all_pixels": "all foreground pixels, MSD = mean of the two directed means (the tool's definition)",
        "boundary": "boundary pixels, MSD = mean of the two directed means",
        "boundary_pooled": "boundary pixels, MSD pooled over both boundaries",
    }[o.surface_distance]
    rows = [
        ("Annotators (column order)", ", ".join(context.annotators)),
        ("Images", str(len(context.images))),
        ("Models", ", ".join(context.models)),
        ("Evaluated class of the prediction", str(o.eval_class)),
        ("Dilation of masks", dilation),
        ("STAPLE mask", f"probability &gt; {o.staple_threshold}"),
        ("Surface distances", surface),
        ("Missing predictions", o.missing_prediction),
        ("Reference", f"{REFERENCE['repository']}@{REFERENCE['commit'][:7]}"),
    ]
    return figures.table(["Setting", "Value"], [[html.escape(k), v if k == "STAPLE mask" else html.escape(v)] for k, v in rows])


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#1f2933;padding:0 1rem}
h1{font-size:1.6rem}h2{font-size:1.3rem;border-bottom:1px solid #cbd2d9;padding-bottom:.3rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin-top:1.6rem}table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #d9e2ec;padding:.25rem .55rem;text-align:right}th{background:#f0f4f8}
td:first-child,th:first-child{text-align:left}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,340px),1fr));gap:.8rem}
.plots svg{width:100%;height:auto}
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


def _summary_section(scored: Scored, summary_columns: list[str], drawn: dict[str, str]) -> list[str]:
    """Mean and std of the headline columns per model, and the models compared."""
    headline = [c for c in HEADLINE if c in summary_columns] or summary_columns[:4]
    body = []
    for model, summary in scored.summaries.items():
        cells = [f"<strong>{html.escape(model)} (ranked)</strong>" if model == scored.ranked else html.escape(model)]
        cells += [f"{_number(summary['mean'][c])} &plusmn; {_number(summary['std'][c])}" for c in headline]
        body.append(cells)
    parts = [
        "<h2>Summary by model</h2>",
        '<p class="note">Mean &plusmn; standard deviation over images.</p>',
        figures.table(["Model", *map(html.escape, headline)], body),
    ]
    if len(scored.summaries) > 1:
        parts.append('<h2>Models compared</h2><div class="plots">')
        parts += [drawn[f"plots/models_{m}.svg"] for m in METRICS if f"plots/models_{m}.svg" in drawn]
        parts.append("</div>")
    return parts


def _model_section(model: str, images: dict[str, dict], summary: dict, names: list[str], drawn: dict[str, str]) -> list[str]:
    """One model: its statistics, its per-image values and its plots."""
    parts = [f"<h2>Model {html.escape(model)}</h2>"]
    if not images:
        return parts + ['<p class="note">No image of this model could be scored.</p>']
    all_columns = columns(names)
    stat_rows = [[html.escape(c)] + [_number(summary[s][c]) for s in STATISTICS] for c in summarized(names)]
    parts.append(
        f"<details><summary>Statistics over {len(images)} image(s)</summary>{figures.table(['Column', *STATISTICS], stat_rows)}</details>"
    )
    per_image = [
        [html.escape(image) + ("" if row.get("status") == "scored" else f" ({html.escape(str(row.get('status')))})")]
        + [_number(csv_values(row).get(c)) for c in all_columns[1:]]
        for image, row in images.items()
    ]
    parts.append(
        f'<details><summary>Per-image values</summary><div class="scroll">{figures.table(all_columns, per_image)}</div></details>'
    )
    for family in families(names):
        parts.append(f'<h3>{html.escape(family["title"])}</h3><div class="plots">')
        parts += [drawn[f"plots/{model}/{family['key']}_{kind}.svg"] for kind in ("line", "box", "violin")]
        parts.append("</div>")
    return parts


def report_html(context: Context, scored: Scored, drawn: dict[str, str]) -> str:
    names = context.annotators
    parts = [
        f"<h1>Multi-annotator evaluation</h1>{_settings_table(context)}",
        *_summary_section(scored, summarized(names), drawn),
    ]
    for model, images in scored.rows.items():
        parts += _model_section(model, images, scored.summaries[model], names, drawn)
    parts.append(f"<h2>Definitions</h2>{NOTES}")
    return figures.page("Multi-annotator evaluation", "".join(parts), STYLE)


def outputs(context: Context, scored: Scored, rendered: bool) -> dict[str, str | bytes]:
    """Every file the suite writes beside metrics.json: the tables always, the plots and the
    HTML report when ``rendered`` (the phase's ``report`` option)."""
    files: dict[str, str | bytes] = dict(tables(scored.rows, scored.summaries, context.annotators))
    if not rendered:
        return files
    drawn = plots(scored.rows, scored.summaries, context.annotators)
    files.update(drawn)
    files["report.html"] = report_html(context, scored, drawn)
    return files
