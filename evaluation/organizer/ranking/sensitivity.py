"""How much the final ranking depends on whose definition of the metrics is used.

The ``segmentation`` suite computes every metric as panoptica, MetricsReloaded, MONAI or
DeepMind's surface-distance computes it, and each has its own rule for empty masks
(docs/suites/segmentation.md). ``python -m evaluation sensitivity`` re-scores the same
predictions under each definition and each empty-mask policy (``final_ranking.sensitivity``:
``definition`` set, per-family ``definitions`` cleared, ``empty_masks`` set; every other option
as the phase has it; DeepMind, which has no instance evaluation, keeps the phase's instance
definition or panoptica's), ranks every variant with the phase's final ranking (without the
bootstrap) and shows which places flip against the phase as configured: per variant the
submissions whose rank changed, the pairs whose order reversed and Kendall's tau.
"""

import dataclasses
import html
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import figures, log, report
from evaluation import phase as phases
from evaluation.errors import GraderError, PhaseError
from evaluation.organizer.ranking import config, data, final, r_numerics
from evaluation.organizer.ranking.plots import colours, legend
from evaluation.organizer.ranking.uncertainty_report import PAGE_STYLE

_log = log.get(__name__)
REFERENCE = "phase"
SENSITIVITY_JSON, SENSITIVITY_CSV, SENSITIVITY_PNG, SENSITIVITY_HTML = (
    "sensitivity.json",
    "sensitivity.csv",
    "sensitivity.png",
    "sensitivity.html",
)


@dataclass(frozen=True)
class Variant:
    label: str
    folder: str
    overrides: dict


def variants(phase: phases.Phase, spec: config.Spec) -> list[Variant]:
    """The phase as configured, then every (definition, empty-mask policy) of the spec."""
    if phase.suite != "segmentation":
        raise PhaseError(f"metric-definition sensitivity needs the segmentation suite, not {phase.suite!r}")
    instances = (phase.option("definitions") or {}).get("instances")
    instances = instances if instances not in (None, "deepmind") else "panoptica"
    found = [Variant("as configured", REFERENCE, {})]
    for library in spec.sensitivity["definitions"]:
        definitions = {"instances": instances} if library == "deepmind" and phase.option("instance_metrics") else {}
        for empty in spec.sensitivity["empty_masks"]:
            label = library if empty == "definition" else f"{library}, empty masks null"
            overrides = {"definition": library, "definitions": definitions, "empty_masks": empty}
            found.append(Variant(label, f"{library}-{empty}", overrides))
    return found


def rank_variant(folder: Path, spec: config.Spec) -> final.FinalRanking:
    return final.rank_tasks(data.tasks({"": [folder]}, spec), dataclasses.replace(spec, resamples=0))


def run(phase_folder: Path, submissions: Path, output: Path, scheduler: str | None, workers: int | None) -> dict:
    """Re-score every variant into ``output/<variant>/`` (resumable, as ``rescore``), rank
    each, compare, write the files; returns the comparison."""
    from evaluation.organizer import cluster, rescore

    phase = phases.load(phase_folder)
    spec = config.from_phase(phase)
    chosen = variants(phase, spec)
    client, local = (None, None) if scheduler else cluster.connect(None, workers)
    address = scheduler or local.scheduler_address
    rankings = {}
    try:
        for variant in chosen:
            try:
                rescore.rescore(phase_folder, submissions, output / variant.folder, address, workers, variant.overrides or None)
            except PhaseError as exc:  # this definition cannot score this phase
                rankings[variant.label] = f"not scored: {exc}"
                continue
            try:
                rankings[variant.label] = rank_variant(output / variant.folder, spec)
            except GraderError as exc:
                rankings[variant.label] = f"not ranked: {exc}"
    finally:
        if client is not None:
            client.close()
            local.close()
    result = compare(chosen, rankings)
    write(output, result)
    return result


