"""The files for people: ``cases.csv`` (one row per case and class, every key) and
``report.html`` (statistics per class, a box plot per metric with one box per class, and the
per-case table), built with the shared helpers of ``evaluation.figures``."""

import html

from evaluation import charts, figures
from evaluation.suites.segmentation.aggregate import defined, flat
from evaluation.suites.segmentation.options import Options

MAX_PLOTS = 12  # box plots drawn (the first scores, in output order)
STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:.85em}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
)


def cases_csv(options: Options, scored: dict[str, dict], keys: list[str]) -> str:
    records = [
        [case, cls.name] + [flat(value["classes"][cls.name]).get(k) for k in keys]
        for case, value in sorted(scored.items())
        for cls in options.classes
    ]
    return figures.csv_text(["case", "class", *keys], records)


def _number(value) -> str:
    return f"{value:.6g}" if defined(value) else "—"


def _plots(options: Options, scored: dict[str, dict], keys: list[str]) -> str:
    """A box plot per key, one box per class (inline SVG: the report costs no figure render)."""
    names = [c.name for c in options.classes]
    boxes = [
        charts.boxes(key, names, [[flat(value["classes"][n]).get(key) for value in scored.values()] for n in names])
        for key in keys
    ]
    return charts.row(boxes, "box plots of the metrics per class")


def html_report(options: Options, scored: dict[str, dict], failed: dict[str, str], summary: dict, keys: list[str], score) -> str:
    parts = [
        f"<h1>Segmentation evaluation</h1><p>{len(scored)} case(s) scored, {len(failed)} failed. Ranking: "
        f"{html.escape(options.ranking)} ({options.ranking_statistic} over cases, mean over classes) = {_number(score)}"
        + ("" if options.kind(options.ranking).higher_is_better else " (negated: lower is better for this metric)")
        + ".</p>",
        "<p>Definitions chosen: "
        + ", ".join(f"{html.escape(f)}: {html.escape(d)}" for f, d in options.definitions.items())
        + " (the source of every value: metrics.json reference.definitions)</p>",
    ]
    header = ["class", "key", *options.statistics, "n", "undefined"]
    body = [
        [html.escape(cls), html.escape(key)]
        + [_number(row[s]) for s in options.statistics]
        + [str(row["n"]), str(row["n_undefined"])]
        for cls, table in summary["classes"].items()
        for key, row in table.items()
    ]
    parts += ["<h2>Statistics per class</h2>", figures.table(header, body)]
    if scored:
        scores = [k for k in keys if options.kind(k).plotted]  # not counts and sizes
        if scores:
            parts += ["<h2>Per class</h2>", _plots(options, scored, scores[:MAX_PLOTS])]
    rows = [
        [html.escape(case), html.escape(cls.name)] + [_number(flat(value["classes"][cls.name]).get(k)) for k in keys]
        for case, value in sorted(scored.items())
        for cls in options.classes
    ]
    parts += ["<h2>Cases</h2>", figures.table(["case", "class", *map(html.escape, keys)], rows)]
    if failed:
        parts += [
            "<h2>Failed cases</h2>",
            figures.table(["case", "message"], [[html.escape(c), html.escape(m)] for c, m in sorted(failed.items())]),
        ]
    return figures.page("Segmentation evaluation", "\n".join(parts), STYLE)
