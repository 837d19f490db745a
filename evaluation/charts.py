"""Charts as inline SVG, for the reports a run writes: lines, steps, boxes, violins and bars.

A matplotlib figure costs a run 40 to 70 ms to draw, and its import most of a second; a
report of two models' plots took 4.7 s of a 5.8 s run. An SVG chart is text the browser draws:
building one takes microseconds, it stays sharp at any zoom, and the page still loads nothing
from outside. Each function returns one ``<svg>`` element; ``row`` lays several side by side.
The statistics are matplotlib's: ``box_statistics`` as ``cbook.boxplot_stats`` (whis=1.5), the
violins' densities as ``mlab.GaussianKDE`` with Scott's bandwidth.
"""

import html
import math
from collections.abc import Sequence

import numpy as np

WIDTH, HEIGHT = 420, 250
TOP, BOTTOM, LEFT, RIGHT = 40, 52, 58, 12
LEGEND_MAX_WIDTH = 150
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
EMPTY = "#eee"


def row(charts: Sequence[str], label: str) -> str:
    """Charts side by side, wrapping; ``label`` names them for a screen reader."""
    return (
        f'<div role="img" aria-label="{html.escape(label)}" style="display:flex;flex-wrap:wrap;gap:8px">{"".join(charts)}</div>'
    )


def box_statistics(values: Sequence[float]) -> dict:
    """A box plot's numbers as matplotlib's ``boxplot`` draws them (``cbook.boxplot_stats``,
    whis=1.5): the quartiles by linear interpolation, whiskers at the farthest values within
    1.5 interquartile ranges of the box, the values beyond them as fliers."""
    data = np.sort(np.asarray(values, np.float64))
    q1, median, q3 = (float(q) for q in np.percentile(data, [25, 50, 75]))
    reach = 1.5 * (q3 - q1)
    inside = data[(data >= q1 - reach) & (data <= q3 + reach)]
    low, high = float(inside.min()), float(inside.max())
    return {
        "q1": q1,
        "median": median,
        "q3": q3,
        "low": low,
        "high": high,
        "fliers": [float(v) for v in data if v < low or v > high],
    }


def density(values: Sequence[float], points: np.ndarray) -> np.ndarray:
    """Gaussian kernel density at ``points``, Scott's bandwidth (``mlab.GaussianKDE``)."""
    data = np.asarray(values, np.float64)
    width = np.std(data, ddof=1) * data.size ** (-1 / 5)
    spread = (points[:, None] - data[None, :]) / width
    return np.exp(-0.5 * spread**2).sum(axis=1) / (data.size * width * math.sqrt(2 * math.pi))


