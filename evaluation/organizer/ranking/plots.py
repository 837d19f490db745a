"""The figures challengeR's report draws (``podium.R``, ``rankingHeatmap.R``,
``significanceMap.R``, ``stability.R``, ``violin.R``, ``methodsplot.R``), in matplotlib: PNG
bytes, readable without R or LaTeX. Algorithms keep one colour in every figure and appear in
the final order; rank 1 is at the top of every rank axis."""

import numpy as np

from evaluation import figures
from evaluation.organizer.ranking.final import FinalRanking, TaskResult
from evaluation.organizer.ranking.uncertainty_report import blob_plot

PODIUM_PLACES = 15  # algorithms on a podium plot: beyond, the places are too narrow to read
LEGEND_UP_TO = 20


def colours(n: int) -> list:
    cmap = figures.pyplot().get_cmap("tab20" if n > 10 else "tab10")
    return [cmap(i % cmap.N) for i in range(n)]


def task_order(result: TaskResult) -> list[int]:
    rank, names = result.official.rank, result.task.algorithms
    return sorted(range(len(names)), key=lambda i: (rank[i], names[i]))


def _rank_labels(result: TaskResult, order: list[int]) -> list[str]:
    return [f"{result.official.rank[i]:g}. {result.task.algorithms[i]}" for i in order]


def podium(result: TaskResult) -> bytes:
    """Per case, every algorithm's value placed on the podium step of its rank in that case
    (within a step, algorithms in final order), the case's values joined by a line; below,
    how often each algorithm took each step. Ties within a case are broken by the final order
    (challengeR: at random). With many algorithms the best ``PODIUM_PLACES`` are shown, ranked
    among themselves."""
    from matplotlib.collections import LineCollection

    plt = figures.pyplot()
    task = result.task
    order = task_order(result)[:PODIUM_PLACES]
    n = len(order)
    values = task.values[order]
    shown = task.present[order] & ~np.isnan(values)
    key = np.where(shown, -values if task.higher_is_better else values, np.inf)
    by_place = np.argsort(key, axis=0, kind="stable")  # rows are in final order: ties keep it
    places = np.empty_like(by_place)
    np.put_along_axis(places, by_place, np.arange(n)[:, None], axis=0)
    x = places * n + np.arange(n)[:, None] + 0.5
    lines = []
    for j in range(values.shape[1]):
        rows = [k for k in by_place[:, j] if shown[k, j]]
        lines.append(np.column_stack([x[rows, j], values[rows, j]]))
    palette = colours(len(task.algorithms))
    width = max(7.0, 0.11 * n * n + 3)
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(width, 6.5), height_ratios=[1, 0.45], sharex=True)
    top.add_collection(LineCollection(lines, colors="#999999", linewidths=0.5, alpha=0.35, zorder=1))
    for k, i in enumerate(order):
        top.scatter(x[k][shown[k]], values[k][shown[k]], s=12, color=palette[i], zorder=2, label=task.algorithms[i])
        bottom.bar(np.arange(n) * n + k + 0.5, np.bincount(places[k][shown[k]], minlength=n), width=0.9, color=palette[i])
    for axes in (top, bottom):
        for boundary in range(n + 1):
            axes.axvline(boundary * n, color="black", linewidth=0.6, linestyle="--")
    bottom.set_xticks(np.arange(n) * n + n / 2, [str(p + 1) for p in range(n)])
    bottom.set_xlim(0, n * n)
    bottom.set_xlabel("podium place (rank within a case)")
    bottom.set_ylabel("cases")
    top.set_ylabel(task.name)
    subset = "" if n == len(task.algorithms) else f", the best {n} algorithms"
    top.set_title(f"Podium: {task.name} ({len(task.cases)} cases{subset})", fontsize=10)
    if n <= LEGEND_UP_TO:
        top.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    return figures.png(figure)


