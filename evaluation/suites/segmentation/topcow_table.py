"""The metrics.json TopCoW 2024's pipeline writes from its cases' rows
(CoWBenchmark/TopCoW_Eval_Metrics@25ca839, ``topcow24_eval/base_algorithm.py:
MySegmentationEvaluation.score`` and ``save``, on evalutils 0.4.2's ``score_aggregates``), and
the statistics the suite's own metrics.json takes from the same arithmetic.

* ``case``: the cases' rows as one pandas table (``concat`` of one-row frames): a column per key
  any case has, a case without it NaN; a column of integers only stays integer, any float or
  gap makes it float; ``{column: {"0": value, ...}}`` in the order of the cases.
* ``aggregates``: for every column, pandas' ``describe()`` kept to evalutils' keys with ``%``
  written ``pc`` (``aggregate_series``): numbers give ``count`` (float), ``mean``, ``std``
  (ddof 1), ``min``, ``25pc``, ``50pc``, ``75pc``, ``max``, the NaN cases left out; objects
  (the dicts, the file names) ``count`` and ``freq`` (evalutils asks for ``uniq``, which
  pandas calls ``unique``: it never appears). pandas 2.0's arithmetic: the sum over the column
  with NaN as 0 (numpy's pairwise sum) over the count, the squares of the deviations likewise,
  quantiles as numpy 1.x's linear percentile.
* ``dect_avg`` (``aggregate/aggregate_all_detection_dicts.py``): per group-2 label the TP, FP and
  FN over the cases, precision, recall and F1 (0 where the denominator is 0), and their mean and
  population deviation over the four labels;
* ``graph_var_bal_acc`` and ``topo_var_bal_acc`` (``aggregate_all_graph_dicts.py``,
  ``aggregate_all_topo_dicts.py``): per region, scikit-learn's balanced accuracy of the variant
  strings ``Var_Ant_a_b_c_d`` / ``Var_Pos_...`` (``edge_list_to_variant_str.py``) of the
  truth's and the prediction's graphs, or of the truth's graph against itself where the
  topology matched and ``FAIL`` where it did not: the mean over the truth's variants (sorted)
  of the share of their cases predicted right; a predicted variant the truth never has only
  costs the cases it takes.

The file is written as the reference writes it: ``json.dumps(indent=2, sort_keys=True)``, NaN as
the bare token ``NaN``.
"""

import json
import math

import numpy as np

from evaluation.suites.segmentation.topcow import GROUP2, LABELS, percentile

STATISTICS = ("count", "mean", "std", "min", "25pc", "50pc", "75pc", "max")


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _numeric(values: list) -> bool:
    return all(_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)


def columns(rows: list[dict]) -> dict[str, list]:
    """Column -> one value per case (None where the case has no such key), the columns in the
    order they first appear."""
    names = dict.fromkeys(key for row in rows for key in row)
    return {name: [row.get(name) for row in rows] for name in names}


def case_values(values: list) -> list:
    """A column as its pandas dtype writes it: integers stay integers unless a float or a gap
    makes the column float (a gap is NaN)."""
    if not _numeric(values):
        return [math.nan if _missing(v) else v for v in values]
    if any(_missing(v) or isinstance(v, float) for v in values):
        return [math.nan if _missing(v) else float(v) for v in values]
    return [int(v) for v in values]


def describe(values: list) -> dict:
    """pandas' ``describe()`` of a numeric column as evalutils keeps it (``STATISTICS``)."""
    column = np.array([math.nan if _missing(v) else float(v) for v in values], np.float64)
    gaps = np.isnan(column)
    count = int((~gaps).sum())
    filled = np.where(gaps, 0.0, column)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.float64(filled.sum()) / np.float64(count)
        squares = np.where(gaps, 0.0, (mean - filled) ** 2)
        std = math.sqrt(squares.sum() / np.float64(count - 1)) if count > 1 else math.nan
    ordered = np.sort(column[~gaps])
    found = {"count": float(count), "mean": float(mean), "std": std}
    if count == 0:
        return {**found, **dict.fromkeys(("min", "25pc", "50pc", "75pc", "max"), math.nan)}
    return {
        **found,
        "min": float(ordered[0]),
        "25pc": percentile(ordered, 0.25),
        "50pc": percentile(ordered, 0.5),
        "75pc": percentile(ordered, 0.75),
        "max": float(ordered[-1]),
    }


