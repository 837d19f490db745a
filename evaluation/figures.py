"""The report helpers every human-facing output shares: matplotlib without a display, PNG
bytes, self-contained HTML (images inline, so a report is one file a platform can show), and
CSV cells as pandas writes them (the references' tables are pandas ``to_csv`` output)."""

import base64
import html
import io
import math

from evaluation import machine


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display in a container); imported on first
    use, so a run that writes no plot never pays for matplotlib. Every text is plain: names a
    participant chose (``$\\frac{1}{$``) are never parsed as mathtext markup."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def png(figure, dpi: int | None = None) -> bytes:
    """The figure as PNG bytes, then closed. Without ``dpi``, large figures get a lower
    resolution to bound memory. No 'Software' metadata, so the bytes depend on the data only."""
    if dpi is None:
        width, height = figure.get_size_inches()
        dpi = 110 if width * height < 200 else 80
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(figure)
    return buffer.getvalue()


PARALLEL_FROM = 8  # figures: fewer are drawn in this process (a fork costs more than a few figures)


def render(jobs: dict[str, tuple]) -> dict[str, bytes]:
    """``{key: draw(*args)}`` for ``jobs = {key: (draw, *args)}``, PNG-drawing functions of
    module level: in forked processes, one per CPU, when there are many (matplotlib draws a
    figure in 40 to 70 ms, whatever its size: sixteen models' 480 plots took 38 s in one)."""
    if len(jobs) < PARALLEL_FROM or machine.cpu_count() < 2:
        return {key: job[0](*job[1:]) for key, job in jobs.items()}
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(min(machine.cpu_count(), len(jobs))) as pool:
        drawn = pool.starmap(_draw, jobs.values(), chunksize=max(1, len(jobs) // (4 * machine.cpu_count())))
    return dict(zip(jobs, drawn))


def _draw(draw, *args) -> bytes:
    return draw(*args)


def box_statistics(values: list[float]) -> dict:
    """A box plot's numbers as matplotlib's ``boxplot`` draws them (``cbook.boxplot_stats``,
    whis=1.5): the quartiles by linear interpolation, whiskers at the farthest values within
    1.5 interquartile ranges of the box, the values beyond them as fliers."""
    import numpy as np

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


def svg_box_plots(panels: list[tuple[str, list[str], list[list[float]]]], alt: str) -> str:
    """Box plots as inline SVG, one panel per (title, box names, values per box): drawn in
    microseconds by the browser, where a matplotlib figure of them took most of a run."""
    drawn = "".join(_svg_panel(title, names, series) for title, names, series in panels)
    return f'<div role="img" aria-label="{html.escape(alt)}" style="display:flex;flex-wrap:wrap;gap:8px">{drawn}</div>'


_PANEL_HEIGHT, _TOP, _BOTTOM, _LEFT = 190, 22, 44, 52


def _svg_panel(title: str, names: list[str], series: list[list[float]]) -> str:
    width = max(240, _LEFT + 44 * len(names) + 10)
    values = [v for s in series for v in s]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if high == low:
        low, high = low - 0.5, high + 0.5
    plot_height = _PANEL_HEIGHT - _TOP - _BOTTOM
    y = lambda v: _TOP + plot_height * (high - v) / (high - low)  # noqa: E731
    step = (width - _LEFT - 10) / max(len(names), 1)
    parts = [
        f'<text x="{width / 2:.1f}" y="14" text-anchor="middle" font-size="12">{html.escape(title)}</text>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_height}" stroke="#444"/>',
    ]
    for tick in (low, (low + high) / 2, high):
        parts.append(
            f'<text x="{_LEFT - 4}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="10">{tick:.4g}</text>'
            f'<line x1="{_LEFT}" y1="{y(tick):.1f}" x2="{width - 10}" y2="{y(tick):.1f}" stroke="#ddd"/>'
        )
    for index, (name, box) in enumerate(zip(names, series)):
        centre = _LEFT + step * (index + 0.5)
        label = html.escape(name)
        parts.append(
            f'<text x="{centre:.1f}" y="{_TOP + plot_height + 14}" text-anchor="end" font-size="10" '
            f'transform="rotate(-30 {centre:.1f} {_TOP + plot_height + 14})">{label}</text>'
        )
        if box:
            parts.append(_svg_box(box_statistics(box), centre, min(step * 0.6, 40), y))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{_PANEL_HEIGHT}" font-family="sans-serif">'
        f"{''.join(parts)}</svg>"
    )


def _svg_box(stats: dict, centre: float, width: float, y) -> str:
    half = width / 2
    left, right = centre - half, centre + half
    whiskers = "".join(
        f'<line x1="{centre:.1f}" y1="{y(a):.1f}" x2="{centre:.1f}" y2="{y(b):.1f}" stroke="#000"/>'
        f'<line x1="{centre - half / 2:.1f}" y1="{y(b):.1f}" x2="{centre + half / 2:.1f}" y2="{y(b):.1f}" stroke="#000"/>'
        for a, b in ((stats["q1"], stats["low"]), (stats["q3"], stats["high"]))
    )
    box = (
        f'<rect x="{left:.1f}" y="{y(stats["q3"]):.1f}" width="{width:.1f}" '
        f'height="{max(y(stats["q1"]) - y(stats["q3"]), 0.5):.1f}" fill="#fff" stroke="#000"/>'
        f'<line x1="{left:.1f}" y1="{y(stats["median"]):.1f}" x2="{right:.1f}" y2="{y(stats["median"]):.1f}" stroke="#e67e22" stroke-width="2"/>'
    )
    fliers = "".join(f'<circle cx="{centre:.1f}" cy="{y(v):.1f}" r="2.5" fill="none" stroke="#000"/>' for v in stats["fliers"])
    return whiskers + box + fliers


def img(png_bytes: bytes, alt: str) -> str:
    """An ``<img>`` with the PNG inline."""
    data = base64.b64encode(png_bytes).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}" style="max-width:100%">'


def table(header: list[str], body: list[list[str]], cls: str = "") -> str:
    """An HTML table; cells are inserted as given (escape text cells before)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    lines = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in line) + "</tr>" for line in body)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>'


def page(title: str, body: str, style: str = "") -> str:
    """A complete HTML document."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>\n'
        f"<style>{style}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def csv_cell(value) -> str:
    """pandas ``to_csv`` formatting: repr for floats, empty for NaN/None, quoted when needed."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = repr(value) if isinstance(value, float) else str(value)
    return f'"{text}"' if any(ch in text for ch in ',"\n') else text


def csv_text(header: list[str], records: list[list]) -> str:
    return "".join(",".join(csv_cell(v) for v in line) + "\n" for line in [header, *records])