def ranking_heatmap(result: TaskResult) -> bytes:
    """How many cases ranked each algorithm (column, final order) at each rank (row), ties
    "min" (``rankingHeatmap.challenge``)."""
    plt = figures.pyplot()
    order = task_order(result)
    ranks = result.case_ranks[order]
    n, cases = len(order), ranks.shape[1]
    top = int(np.nanmax(ranks)) if np.isfinite(ranks).any() else n
    counts = np.stack([np.bincount(row[~np.isnan(row)].astype(int), minlength=top + 1)[1:] for row in ranks], axis=1)
    size = max(4.5, 0.32 * n + 2.5)
    figure, axes = plt.subplots(figsize=(size + 1.2, size))
    image = axes.imshow(
        counts, cmap="viridis_r", vmin=0, vmax=cases, aspect="auto", origin="upper", extent=(0.5, n + 0.5, top + 0.5, 0.5)
    )
    axes.set_xticks(range(1, n + 1), _rank_labels(result, order), rotation=90, fontsize=8)
    axes.set_yticks(range(1, top + 1, max(1, top // 20)))
    axes.set_ylabel("rank within a case")
    axes.set_title(f"Ranks per case: {result.task.name}", fontsize=10)
    axes.set_xticks(np.arange(1.5, n), minor=True)
    axes.set_yticks(np.arange(1.5, top), minor=True)
    axes.grid(which="minor", color="#cccccc", linewidth=0.3)
    axes.tick_params(which="minor", length=0)
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="cases")
    return figures.png(figure)


def significance_map(result: TaskResult, alpha: float, adjustment: str) -> bytes:
    """Cell (x, y) is yellow when algorithm x is significantly better than algorithm y
    (one-sided paired Wilcoxon, adjusted), blue otherwise; both axes in final order, the
    best bottom left, the ranks along the top (``significanceMap.data.frame``); tie groups
    are marked along the diagonal."""
    plt = figures.pyplot()
    order = task_order(result)
    n = len(order)
    beats = result.significant[np.ix_(order, order)].T.astype(float)
    np.fill_diagonal(beats, np.nan)
    size = max(4.5, 0.32 * n + 2.5)
    figure, axes = plt.subplots(figsize=(size, size))
    cmap = figures.pyplot().get_cmap("cividis", 2).with_extremes(bad="white")
    axes.imshow(np.ma.masked_invalid(beats), cmap=cmap, vmin=0, vmax=1, origin="lower", alpha=0.8)
    labels = [result.task.algorithms[i] for i in order]
    axes.set_xticks(range(n), labels, rotation=90, fontsize=8)
    axes.set_yticks(range(n), labels, fontsize=8)
    axes.plot([-0.5, n - 0.5], [-0.5, n - 0.5], color="black", linewidth=0.8)
    for k, i in enumerate(order):
        axes.text(k, n - 0.3, f"{result.official.rank[i]:g}", ha="center", va="bottom", fontsize=7)
    if result.groups is not None:
        groups = result.groups[order]
        starts = [k for k in range(n) if k == 0 or groups[k] != groups[k - 1]] + [n]
        for start, end in zip(starts, starts[1:]):
            axes.add_patch(
                plt.Rectangle((start - 0.5, start - 0.5), end - start, end - start, fill=False, edgecolor="red", linewidth=1.2)
            )
    axes.set_xlabel("algorithm")
    axes.set_ylabel("algorithm")
    axes.set_title(
        f"Significance: {result.task.name}\nyellow: column better than row (one-sided Wilcoxon, {adjustment}, alpha {alpha:g}); "
        "red: tie groups",
        fontsize=9,
        pad=18,
    )
    return figures.png(figure)


def bootstrap_blobs(result: TaskResult, confidence: float) -> bytes:
    """Blob plot of the bootstrap ranks (``stabilityByTask``)."""
    order = task_order(result)
    summary = result.bootstrap.summary(confidence)
    rows = [summary[i] for i in order]
    level = int(round(confidence * 100))
    return blob_plot(
        _rank_labels(result, order),
        [r["rank_frequencies"] for r in rows],
        [r["median_rank"] for r in rows],
        [r["rank_interval"] for r in rows],
        title=f"{result.task.name}: ranks over {result.bootstrap.ranks.shape[1]} bootstrap resamples\n"
        f"dot: median, bar: {level} % interval, area and colour: share of resamples",
        xlabel="algorithm (final rank on this task)",
        ylabel="rank in bootstrap resamples (1 = best)",
        share="share of resamples",
    )


def task_blobs(final: FinalRanking) -> bytes:
    """Ranks across tasks (``stability.ranked.list``): each algorithm's rank on every task."""
    order = final.order
    ranks = np.array([r.official.rank for r in final.results])
    rows = []
    for i in order:
        values, counts = np.unique(ranks[:, i], return_counts=True)
        rows.append(
            (
                {f"{v:g}": c / len(ranks) for v, c in zip(values, counts)},
                float(np.median(ranks[:, i])),
                np.quantile(ranks[:, i], [0.025, 0.975]),
            )
        )
    return blob_plot(
        [f"{final.rank[i]:g}. {final.algorithms[i]}" for i in order],
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        title=f"Ranks across {len(final.results)} tasks\ndot: median, bar: 95 % interval, area and colour: share of tasks",
        xlabel="algorithm (consensus rank)",
        ylabel="rank on a task (1 = best)",
        share="share of tasks",
    )


def kendall_violins(final: FinalRanking) -> bytes:
    """Kendall's tau of each bootstrap ranking with the full one, per task (``violin``);
    tasks by decreasing median tau."""
    plt = figures.pyplot()
    found = [(r.task.name, r.bootstrap.kendall[~np.isnan(r.bootstrap.kendall)]) for r in final.results if r.bootstrap is not None]
    found = sorted((f for f in found if f[1].size), key=lambda f: -np.median(f[1]))
    figure, axes = plt.subplots(figsize=(max(4.5, 1.1 * len(found) + 2.5), 4.5))
    if found:
        data = [f[1] for f in found]
        parts = axes.violinplot(data, showextrema=False)
        for body in parts["bodies"]:
            body.set_facecolor("#4c72b0")
            body.set_alpha(0.3)
        axes.boxplot(
            data, widths=0.1, showfliers=False, patch_artist=True, boxprops={"facecolor": "white"}, medianprops={"color": "black"}
        )
        axes.set_xticks(range(1, len(found) + 1), [f[0] for f in found], rotation=90 if len(found) > 1 else 0)
        axes.set_ylim(min(0.0, min(float(d.min()) for d in data)) - 0.02, 1.02)
    axes.set_ylabel("Kendall's tau")
    axes.set_title("Agreement of bootstrap rankings with the full ranking", fontsize=10)
    axes.grid(True, axis="y", color="#dddddd", linewidth=0.5)
    return figures.png(figure)


def _lines(axes, x_labels: list[str], ranks: np.ndarray, names, palette, order) -> None:
    """One line per algorithm through its rank at each x (NaN: the method could not rank)."""
    xs = np.arange(len(x_labels))
    for i in order:
        axes.plot(xs, ranks[:, i], marker="o", markersize=3, linewidth=1.5, color=palette[i], label=names[i])
    axes.set_xticks(xs, x_labels, rotation=45, ha="right", fontsize=8)
    top = np.nanmax(ranks) if np.isfinite(ranks).any() else 1
    axes.set_ylim(top + 0.5, 0.5)
    axes.set_ylabel("rank")
    axes.grid(True, color="#eeeeee", linewidth=0.5)


def method_lines(final: FinalRanking) -> bytes:
    """Each algorithm's rank under every compared method (``methodsplot``), one panel per task."""
    plt = figures.pyplot()
    results = final.results
    columns = min(3, len(results))
    rows = -(-len(results) // columns)
    figure, grid = plt.subplots(rows, columns, figsize=(5.0 * columns + 2, 4.2 * rows), squeeze=False)
    palette = colours(len(final.algorithms))
    for axes, result in zip(grid.ravel(), results):
        labels = [f"{result.official.method.label} (official)", *result.compared]
        ranks = np.array(
            [result.official.rank]
            + [r if not isinstance(r, str) else np.full(len(final.algorithms), np.nan) for r in result.compared.values()]
        )
        _lines(axes, labels, ranks, final.algorithms, palette, final.order)
        axes.set_title(result.task.name, fontsize=9)
    for axes in grid.ravel()[len(results) :]:
        axes.set_visible(False)
    legend(figure, grid.ravel()[0], len(final.algorithms))
    figure.suptitle("Ranking across methods", fontsize=10)
    figure.subplots_adjust(hspace=0.75, wspace=0.25)
    return figures.png(figure)


def task_lines(final: FinalRanking) -> bytes:
    """Each algorithm's rank on every task (``lineplot.challenge``)."""
    plt = figures.pyplot()
    figure, axes = plt.subplots(figsize=(max(5.0, 0.9 * len(final.results) + 3), 4.5))
    ranks = np.array([r.official.rank for r in final.results])
    _lines(axes, [r.task.name for r in final.results], ranks, final.algorithms, colours(len(final.algorithms)), final.order)
    legend(figure, axes, len(final.algorithms))
    axes.set_title("Ranking across tasks", fontsize=10)
    return figures.png(figure)


def legend(figure, axes, n: int) -> None:
    if n <= LEGEND_UP_TO:
        handles, labels = axes.get_legend_handles_labels()
        figure.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