class _Frame:
    """One chart's axes: the plotting area, the y (and x) scales, the SVG parts so far."""

    def __init__(self, title: str, y_label: str, y_range: tuple[float, float], width: int = WIDTH, legend: Sequence[str] = ()):
        low, high = y_range if y_range[1] > y_range[0] else (y_range[0] - 0.5, y_range[0] + 0.5)
        self.width, self.low, self.high = width, low, high
        self.right = width - RIGHT - _legend_width(legend)  # the legend inside the width: charts in a row align
        self.bottom = HEIGHT - BOTTOM
        self.parts = [
            _title(title, width),
            f'<text transform="translate(12 {(TOP + self.bottom) / 2:.1f}) rotate(-90)" text-anchor="middle" '
            f'font-size="10">{html.escape(y_label)}</text>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{self.bottom}" stroke="#444"/>',
            f'<line x1="{LEFT}" y1="{self.bottom}" x2="{self.right}" y2="{self.bottom}" stroke="#444"/>',
        ]
        for tick in _ticks(low, high):
            self.parts.append(
                f'<text x="{LEFT - 4}" y="{self.y(tick) + 3:.1f}" text-anchor="end" font-size="9">{tick:.4g}</text>'
                f'<line x1="{LEFT}" y1="{self.y(tick):.1f}" x2="{self.right}" y2="{self.y(tick):.1f}" stroke="{EMPTY}"/>'
            )

    def y(self, value: float) -> float:
        return self.bottom - (self.bottom - TOP) * (value - self.low) / (self.high - self.low)

    def slots(self, n: int) -> list[float]:
        step = (self.right - LEFT) / max(n, 1)
        return [LEFT + step * (i + 0.5) for i in range(n)]

    def x_labels(self, positions: Sequence[float], labels: Sequence[str], x_label: str = "") -> None:
        slanted = max((len(label) for label in labels), default=0) * len(labels) * 6 > self.right - LEFT
        for x, label in zip(positions, labels):
            turn = f' transform="rotate(-30 {x:.1f} {self.bottom + 13})"' if slanted else ""
            anchor = "end" if slanted else "middle"
            self.parts.append(
                f'<text x="{x:.1f}" y="{self.bottom + 13}" text-anchor="{anchor}" font-size="9"{turn}>{html.escape(label)}</text>'
            )
        if x_label:
            self.parts.append(
                f'<text x="{(LEFT + self.right) / 2:.1f}" y="{HEIGHT - 4}" text-anchor="middle" font-size="10">{html.escape(x_label)}</text>'
            )

    def legend(self, entries: Sequence[tuple[str, str, bool]]) -> None:
        """(label, colour, dashed) of each series, right of the plotting area."""
        for i, (label, colour, dashed) in enumerate(entries):
            y = TOP + 4 + 14 * i
            dash = ' stroke-dasharray="4 3"' if dashed else ""
            self.parts.append(
                f'<line x1="{self.right + 8}" y1="{y}" x2="{self.right + 26}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>'
                f'<text x="{self.right + 30}" y="{y + 3}" font-size="9">{html.escape(_cut(label))}</text>'
            )

    def svg(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{HEIGHT}" '
            f'viewBox="0 0 {self.width} {HEIGHT}" style="max-width:100%;height:auto" font-family="sans-serif">'
            f"{''.join(self.parts)}</svg>"
        )


def _legend(series: Sequence[tuple]) -> list[str]:
    """The labels a legend lists: none for a single series."""
    return [label for label, *_ in series] if len(series) > 1 else []


def _cut(label: str) -> str:
    """A legend label within ``LEGEND_MAX_WIDTH``."""
    room = (LEGEND_MAX_WIDTH - 36) // 5
    return label if len(label) <= room else label[: room - 1] + "…"


def _legend_width(labels: Sequence[str]) -> int:
    """Room for a legend right of the plotting area: its longest label (9 px type, about 5 px a
    character), at most ``LEGEND_MAX_WIDTH`` (longer labels are cut there)."""
    return min(LEGEND_MAX_WIDTH, 36 + 5 * max(map(len, labels))) if labels else 0


def _title(text: str, width: int) -> str:
    """The title centred above the chart, on two lines when one would not fit its width."""
    lines = [text]
    if len(text) * 6.5 > width and " " in text:
        cut = min((i for i, c in enumerate(text) if c == " "), key=lambda i: abs(i - len(text) / 2))
        lines = [text[:cut], text[cut + 1 :]]
    size = 12 if max(len(line) for line in lines) * 6.5 <= width else 10
    spans = "".join(
        f'<tspan x="{width / 2:.1f}" dy="{0 if i == 0 else size + 1}">{html.escape(line)}</tspan>' for i, line in enumerate(lines)
    )
    return f'<text y="{16 - 6 * (len(lines) - 1)}" text-anchor="middle" font-size="{size}">{spans}</text>'


def _ticks(low: float, high: float) -> list[float]:
    """About five round values spanning [low, high]."""
    step = 10 ** math.floor(math.log10((high - low) / 4))
    step *= next(m for m in (1, 2, 5, 10) if (high - low) / (step * m) <= 5)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _range(values: Sequence[float], fixed: tuple[float, float] | None) -> tuple[float, float]:
    if fixed is not None:
        return fixed
    return (min(values), max(values)) if values else (0.0, 1.0)