def describe_objects(values: list) -> dict:
    """``describe()`` of an object column: how many cases have a value, and how many share the
    most frequent one (dicts equal by value)."""
    kept = [json.dumps(v, sort_keys=True) for v in values if not _missing(v)]
    counts: dict[str, int] = {}
    for value in kept:
        counts[value] = counts.get(value, 0) + 1
    return {"count": len(kept), "freq": max(counts.values(), default=0)}


def detection_average(detections: list[dict], corrections=()) -> dict:
    """``dect_avg``. With ``topcow_detection_tn``, a rate whose denominator is 0 (a label no
    case has nor predicts: TN everywhere) is NaN and left out of the means, instead of 0."""
    undefined = math.nan if "topcow_detection_tn" in corrections else 0
    tallies = {label: {"TP": 0, "TN": 0, "FP": 0, "FN": 0} for label in GROUP2}
    for detection in detections:
        for label, value in detection.items():
            tallies[int(label)][value["Detection"]] += 1
    found, rates = {}, {"precision": [], "recall": [], "f1_score": []}
    for label in GROUP2:
        tp, fp, fn = (tallies[label][k] for k in ("TP", "FP", "FN"))
        entry = {
            "label": LABELS[label],
            "precision": tp / (tp + fp) if tp + fp else undefined,
            "recall": tp / (tp + fn) if tp + fn else undefined,
            "f1_score": 2 * tp / ((2 * tp) + fp + fn) if tp + fp + fn else undefined,
        }
        found[str(label)] = entry
        for name in rates:
            rates[name].append(entry[name])
    for name, values in rates.items():
        kept = np.array([v for v in values if not _missing(v)], np.float64)
        mean = np.sum(kept) / kept.size if kept.size else math.nan
        std = math.sqrt(np.sum((kept - mean) * (kept - mean)) / kept.size) if kept.size else math.nan
        found[name] = {"mean": float(mean), "std": float(std)}
    return found


def variant(edges: list[int], region: str) -> str:
    """``edge_list_to_variant_str``: ``Var_Ant_1_0_0_1``."""
    return f"Var_{'Ant' if region == 'anterior' else 'Pos'}_" + "_".join(str(e) for e in edges)


def balanced_accuracy(truth: list[str], predicted: list[str]) -> float:
    """scikit-learn's ``balanced_accuracy_score``: the mean, over the truth's classes in sorted
    order (numpy's sum), of the share of their cases predicted as they are."""
    recalls = []
    for name in sorted(set(truth)):
        cases = [i for i, t in enumerate(truth) if t == name]
        recalls.append(sum(1 for i in cases if predicted[i] == name) / len(cases))
    return float(np.mean(np.array(recalls, np.float64)))


def graph_accuracy(graphs: list[dict]) -> dict:
    return {
        region: balanced_accuracy(
            [variant(g[region]["gt_graph"], region) for g in graphs], [variant(g[region]["pred_graph"], region) for g in graphs]
        )
        for region in ("anterior", "posterior")
    }


def topology_accuracy(topologies: list[dict]) -> dict:
    found = {}
    for region in ("anterior", "posterior"):
        truth = [variant(t["gt_topology"][region]["graph"], region) for t in topologies]
        predicted = [name if t["match_verdict"][region] else "FAIL" for name, t in zip(truth, topologies)]
        found[region] = balanced_accuracy(truth, predicted)
    return found


def document(rows: list[dict], corrections=()) -> dict:
    """The reference's metrics.json of these rows (one per case, in its order)."""
    table = columns(rows)
    case = {name: dict(zip(map(str, range(len(rows))), case_values(values))) for name, values in table.items()}
    aggregates = {name: describe(v) if _numeric(v) else describe_objects(v) for name, v in table.items()}
    if rows:
        aggregates["dect_avg"] = detection_average(table["all_detection_dicts"], corrections)
        aggregates["graph_var_bal_acc"] = graph_accuracy(table["all_graph_dicts"])
        aggregates["topo_var_bal_acc"] = topology_accuracy(table["all_topo_dicts"])
    return {"case": case, "aggregates": aggregates}


def document_bytes(found: dict) -> bytes:
    return json.dumps(found, indent=2, sort_keys=True).encode()
