"""The report helpers every human-facing output shares: matplotlib without a display, PNG
bytes, self-contained HTML (images inline, so a report is one file a platform can show), and
CSV cells as pandas writes them (the references' tables are pandas ``to_csv`` output)."""

import base64
import html
import io
import math


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
