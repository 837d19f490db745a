"""Ranking uncertainty as files: ``ranking.json``, ``ranking.png`` (rank distribution per
submission: a blob plot as in challenge reports — bubble area = share of resamples at that
rank, black dot = median rank, black bar = the rank interval), ``pairwise.png`` (share of
resamples in which the row beats the column) and ``ranking.html``, a self-contained page whose
``<section>`` (``html_section``) can be embedded in a larger report."""

import html
from pathlib import Path

import numpy as np

from evaluation import figures, report

RANKING_JSON, RANKING_PNG, PAIRWISE_PNG, RANKING_HTML = "ranking.json", "ranking.png", "pairwise.png", "ranking.html"
# Area in points^2 of a blob for a share of 1: about one rank step of the figure (0.3 inch) wide.
_BLOB_AREA = 500.0
_ANNOTATE_UP_TO = 20  # submissions: beyond this the pairwise cells are too small for numbers


def _labels(result: dict) -> list[str]:
    return [f"{s['leaderboard_rank']}. {s['submission']}" for s in result["submissions"]]


def rank_plot(result: dict) -> bytes:
    """Blob plot: submissions in leaderboard order along x, rank along y (1 at the top)."""
    subs = result["submissions"]
    level = int(round(result["confidence"] * 100))
    return blob_plot(
        _labels(result),
        [s["rank_frequencies"] for s in subs],
        [s["rank_median"] for s in subs],
        [s["rank_ci"] for s in subs],
        title=f"Rank distribution over {result['resamples']} bootstrap resamples of {result['cases']} cases\n"
        f"dot: median rank, bar: {level} % interval, area and colour: share of resamples",
        xlabel=f"submission (by leaderboard rank on {result['ranking']})",
        ylabel="rank in bootstrap resamples (1 = best)",
        share="share of resamples",
    )


def blob_plot(labels, frequencies, medians, intervals, title: str, xlabel: str, ylabel: str, share: str) -> bytes:
    """challengeR's blob plot (``stabilityByTask``, ``stability.ranked.list``): one column per
    submission, a bubble per rank it takes (area and colour: the share of draws at that rank),
    the median (dot) and the interval (bar); the dotted diagonal is "rank = place"."""
    plt = figures.pyplot()
    n = len(labels)
    figure, axes = plt.subplots(figsize=(max(6.0, 0.38 * n + 2.5), max(4.0, 0.3 * n + 2.0)))
    xs, ys, shares = [], [], []
    for x, found in enumerate(frequencies):
        for rank, frequency in found.items():
            xs.append(x)
            ys.append(float(rank))
            shares.append(frequency)
    shares = np.asarray(shares)
    blobs = axes.scatter(
        xs,
        ys,
        s=shares * _BLOB_AREA,
        c=shares,
        cmap="viridis_r",
        vmin=0,
        vmax=1,
        alpha=0.85,
        edgecolors="#444444",
        linewidths=0.3,
        zorder=2,
    )
    for x, (median, interval) in enumerate(zip(medians, intervals)):
        axes.vlines(x, *interval, color="black", linewidth=1.2, zorder=3)
        axes.plot(x, median, "o", color="black", markersize=3.5, zorder=4)
    top = max([n, *ys])
    axes.plot([-0.5, n - 0.5], [0.5, n + 0.5], color="grey", linewidth=0.6, linestyle=":", zorder=1)
    axes.set_xlim(-0.6, n - 0.4)
    axes.set_ylim(top + 0.6, 0.4)
    axes.set_xticks(range(n), labels, rotation=60 if n > 6 else 0, ha="right" if n > 6 else "center", fontsize=9)
    step = max(1, int(top) // 20)
    axes.set_yticks(range(1, int(top) + 1, step))
    axes.set_ylabel(ylabel)
    axes.set_xlabel(xlabel)
    axes.set_title(title, fontsize=10)
    axes.grid(True, color="#dddddd", linewidth=0.5, zorder=0)
    figure.colorbar(blobs, ax=axes, fraction=0.03, pad=0.02, label=share)
    return figures.png(figure)


def pairwise_plot(result: dict) -> bytes:
    """Heat map: share of resamples in which the row's submission beats the column's."""
    plt = figures.pyplot()
    wins = np.asarray(result["pairwise"]["row_beats_column"])
    n = wins.shape[0]
    size = max(4.5, 0.4 * n + 2.5)
    figure, axes = plt.subplots(figsize=(size + 1.0, size))
    image = axes.imshow(wins, cmap="RdBu", vmin=0, vmax=1)
    labels = _labels(result)
    axes.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    axes.set_yticks(range(n), labels, fontsize=8)
    if n <= _ANNOTATE_UP_TO:
        for i in range(n):
            for j in range(n):
                if i != j:
                    axes.text(
                        j,
                        i,
                        _percent(wins[i, j]),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if abs(wins[i, j] - 0.5) > 0.3 else "black",
                    )
    axes.set_title("Share of resamples in which the row beats the column (ties count half)", fontsize=10)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04)
    return figures.png(figure)


