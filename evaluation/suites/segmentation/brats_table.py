"""BraTS_evaluation 0.0.10's output table (``brats_evaluation/metrics_parser.py``): one row per
subject from panoptica's per-group results, penalty rows for missing subjects, then the mean,
standard deviation and median rows pandas appends.

``seg`` (``parse_seg_results``, every task but metastases) copies panoptica's detection
counts, global and lesion-wise values per region, an infinite global HD95 becoming 373 (the
diagonal of the SRI atlas, in mm). ``mets`` (``parse_mets_results``) re-derives lesion-wise
values from the reference instances: lesions at least ``volume_threshold`` large are scored
(an unmatched one counting Dice 0, NSD 0, HD95 373), smaller ones only detected (a match
with Dice at least ``overlap_threshold``), and every unmatched prediction is a false positive
of both sizes.

The quirks that move numbers, reproduced unless corrected (``corrections``):

* ``brats_failed_cases``: a subject whose evaluation raises (a label no group defines) is
  printed and left out of the table (``parse_seg_results``: ``if "error" in subject_data:
  continue``): it neither counts nor is penalised. Corrected, it gets a missing subject's row.
* ``brats_missing_rows``: a missing subject's row (``_handle_missing_data``) is 0 everywhere
  but 373 for HD95 means: 0 missed lesions, 0 false positives, recall 0 of nothing. Corrected,
  the subject is scored as an empty prediction.
* ``brats_lesionwise_inf``: panoptica's zero-TP rule makes ``sq_hd95`` infinite where nothing
  matched; the parser copies it as it is (only the global HD95 becomes 373), so the mean row
  of ``lesionwise_hd95_mean`` is infinite (and its std NaN) as soon as one subject has no
  match. Corrected, it becomes 373 as the global one does.
* ``brats_mets_fp_by_size`` (``mets``): false positives are not split by size (panoptica
  0.0.10 gives no volumes of unmatched predictions), so every false positive penalises both
  the large-lesion means and F1 and the small-lesion F1. Corrected, each unmatched prediction
  counts for its own size class.
"""

import math

import numpy as np

from evaluation import figures
from evaluation.suites.segmentation.keys import ERROR, FIELD, SCORE

PENALTY_HD95 = 373  # metrics_parser.py: the diameter of the SRI cube, in mm
# parse_seg_results' fields, in its order: (field, panoptica's result key, kind)
SEG_FIELDS = (
    ("all_instance_tp", "tp", FIELD),
    ("all_instance_fp", "fp", FIELD),
    ("all_instance_fn", "fn", FIELD),
    ("all_instance_prec", "prec", SCORE),
    ("all_instance_rec", "rec", SCORE),
    ("all_instance_f1", "rq", SCORE),
    ("global_dsc", "global_bin_dsc", SCORE),
    ("global_nsd", "global_bin_nsd", SCORE),
    ("global_hd95", "global_bin_hd95", ERROR),
    ("lesionwise_dsc_mean", "sq_dsc", SCORE),
    ("lesionwise_dsc_std", "sq_dsc_std", FIELD),
    ("lesionwise_nsd_mean", "sq_nsd", SCORE),
    ("lesionwise_nsd_std", "sq_nsd_std", FIELD),
    ("lesionwise_hd95_mean", "sq_hd95", ERROR),
    ("lesionwise_hd95_std", "sq_hd95_std", FIELD),
)
SEG_TABLE = tuple((field, kind) for field, _, kind in SEG_FIELDS)


def _detection_fields(prefix: str, order=("tp", "fp", "fn", "prec", "rec", "f1")) -> tuple:
    return tuple((f"{prefix}_{k}", FIELD if k in ("tp", "fp", "fn") else SCORE) for k in order)


# parse_mets_results' lesion-wise fields: parse_seg_results' in its own order (Dice, HD95, NSD)
LESIONWISE = tuple(sorted(SEG_TABLE[9:], key=lambda field: ("dsc", "hd95", "nsd").index(field[0].split("_")[1])))
# parse_mets_results' fields, in its order
METS_TABLE = (
    *SEG_TABLE[:6],
    *_detection_fields("large_instance"),
    *LESIONWISE,
    *_detection_fields("small_instance", ("tp", "fn", "fp", "prec", "rec", "f1")),
    *SEG_TABLE[6:9],
)
NAN = float("nan")


def _number(value):
    """A cell as pandas holds it: None and NaN are NaN, numbers float."""
    return NAN if value is None else float(value)


def _global_hd95(value):
    return PENALTY_HD95 if value is not None and math.isinf(value) else value


def seg_fields(result: dict, corrections=()) -> dict:
    """``parse_seg_results`` for one region: table field -> value."""
    out = {}
    for field, key, _ in SEG_FIELDS:
        value = result.get(key, None if key == "global_bin_hd95" else NAN)
        if key == "global_bin_hd95" or (key == "sq_hd95" and "brats_lesionwise_inf" in corrections):
            value = _global_hd95(value)
        out[field] = value
    return out


