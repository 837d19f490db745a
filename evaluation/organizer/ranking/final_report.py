"""The final ranking as files: ``final_ranking.json``, ``leaderboard.csv`` (the final order with
tie groups), one PNG per figure and ``final_ranking.html``, a self-contained page (images
inline) in the style of ``ranking.html``, into which the leaderboard-uncertainty section can be
embedded."""

import html
import re
from pathlib import Path

import numpy as np

from evaluation import figures, report
from evaluation.organizer.ranking import final as finals
from evaluation.organizer.ranking import plots
from evaluation.organizer.ranking.uncertainty_report import PAGE_STYLE

FINAL_JSON, LEADERBOARD_CSV, FINAL_HTML = "final_ranking.json", "leaderboard.csv", "final_ranking.html"


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "task"


def leaderboard_csv(final: finals.FinalRanking) -> str:
    """One row per submission in final order: rank, tie group, then per task the aggregate
    and rank, the consensus (several tasks) and, for one task, the bootstrap rank summary."""
    header = ["rank", "group", "submission"]
    for result in final.results:
        header += [f"{result.task.name} {_aggregate_name(result)}", f"{result.task.name} rank"]
    if final.consensus is not None:
        header.append("consensus")
    single = final.results[0].bootstrap if len(final.results) == 1 else None
    if single is not None:
        header += ["bootstrap median rank", "bootstrap rank low", "bootstrap rank high", "ranked first"]
        summary = single.summary(final.spec.confidence)
    records = []
    for i in final.order:
        row = [_number(final.rank[i]), None if final.groups is None else int(final.groups[i]), final.algorithms[i]]
        for result in final.results:
            row += [float(result.official.aggregate[i]), _number(result.official.rank[i])]
        if final.consensus is not None:
            row.append(float(final.consensus[i]))
        if single is not None:
            low, high = summary[i]["rank_interval"]
            row += [_number(summary[i]["median_rank"]), _number(low), _number(high), summary[i]["ranked_first"]]
        records.append(row)
    return figures.csv_text(header, records)


def _number(value) -> int | float:
    """A rank as written: 3, or 2.5 for an averaged tie."""
    return int(value) if float(value).is_integer() else float(value)


def _aggregate_name(result: finals.TaskResult) -> str:
    method = result.official.method
    if method.kind == "test_then_rank":
        return "share beaten"
    return f"{method.statistic}" if method.kind == "aggregate_then_rank" else f"{method.statistic} rank"


def _describe(final: finals.FinalRanking) -> str:
    spec = final.spec
    method = spec.method
    if method.kind == "test_then_rank":
        how = (
            "test-then-rank: every ordered pair of submissions compared by a one-sided paired Wilcoxon signed-rank test "
            f"(p-values {method.p_adjust}-adjusted, significant at alpha {method.alpha:g}); ranked by the share of "
            "submissions beaten"
        )
    elif method.kind == "aggregate_then_rank":
        how = f"aggregate-then-rank: the {method.statistic} over cases, ranked"
    else:
        how = f"rank-then-aggregate: each case's submissions ranked, the {method.statistic} of those ranks, ranked"
    kept = (  # without na_treat, only rank-then-aggregate accepts missing values (methods._refuse_na)
        "missing values kept (ranked last per case)" if method.kind == "rank_then_aggregate" else "no missing values"
    )
    treat = {None: kept, "na.rm": "missing values removed"}.get(spec.na_treat, f"missing values replaced by {spec.na_treat}")
    tasks = len(final.results)
    across = (
        f" The {tasks} tasks are combined by their consensus: the mean over tasks of each submission's rank (ties averaged)."
        if tasks > 1
        else ""
    )
    return (
        f"<p>Official method: {html.escape(how)}; ties {method.ties}; {html.escape(treat)}.{across} "
        f"Computed as challengeR 1.0.5 computes it. Tie groups: a submission joins the group above unless that group's "
        f"first submission beats it significantly (one-sided paired Wilcoxon, {method.p_adjust}, alpha {method.alpha:g}).</p>"
    )


def _cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.6g}"


def _final_table(final: finals.FinalRanking) -> str:
    header = ["rank", "group", "submission"] + [html.escape(r.task.name) for r in final.results]
    if final.consensus is not None:
        header.append("consensus (mean rank)")
    body = []
    for i in final.order:
        row = [f"{final.rank[i]:g}", "" if final.groups is None else str(final.groups[i]), html.escape(final.algorithms[i])]
        row += [f"{r.official.rank[i]:g} ({_cell(float(r.official.aggregate[i]))})" for r in final.results]
        if final.consensus is not None:
            row.append(_cell(float(final.consensus[i])))
        body.append(row)
    return figures.table(header, body)