def compare(chosen: list[Variant], rankings: dict) -> dict:
    """Every variant's final ranks, and what changed against the first (the reference)."""
    reference = rankings[chosen[0].label]
    if isinstance(reference, str):
        raise GraderError(f"the phase as configured could not be ranked: {reference}")
    names = list(reference.algorithms)
    base = reference.rank
    rows = []
    for variant in chosen:
        ranking = rankings[variant.label]
        entry = {"variant": variant.label, "folder": variant.folder, "overrides": variant.overrides}
        if isinstance(ranking, str):
            rows.append({**entry, "error": ranking})
            continue
        where = {a: i for i, a in enumerate(ranking.algorithms)}
        ranks = np.array([ranking.rank[where[a]] if a in where else np.nan for a in names])
        swapped = [
            [names[i], names[j]]
            for i in range(len(names))
            for j in range(len(names))
            if base[i] < base[j] and ranks[i] > ranks[j]
        ]
        rows.append(
            {
                **entry,
                "ranks": {a: None if np.isnan(r) else float(r) for a, r in zip(names, ranks)},
                "changed": [a for a, r, b in zip(names, ranks, base) if r != b],
                "swapped_pairs": swapped,
                "kendall_tau": _tau(ranks, base),
            }
        )
    order = sorted(range(len(names)), key=lambda i: (base[i], names[i]))
    return {"submissions": [names[i] for i in order], "reference": chosen[0].label, "variants": rows}


def _tau(ranks: np.ndarray, base: np.ndarray) -> float | None:
    kept = ~np.isnan(ranks)
    tau = r_numerics.kendall_tau(ranks[kept], base[kept]) if kept.sum() > 1 else np.nan
    return None if np.isnan(tau) else float(tau)


# --------------------------------------------------------------------------------------------
# Files


def plot(result: dict) -> bytes:
    """Each submission's final rank under every variant; a ring marks a changed place."""
    plt = figures.pyplot()
    ranked = [v for v in result["variants"] if "ranks" in v]
    names = result["submissions"]
    figure, axes = plt.subplots(figsize=(max(6.0, 0.9 * len(ranked) + 3), max(4.0, 0.3 * len(names) + 2)))
    palette = colours(len(names))
    xs = np.arange(len(ranked))
    for k, name in enumerate(names):
        ys = [np.nan if v["ranks"][name] is None else v["ranks"][name] for v in ranked]
        axes.plot(xs, ys, marker="o", markersize=4, linewidth=1.5, color=palette[k], label=name)
        flipped = [x for x, v in zip(xs, ranked) if name in v["changed"]]
        axes.scatter(flipped, [ys[x] for x in flipped], s=90, facecolors="none", edgecolors="red", linewidths=1.2, zorder=3)
    axes.set_xticks(xs, [v["variant"] for v in ranked], rotation=45, ha="right", fontsize=8)
    axes.set_ylim(len(names) + 0.5, 0.5)
    axes.set_ylabel("final rank")
    axes.set_title("Final ranking under each metric definition (red ring: place changed)", fontsize=10)
    axes.grid(True, color="#eeeeee", linewidth=0.5)
    legend(figure, axes, len(names))
    return figures.png(figure)


def csv_text(result: dict) -> str:
    ranked = [v for v in result["variants"] if "ranks" in v]
    records = [[name, *(v["ranks"][name] for v in ranked)] for name in result["submissions"]]
    return figures.csv_text(["submission", *(v["variant"] for v in ranked)], records)


def html_section(result: dict, png: bytes) -> str:
    rows = []
    for v in result["variants"]:
        if "error" in v:
            rows.append([html.escape(v["variant"]), "", "", html.escape(v["error"])])
            continue
        tau = "" if v["kendall_tau"] is None else f"{v['kendall_tau']:.3f}"
        changed = ", ".join(html.escape(a) for a in v["changed"]) or "none"
        rows.append([html.escape(v["variant"]), tau, str(len(v["swapped_pairs"])), changed])
    table = figures.table(["definition", "Kendall's tau with the phase", "pairs reversed", "places changed"], rows)
    return (
        '<section id="definition-sensitivity"><h2>Sensitivity to the metric definition</h2>'
        "<p>The same predictions re-scored under each library's definition and empty-mask rule, ranked by the "
        "phase's final ranking, compared with the phase as configured.</p>"
        f"{table}<figure>{figures.img(png, 'ranks per definition')}<figcaption>Final rank per definition.</figcaption></figure></section>"
    )


def write(output: Path, result: dict) -> list[Path]:
    png = plot(result)
    files = {
        SENSITIVITY_JSON: report.json_bytes(result, listing_infinities=True),
        SENSITIVITY_CSV: csv_text(result).encode(),
        SENSITIVITY_PNG: png,
        SENSITIVITY_HTML: figures.page("Ranking sensitivity", html_section(result, png), PAGE_STYLE).encode(),
    }
    for name, content in files.items():
        report.write_atomic(output / name, content)
    return [output / name for name in files]