def mets_fields(result: dict, rows: list, unmatched_pred: list, volume_threshold, overlap_threshold, corrections=()) -> dict:
    """``parse_mets_results`` for one region; ``unmatched_pred``: (voxels, volume) of the
    false-positive predictions (used by the correction only)."""
    dsc, hd95, nsd = [], [], []
    small_tp = small_fn = large_tp = large_fn = 0
    small_found = large_found = False
    for row in rows:
        volume = row.get("volume")
        if volume is None:
            continue
        large = volume >= volume_threshold
        large_found, small_found = large_found or large, small_found or not large
        score = row.get("sq_dsc")
        if row.get("is_matched") == 1:
            passed = score is not None and score >= overlap_threshold
            if large:
                dsc.append(score)
                hd95.append(row.get("sq_hd95"))
                nsd.append(row.get("sq_nsd"))
                large_tp, large_fn = large_tp + passed, large_fn + (not passed)
            elif score is not None:
                small_tp, small_fn = small_tp + passed, small_fn + (not passed)
        elif large:
            large_fn += 1
            dsc.append(0)
            nsd.append(0)
            hd95.append(PENALTY_HD95)
        else:
            small_fn += 1
    fp = result.get("fp", 0)
    large_fp = small_fp = fp
    if "brats_mets_fp_by_size" in corrections:
        large_fp = sum(volume >= volume_threshold for _, volume in unmatched_pred)
        small_fp = len(unmatched_pred) - large_fp
    if large_fp > 0:
        dsc += [0] * large_fp
        nsd += [0] * large_fp
        hd95 += [PENALTY_HD95] * large_fp
    out = {field: result.get(key, NAN) for field, key, _ in SEG_FIELDS[:6]}
    out.update(_detection("large_instance", large_tp, large_fp, large_fn, large_found))
    if result.get("n_ref_instances", 0) == 0 or not large_found:
        out.update(dict.fromkeys((field for field, _ in LESIONWISE), NAN))
    else:
        finite = [v for v in hd95 if v is not None and not math.isinf(v)]
        out.update(
            {
                "lesionwise_dsc_mean": np.mean(dsc) if dsc else 0,
                "lesionwise_dsc_std": np.std(dsc) if dsc else 0,
                "lesionwise_hd95_mean": np.mean(finite) if finite else PENALTY_HD95,
                "lesionwise_hd95_std": np.std(finite) if finite else 0,
                "lesionwise_nsd_mean": np.mean(nsd) if nsd else 0,
                "lesionwise_nsd_std": np.std(nsd) if nsd else 0,
            }
        )
    small = _detection("small_instance", small_tp, small_fp, small_fn, small_found)
    out.update({k: small[k] for k in (f"small_instance_{f}" for f in ("tp", "fn", "fp", "prec", "rec", "f1"))})
    out["global_dsc"] = result.get("global_bin_dsc", NAN)
    out["global_nsd"] = result.get("global_bin_nsd", NAN)
    out["global_hd95"] = _global_hd95(result.get("global_bin_hd95"))
    return out


def _detection(prefix: str, tp: int, fp: int, fn: int, present: bool) -> dict:
    """tp, fp, fn, precision, recall, F1 of one size class (0 where the denominator is 0;
    NaN everywhere when the class has no reference lesion)."""
    if not present:
        return {f"{prefix}_{k}": NAN for k in ("tp", "fp", "fn", "prec", "rec", "f1")}
    return {
        f"{prefix}_tp": tp,
        f"{prefix}_fp": fp,
        f"{prefix}_fn": fn,
        f"{prefix}_prec": tp / (tp + fp) if tp + fp > 0 else 0,
        f"{prefix}_rec": tp / (tp + fn) if tp + fn > 0 else 0,
        f"{prefix}_f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn > 0 else 0,
    }


def penalty_fields(fields: list[str]) -> dict:
    """``_handle_missing_data``: 373 for the HD95 values that are not standard deviations, 0
    for everything else."""
    return {f: PENALTY_HD95 if "hd95" in f and "std" not in f else 0 for f in fields}


# --------------------------------------------------------------------------------------------
# The table


def statistics(values: list) -> dict:
    """pandas' ``mean``, ``std`` and ``median`` of one column (``nanops``: NaN left out, the
    sum over the column with NaN as 0, the variance from the mean with ddof 1)."""
    column = np.array([_number(v) for v in values], np.float64)
    kept = ~np.isnan(column)
    count = int(kept.sum())
    if count == 0:
        return {"mean": NAN, "std": NAN, "median": NAN}
    filled = np.where(kept, column, 0.0)
    with np.errstate(invalid="ignore"):
        mean = filled.sum() / count
        squares = np.where(kept, (mean - column) ** 2, 0.0)
        std = math.sqrt(squares.sum() / (count - 1)) if count > 1 else NAN
        if math.isnan(squares.sum()):
            std = NAN
    return {"mean": float(mean), "std": std, "median": float(np.median(column[kept]))}


def rows_in_reference_order(rows: dict[str, dict], failed: list[str], missing: list[str], corrections=()) -> list:
    """(subject, fields) rows: scored subjects in file-name order, then missing subjects (and,
    corrected, failed ones) with the penalty row of the first scored subject's fields."""
    table = [(name, rows[name]) for name in sorted(rows)]
    penalised = sorted(missing) + (sorted(failed) if "brats_failed_cases" in corrections else [])
    fields = list(table[0][1]) if table else []
    return table + [(name, penalty_fields(fields)) for name in penalised]


def csv(table: list, regions: list[str]) -> str:
    """The table as ``metrics_parser.py`` writes it (``subject_id``, fields per region, then
    the mean, std and median rows)."""
    columns = list(table[0][1]) if table else []
    header = ["subject_id"] + columns
    records = [[name] + [_number(fields.get(c)) for c in columns] for name, fields in table]
    summary = {c: statistics([fields.get(c) for _, fields in table]) for c in columns}
    for statistic in ("mean", "std", "median"):
        records.append([statistic] + [summary[c][statistic] for c in columns])
    return figures.csv_text(header, records)