def _task_table(result: finals.TaskResult, confidence: float) -> str:
    order = plots.task_order(result)
    header = ["rank", "group", "submission", html.escape(_aggregate_name(result))]
    summary = result.bootstrap.summary(confidence) if result.bootstrap is not None else None
    if summary is not None:
        level = int(round(confidence * 100))
        header += ["median bootstrap rank", f"{level} % rank interval", "ranked first"]
    body = []
    for i in order:
        row = [
            f"{result.official.rank[i]:g}",
            "" if result.groups is None else str(result.groups[i]),
            html.escape(result.task.algorithms[i]),
            _cell(float(result.official.aggregate[i])),
        ]
        if summary is not None:
            low, high = summary[i]["rank_interval"]
            row += [f"{summary[i]['median_rank']:g}", f"[{low:g}, {high:g}]", f"{summary[i]['ranked_first']:.1%}"]
        body.append(row)
    return figures.table(header, body)


def figures_of(final: finals.FinalRanking) -> dict[str, bytes]:
    """File name -> PNG of every figure of the report."""
    spec = final.spec
    found = {}
    for result in final.results:
        name = slug(result.task.name)
        found[f"podium_{name}.png"] = plots.podium(result)
        found[f"rank_heatmap_{name}.png"] = plots.ranking_heatmap(result)
        if result.significant is not None:
            found[f"significance_{name}.png"] = plots.significance_map(result, spec.method.alpha, spec.method.p_adjust)
        if result.bootstrap is not None:
            found[f"bootstrap_blobs_{name}.png"] = plots.bootstrap_blobs(result, spec.confidence)
    if any(r.bootstrap is not None for r in final.results):
        found["kendall_violin.png"] = plots.kendall_violins(final)
    found["methods.png"] = plots.method_lines(final)
    if len(final.results) > 1:
        found["tasks.png"] = plots.task_lines(final)
        found["task_blobs.png"] = plots.task_blobs(final)
    return found


CAPTIONS = {
    "podium": "Podium: each case's values placed on the step of its rank in that case; below, how often each submission took each step.",
    "rank_heatmap": "Ranking heat map: how many cases ranked each submission at each rank.",
    "significance": "Significance map: yellow where the column's submission is significantly better than the row's; red squares: tie groups.",
    "bootstrap_blobs": "Bootstrap ranks: the share of resamples at each rank, the median and the interval.",
    "kendall_violin": "Kendall's tau between each bootstrap ranking and the full ranking.",
    "methods": "Ranks under other ranking methods.",
    "tasks": "Ranks across tasks.",
    "task_blobs": "Ranks across tasks: the share of tasks at each rank.",
}


def _figure(name: str, png: bytes) -> str:
    caption = next(text for key, text in CAPTIONS.items() if name.startswith(key))
    return f"<figure>{figures.img(png, caption)}<figcaption>{html.escape(caption)}</figcaption></figure>"


def html_section(final: finals.FinalRanking, pngs: dict[str, bytes]) -> str:
    parts = ['<section id="final-ranking">', "<h2>Final ranking</h2>", _describe(final), _final_table(final)]
    for result in final.results:
        name = slug(result.task.name)
        direction = "higher" if result.task.higher_is_better else "lower"
        parts.append(f"<h3>{html.escape(result.task.name)}</h3>")
        parts.append(
            f"<p>{len(result.task.cases)} cases; {direction} is better.{' '.join(html.escape(n) for n in result.notes)}</p>"
        )
        parts.append(_task_table(result, final.spec.confidence))
        for prefix in ("podium", "rank_heatmap", "significance", "bootstrap_blobs"):
            key = f"{prefix}_{name}.png"
            if key in pngs:
                parts.append(_figure(key, pngs[key]))
    parts.append("<h3>Stability</h3>")
    for key in ("kendall_violin.png", "methods.png", "tasks.png", "task_blobs.png"):
        if key in pngs:
            parts.append(_figure(key, pngs[key]))
    parts.append("</section>")
    return "\n".join(parts)


def write(output: Path, final: finals.FinalRanking, extra_sections: tuple[str, ...] = ()) -> list[Path]:
    """Write the JSON, the CSV, the PNGs and the page; returns their paths."""
    pngs = figures_of(final)
    body = html_section(final, pngs) + "".join(extra_sections)
    files = {
        FINAL_JSON: report.json_bytes(finals.to_dict(final), listing_infinities=True),
        LEADERBOARD_CSV: leaderboard_csv(final).encode(),
        **pngs,
        FINAL_HTML: figures.page("Final ranking", body, PAGE_STYLE).encode(),
    }
    for name, content in files.items():
        report.write_atomic(output / name, content)
    return [output / name for name in files]