def lines(
    title: str,
    series: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    x_label: str,
    y_label: str,
    x_ticks: Sequence[tuple[float, str]] | None = None,
    step: bool = False,
    log_x: bool = False,
    y_range: tuple[float, float] | None = None,
    dashed: frozenset[str] = frozenset(),
) -> str:
    """One line per (label, xs, ys) (``step``: drawn as steps, matplotlib's ``where='post'``);
    points not finite (or, with ``log_x``, at x <= 0) are left out."""
    kept = []
    for label, xs, ys in series:
        pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if len(_finite([x, y])) == 2 and (not log_x or x > 0)]
        kept.append((label, [(math.log10(x) if log_x else x, y) for x, y in pairs]))
    points = [p for _, pairs in kept for p in pairs]
    frame = _Frame(title, y_label, _range([y for _, y in points], y_range), legend=_legend(kept))
    x_low, x_high = _range([x for x, _ in points], None)
    x_high = x_high if x_high > x_low else x_low + 1
    to_x = lambda x: LEFT + (frame.right - LEFT) * (x - x_low) / (x_high - x_low)  # noqa: E731
    for index, (label, pairs) in enumerate(kept):
        path = []
        for i, (x, y) in enumerate(pairs):
            if step and i:
                path.append(f"H{to_x(x):.1f}")
            path.append(f"{'L' if i else 'M'}{to_x(x):.1f},{frame.y(y):.1f}")
        colour = COLOURS[index % len(COLOURS)]
        dash = ' stroke-dasharray="4 3"' if label in dashed else ""
        frame.parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        frame.parts += [f'<circle cx="{to_x(x):.1f}" cy="{frame.y(y):.1f}" r="2" fill="{colour}"/>' for x, y in pairs if not step]
    if x_ticks is not None:
        shown = [(math.log10(v) if log_x else v, text) for v, text in x_ticks if not log_x or v > 0]
        frame.x_labels(
            [to_x(v) for v, _ in shown if x_low <= v <= x_high], [t for v, t in shown if x_low <= v <= x_high], x_label
        )
    else:
        frame.x_labels([], [], x_label)
    if len(series) > 1:
        frame.legend([(label, COLOURS[i % len(COLOURS)], label in dashed) for i, (label, _) in enumerate(kept)])
    return frame.svg()


def boxes(title: str, labels: Sequence[str], data: Sequence[Sequence[float]], y_label: str = "", x_label: str = "") -> str:
    """A box per label (a label without values keeps its place, empty)."""
    data = [_finite(values) for values in data]
    frame = _Frame(title, y_label, _range([v for values in data for v in values], None), width=max(WIDTH, 60 + 48 * len(labels)))
    positions = frame.slots(len(labels))
    width = min(40.0, (frame.right - LEFT) / max(len(labels), 1) * 0.6)
    for x, values in zip(positions, data):
        if values:
            frame.parts.append(_box(box_statistics(values), x, width, frame.y))
    frame.x_labels(positions, labels, x_label)
    return frame.svg()


def _box(stats: dict, centre: float, width: float, y) -> str:
    half = width / 2
    whiskers = "".join(
        f'<line x1="{centre:.1f}" y1="{y(a):.1f}" x2="{centre:.1f}" y2="{y(b):.1f}" stroke="#000"/>'
        f'<line x1="{centre - half / 2:.1f}" y1="{y(b):.1f}" x2="{centre + half / 2:.1f}" y2="{y(b):.1f}" stroke="#000"/>'
        for a, b in ((stats["q1"], stats["low"]), (stats["q3"], stats["high"]))
    )
    box = (
        f'<rect x="{centre - half:.1f}" y="{y(stats["q3"]):.1f}" width="{width:.1f}" '
        f'height="{max(y(stats["q1"]) - y(stats["q3"]), 0.5):.1f}" fill="#cfe2f3" stroke="#000"/>'
        f'<line x1="{centre - half:.1f}" y1="{y(stats["median"]):.1f}" x2="{centre + half:.1f}" '
        f'y2="{y(stats["median"]):.1f}" stroke="#b45309" stroke-width="2"/>'
    )
    fliers = "".join(f'<circle cx="{centre:.1f}" cy="{y(v):.1f}" r="2.5" fill="none" stroke="#000"/>' for v in stats["fliers"])
    return whiskers + box + fliers