def _percent(share: float) -> str:
    """Whole percent, without rounding a near-certainty up to 100 % or a rare win down to 0 %."""
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{share:.0%}"


def html_section(result: dict, rank_png: bytes, pairwise_png: bytes) -> str:
    """A self-contained ``<section>`` (images inline) for any HTML report."""
    level = int(round(result["confidence"] * 100))
    rows = []
    for s in result["submissions"]:
        best = s["rank_frequencies"].get("1", 0.0)
        score = "" if s["leaderboard_score"] is None else f"{s['leaderboard_score']:.6g}"
        rows.append(
            f"<tr><td>{s['leaderboard_rank']}</td><td>{html.escape(s['submission'])}</td><td>{score}</td>"
            f"<td>{s['case_mean']:.6g}</td><td>[{s['case_mean_ci'][0]:.6g}, {s['case_mean_ci'][1]:.6g}]</td>"
            f"<td>{s['rank_median']:g}</td><td>[{s['rank_ci'][0]}, {s['rank_ci'][1]}]</td><td>{best:.1%}</td></tr>"
        )
    return f"""<section id="ranking-uncertainty">
<h2>Ranking uncertainty</h2>
<p>Bootstrap over the {result["cases"]} cases: {result["resamples"]} resamples (seed {result["seed"]}); in each, a submission
scores the mean of its case scores ({html.escape(result["ranking"])}, {"higher" if result["higher_is_better"] else "lower"}
is better) and the submissions are ranked. Ties share the better rank and count half a win.
Intervals are {level} % percentile intervals.</p>
<table>
<thead><tr><th>leaderboard rank</th><th>submission</th><th>leaderboard score</th><th>case mean</th>
<th>{level} % interval</th><th>median rank</th><th>{level} % rank interval</th><th>ranked first</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
<figure>{figures.img(rank_png, "rank distribution per submission")}<figcaption>Rank distribution per submission.</figcaption></figure>
<figure>{figures.img(pairwise_png, "pairwise comparison")}<figcaption>Share of resamples in which the row beats the column.</figcaption></figure>
</section>"""


PAGE_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:80em} table{border-collapse:collapse} "
    "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right} "
    "td:nth-child(2),th:nth-child(2){text-align:left} figure{margin:2em 0}"
)


def write(output: Path, result: dict) -> list[Path]:
    """Write the four files into ``output``; returns their paths."""
    rank_png, pairwise_png = rank_plot(result), pairwise_plot(result)
    files = {
        RANKING_JSON: report.json_bytes(result, listing_infinities=True),
        RANKING_PNG: rank_png,
        PAIRWISE_PNG: pairwise_png,
        RANKING_HTML: figures.page("Ranking uncertainty", html_section(result, rank_png, pairwise_png), PAGE_STYLE).encode(),
    }
    for name, content in files.items():
        report.write_atomic(output / name, content)
    return [output / name for name in files]
