"""The multiclass suite's text report (``report.txt``): what a person reads after a run.

Per model: the overall numbers (per-image and pooled side by side, so the difference between
the two conventions is visible), the class groups, and every class sorted by Dice with the
number of images it occurs in and its zero-Dice share; then, for several models, a comparison
against the baseline. Undefined values (a class in no image) print as ``n/a``. The same text
is also written as ``report.html`` (a ``<pre>`` page) for platforms that show HTML.

nnU-Net writes no report (its ``summary.json`` is JSON only); the layout is this project's.
"""

import html

import numpy as np

from evaluation import figures
from evaluation.suites.multiclass.classwise import Summary
from evaluation.suites.multiclass.inputs import ModelLayout
from evaluation.suites.multiclass.options import Options

NA = "n/a"


def _number(value, digits: int = 4, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return NA
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _percent(value) -> str:
    return NA if value is None or not np.isfinite(value) else f"{100 * value:.1f}"


def _with_delta(value, reference) -> str:
    """'0.6733 (-0.2897)'; no delta where either side is undefined."""
    if not (np.isfinite(value) and np.isfinite(reference)):
        return _number(value)
    return f"{_number(value)} ({_number(value - reference, signed=True)})"


def _table(header: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    """Columns padded to their widest cell; the columns in ``left`` left-aligned, others right."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  " + "  ".join(str(c).ljust(w) if i in left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return [line(header).rstrip(), "  " + "  ".join("-" * w for w in widths), *(line(r).rstrip() for r in rows)]


def _class_label(options: Options, j: int) -> str:
    cid, name = options.class_ids[j], options.class_names[j]
    label = str(cid) if name == str(cid) else f"{cid} {name}"
    return label + " (background)" if cid == options.background and name != "background" else label


def _dice_order(values: np.ndarray, candidates: np.ndarray) -> list[int]:
    """Class indices by descending value, undefined last, ties by class order."""
    keyed = [(np.isnan(values[j]), -np.nan_to_num(values[j]), j) for j in candidates]
    return [j for *_, j in sorted(keyed)]


def overall(options: Options, s: Summary, info: ModelLayout) -> list[str]:
    missing = info.missing
    lines = [
        f"images scored: {s.n_images}" + (f"   without a prediction: {missing}" if missing else ""),
        f"classes: {int(s.foreground.sum())} foreground"
        + (f" (+ background {options.background})" if options.background in options.class_ids else ""),
        "",
    ]
    defined = f"{s.n_fg_defined} of {int(s.foreground.sum())} classes defined"
    rows = [
        ["mean Dice, foreground (headline)", _number(s.fg_dice), _number(s.pooled_fg_dice), defined],
        ["mean IoU, foreground", _number(s.fg_iou), _number(s.pooled_fg_iou), ""],
        [
            "nnU-Net foreground_mean Dice",
            _number(s.fg_dice_plain),
            "",
            "NaN-propagating: some class is in no image" if np.isnan(s.fg_dice_plain) else "",
        ],
    ]
    return lines + _table(["", "per-image", "pooled", ""], rows, left=(0, 3))


def groups(options: Options, s: Summary) -> list[str]:
    if not s.groups:
        return []
    rows = []
    for name, row in s.group_table().items():
        rows.append(
            [
                name,
                str(row["n_classes"]),
                str(row["n_classes_defined"]),
                _number(row["Dice"]),
                _number(row["IoU"]),
                _number(row["pooled_Dice"]),
                _percent(row["zero_dice_ratio_of_valid_images"]),
            ]
        )
    header = ["group", "classes", "defined", "Dice", "IoU", "pooled Dice", "zero-Dice %"]
    return ["Groups (class-first: mean over the group's classes of their per-class means)", *_table(header, rows)]


def classes(options: Options, s: Summary) -> list[str]:
    rows = []
    for j in _dice_order(s.class_dice, np.arange(s.n_classes)):
        rows.append(
            [
                _class_label(options, j),
                _number(s.class_dice[j]),
                _number(s.class_iou[j]),
                _number(s.pooled_dice[j]),
                f"{s.n_in_truth[j]}/{s.n_images}",
                f"{s.n_valid[j]}/{s.n_images}",
                _percent(s.zero_of_valid[j]),
            ]
        )
    header = ["class", "Dice", "IoU", "pooled Dice", "in truth", "defined", "zero-Dice %"]
    note = (
        "Per class, sorted by Dice (mean over the images where the class is defined, i.e. in the truth or the "
        "prediction; zero-Dice % of those images)"
    )
    return [note, *_table(header, rows)]


def comparison(options: Options, summaries: dict[str, Summary], baseline: str) -> list[str]:
    base = summaries[baseline]
    rows = []
    for model, s in summaries.items():
        is_base = model == baseline

        def delta(a, b, is_base=is_base):
            return "" if is_base else _number(a - b, signed=True)

        change = base.class_dice[base.foreground]
        better = int(np.count_nonzero(s.class_dice[s.foreground] > change))
        worse = int(np.count_nonzero(s.class_dice[s.foreground] < change))
        rows.append(
            [
                model + (" (baseline)" if is_base and model != "baseline" else ""),
                str(s.n_images),
                _number(s.fg_dice),
                delta(s.fg_dice, base.fg_dice),
                _number(s.fg_iou),
                delta(s.fg_iou, base.fg_iou),
                _number(s.pooled_fg_dice),
                delta(s.pooled_fg_dice, base.pooled_fg_dice),
                "" if is_base else f"{better}/{worse}",
            ]
        )
    header = ["model", "images", "mean Dice", "delta", "mean IoU", "delta", "pooled Dice", "delta", "classes +/-"]
    lines = [
        f"Model comparison (delta = model - baseline '{baseline}'; positive is better; "
        "'classes +/-' = classes with higher/lower Dice)",
        *_table(header, rows),
    ]
    if base.groups:
        tables = {m: s.group_table() for m, s in summaries.items()}
        group_rows = [
            [
                name,
                *(
                    _number(tables[m][name]["Dice"])
                    if m == baseline
                    else _with_delta(tables[m][name]["Dice"], tables[baseline][name]["Dice"])
                    for m in summaries
                ),
            ]
            for name in tables[baseline]
        ]
        lines += ["", "Group Dice by model (delta to the baseline)", *_table(["group", *summaries], group_rows)]
    others = [m for m in summaries if m != baseline]
    class_rows = []
    for j in _dice_order(base.class_dice, np.arange(base.n_classes)):
        cells = [_class_label(options, j), _number(base.class_dice[j])]
        cells += [_with_delta(summaries[m].class_dice[j], base.class_dice[j]) for m in others]
        class_rows.append(cells)
    lines += [
        "",
        "Per-class Dice by model (delta to the baseline), sorted by the baseline's Dice",
        *_table(["class", baseline, *others], class_rows),
    ]
    return lines


def render(options: Options, summaries: dict[str, Summary], baseline: str | None, layout: dict[str, ModelLayout]) -> str:
    title = "Multi-class segmentation report (nnU-Net v2 convention)"
    lines = [
        title,
        "=" * len(title),
        "Dice and IoU per image and class; a class in neither truth nor prediction is undefined (n/a) in that image.",
        "Per class: mean over the images where it is defined; overall: mean over the foreground classes (class-first).",
        "'pooled' sums the counts over all images before dividing (dataset-level, as MMSegmentation does).",
        "",
    ]
    for model, s in summaries.items():
        heading = f"Model: {model}" if baseline is not None else "Results"
        lines += [heading, "-" * len(heading), *overall(options, s, layout[model]), ""]
        section = groups(options, s)
        lines += [*section, ""] if section else []
        lines += [*classes(options, s), ""]
    if baseline is not None:
        lines += comparison(options, summaries, baseline)
    return "\n".join(lines).rstrip() + "\n"


def as_html(text: str) -> str:
    """The text report as a self-contained page (CodaBench shows ``report.html`` as the
    submission's detailed results)."""
    return figures.page(
        "Multi-class segmentation report", "<pre>" + html.escape(text) + "</pre>", style="body{margin:1.5em}pre{font-size:13px}"
    )