def violins(title: str, labels: Sequence[str], data: Sequence[Sequence[float]], y_label: str = "", x_label: str = "") -> str:
    """A violin per label with its min, mean and max marked; a label whose values are all the
    same is a bar (a density of one value is undefined)."""
    data = [_finite(values) for values in data]
    frame = _Frame(title, y_label, _range([v for values in data for v in values], None), width=max(WIDTH, 60 + 48 * len(labels)))
    positions = frame.slots(len(labels))
    half = min(24.0, (frame.right - LEFT) / max(len(labels), 1) * 0.35)
    for x, values in zip(positions, data):
        if len(set(values)) > 1:
            grid = np.linspace(min(values), max(values), 64)
            shape = density(values, grid)
            shape = half * shape / shape.max()
            outline = [f"{x + w:.1f},{frame.y(v):.1f}" for v, w in zip(grid, shape)]
            outline += [f"{x - w:.1f},{frame.y(v):.1f}" for v, w in zip(grid[::-1], shape[::-1])]
            frame.parts.append(f'<polygon points="{" ".join(outline)}" fill="#9fc5e8" fill-opacity="0.8" stroke="#1f4e79"/>')
            marks = (min(values), float(np.mean(values)), max(values))
        elif values:
            marks = (values[0],)
        else:
            continue
        frame.parts += [
            f'<line x1="{x - half / 2:.1f}" y1="{frame.y(m):.1f}" x2="{x + half / 2:.1f}" y2="{frame.y(m):.1f}" stroke="#1f4e79" stroke-width="2"/>'
            for m in marks
        ]
    frame.x_labels(positions, labels, x_label)
    return frame.svg()


def bars(
    title: str,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float], Sequence[float], Sequence[float]]],
    y_label: str = "",
    x_label: str = "",
) -> str:
    """Grouped bars: per (label, heights, error below, error above) one bar in each group."""
    tops = [h + up for _, heights, _, above in series for h, up in zip(heights, above) if len(_finite([h, up])) == 2]
    frame = _Frame(title, y_label, (min(0.0, *tops) if tops else 0.0, max(tops, default=1.0)), legend=_legend(series))
    positions = frame.slots(len(groups))
    width = (frame.right - LEFT) / max(len(groups), 1) * 0.8 / max(len(series), 1)
    for index, (_, heights, below, above) in enumerate(series):
        colour = COLOURS[index % len(COLOURS)]
        for centre, h, down, up in zip(positions, heights, below, above):
            if not _finite([h]):
                continue
            x = centre + (index - (len(series) - 1) / 2) * width
            top, base = frame.y(max(h, 0.0)), frame.y(min(h, 0.0))
            frame.parts.append(
                f'<rect x="{x - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" height="{max(base - top, 0.5):.1f}" '
                f'fill="{colour}" stroke="#000" stroke-width="0.4"/>'
                f'<line x1="{x:.1f}" y1="{frame.y(h - (down or 0)):.1f}" x2="{x:.1f}" y2="{frame.y(h + (up or 0)):.1f}" stroke="#000"/>'
            )
    frame.x_labels(positions, groups, x_label)
    if len(series) > 1:
        frame.legend([(label, COLOURS[i % len(COLOURS)], False) for i, (label, *_) in enumerate(series)])
    return frame.svg()
