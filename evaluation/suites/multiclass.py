"""Per-image multi-class Dice and IoU in nnU-Net v2's convention, for one or several models.

Reference: MIC-DKFZ/nnUNet@0e49508 (unchanged since b0505529, 2022),
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics`` (per image and class:
Dice, IoU, TP, FP, FN, TN, n_pred, n_ref; NaN when the class is in neither mask; an optional
ignore label) and ``compute_metrics_on_folder`` (``mean``: per-class NaN-ignoring mean over
images; ``foreground_mean``: plain mean over the classes other than 0). Definitions follow
``SPEC.md`` of the conformance kit (section numbers below refer to it); class groups,
zero-Dice ratios, dataset-level (pooled) values and model deltas are project conventions
defined there.

Phase: ``phase.yaml`` plus one label map per test case in ``truth`` (default ``labels/``),
named ``<case>.<ext>``. Submission: one label map per case, matched by name; either all at
the top level (one model) or one folder per model (several models, compared against a
baseline; only when ``max_models`` allows it). Failure policy: a missing case rejects the
whole submission (nnU-Net's default, ``chill=False``) unless ``missing_cases`` says
otherwise, a file that matches no case rejects it too (nnU-Net would crash on it); a case
whose file is unreadable or on the wrong grid fails alone and is left out of the means.
"""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evaluation import log, runner
from evaluation.errors import GraderError, PhaseError, SubmissionError
from evaluation.metrics.classwise import Summary
from evaluation.metrics.confusion import ClassIndex, class_counts
from evaluation.phase import Phase
from evaluation.readers import images
from evaluation.submission import PLATFORM_FILES, Submission
from evaluation.suites import multiclass_report
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register

_log = log.get(__name__)

REFERENCE = {
    "repository": "MIC-DKFZ/nnUNet",
    "commit": "0e495086eb108ff79afe106291e8c15bd2f2bc3a",
    "function": "nnunetv2/evaluation/evaluate_predictions.py:compute_metrics_on_folder",
}
SINGLE_MODEL = "submission"  # the model's name when the files sit at the top level
COUNT_KEYS = ("TP", "FP", "FN", "TN")
# Peak bytes per voxel of one case: float64 truth and prediction plus their int64 copies and
# a comparison mask (integer label maps need far less; the lookup works in 1M-voxel chunks).
BYTES_PER_VOXEL = 36
_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")


# --------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class Options:
    class_ids: tuple[int, ...]
    class_names: tuple[str, ...]
    truth: str = "labels"
    background: int | None = 0
    ignore_index: int | None = None
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    missing_cases: str = "reject"
    unknown_labels: str = "reject"
    max_models: int = 1
    baseline: str | None = None

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        ids, names = parse_classes(o.get("classes"))
        options = cls(
            class_ids=ids, class_names=names,
            truth=o.get("truth", cls.truth),
            background=o.get("background", cls.background),
            ignore_index=o.get("ignore_index"),
            groups={name: parse_members(name, members) for name, members in (o.get("groups") or {}).items()},
            missing_cases=o.get("missing_cases", cls.missing_cases),
            unknown_labels=o.get("unknown_labels", cls.unknown_labels),
            max_models=o.get("max_models", cls.max_models),
            baseline=o.get("baseline"),
        )
        options.validate()
        return options

    @property
    def foreground(self) -> np.ndarray:
        return np.array([c != self.background for c in self.class_ids], dtype=bool)

    def group_indices(self) -> dict[str, np.ndarray]:
        position = {c: i for i, c in enumerate(self.class_ids)}
        return {name: np.array([position[c] for c in members], dtype=np.intp) for name, members in self.groups.items()}

    def validate(self) -> None:
        if self.ignore_index is not None and self.ignore_index in self.class_ids:
            raise PhaseError(f"phase.yaml: ignore_index {self.ignore_index} is also a class id")
        foreground = set(self.class_ids) - {self.background}
        for name, members in self.groups.items():
            unknown = sorted(set(members) - foreground)
            if unknown:
                raise PhaseError(f"phase.yaml: group {name!r} names {unknown}, which are not foreground classes")


def parse_classes(value) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``classes``: a count K (ids 0..K-1), a list of ids, or {name: id} like nnU-Net's
    dataset.json ``labels``. Class order is ascending id."""
    if value is None:
        raise PhaseError("phase.yaml: the multiclass suite needs 'classes' (a count, a list of ids or {name: id})")
    if isinstance(value, int):
        pairs = [(str(i), i) for i in range(value)]
    elif isinstance(value, list):
        pairs = [(str(i), int(i)) for i in value]
    else:
        pairs = [(str(name), int(i)) for name, i in value.items()]
    ids = [i for _, i in pairs]
    if len(set(ids)) != len(ids):
        raise PhaseError("phase.yaml: 'classes' repeats a class id")
    pairs.sort(key=lambda pair: pair[1])
    return tuple(i for _, i in pairs), tuple(name for name, _ in pairs)


def parse_members(name: str, members) -> tuple[int, ...]:
    """Group members: ids or 'a-b' ranges (inclusive), e.g. ``[1, "24-47"]``."""
    found = []
    for member in members:
        if isinstance(member, int):
            found.append(member)
            continue
        match = _RANGE.match(str(member))
        if match is None or int(match.group(1)) > int(match.group(2)):
            raise PhaseError(f"phase.yaml: group {name!r} member {member!r} is neither an id nor a range 'a-b'")
        found.extend(range(int(match.group(1)), int(match.group(2)) + 1))
    return tuple(sorted(set(found)))


# --------------------------------------------------------------------------------------------
# Finding models and cases


def json_key(name: str) -> str:
    """Metrics keys must not contain dots (leaderboard paths are dotted)."""
    return name.replace(".", "_")


def _has_label_file(folder: Path) -> bool:
    return bool(Submission(folder).case_files())


def find_models(submission: Submission, max_models: int) -> dict[str, dict[str, Path]]:
    """Model name -> (case -> file). Label files at the top level are one model; otherwise
    every top-level folder holding label files is a model named after the folder (a single
    such folder is one model, e.g. a zip that wraps its files in a folder)."""
    if submission.named_files is not None:
        return {SINGLE_MODEL: submission.case_files()}
    root = submission.root
    entries = [p for p in sorted(root.iterdir()) if not p.name.startswith(".") and p.name not in PLATFORM_FILES]
    if any(images.suffix(p) in images.SUFFIXES for p in entries):
        return {SINGLE_MODEL: submission.case_files()}
    folders = [p for p in entries if p.is_dir() and _has_label_file(p)]
    if not folders:
        raise SubmissionError(
            f"the submission holds no label maps: upload one file per case named after it ({', '.join(images.SUFFIXES)})"
        )
    if len(folders) == 1:
        return {folders[0].name: Submission(folders[0]).case_files()}
    if len(folders) > max_models:
        names = ", ".join(p.name for p in folders[:5])
        raise SubmissionError(
            f"the submission holds {len(folders)} folders of predictions ({names}); this phase scores "
            + ("one set of predictions: put your files at the top level" if max_models == 1 else f"at most {max_models} models")
        )
    models = {}
    for folder in folders:
        if "." in folder.name:
            raise SubmissionError(f"model folder '{folder.name}': folder names must not contain dots; rename it")
        models[folder.name] = Submission(folder).case_files()
    return models


def truth_cases(phase: Phase, options: Options) -> dict[str, Path]:
    folder = phase.path(options.truth)
    if not folder.is_dir():
        raise PhaseError(f"phase.yaml: the truth folder {options.truth!r} does not exist")
    try:
        cases = Submission(folder).case_files()
    except SubmissionError as exc:
        raise PhaseError(f"truth folder: {exc}") from None
    if not cases:
        raise PhaseError("the truth folder holds no label maps")
    keys = {}
    for case in cases:
        if keys.setdefault(json_key(case), case) != case:
            raise PhaseError(f"truth cases {keys[json_key(case)]!r} and {case!r} differ only in dots")
    return cases


def match_cases(model: str, submitted: dict[str, Path], truth: dict[str, Path], policy: str, multi: bool) -> list[str]:
    """The cases to score for one model (sorted); raises for unknown or (policy 'reject')
    missing files."""
    where = f"model '{model}': " if multi else ""
    unknown = sorted(set(submitted) - set(truth))
    if unknown:
        shown = ", ".join(submitted[c].name if images.stem(submitted[c]) == c else f"{c} ({submitted[c].name})" for c in unknown[:5])
        raise SubmissionError(
            f"{where}{len(unknown)} file(s) match no test case ({shown}{', ...' if len(unknown) > 5 else ''}); "
            "name each file after its test case"
        )
    missing = sorted(set(truth) - set(submitted))
    if missing and policy == "reject":
        shown = ", ".join(missing[:5])
        raise SubmissionError(
            f"{where}{len(missing)} of {len(truth)} test cases have no prediction ({shown}{', ...' if len(missing) > 5 else ''})"
        )
    return sorted(truth) if policy == "empty" else sorted(submitted)


def batch_size(n_cases: int, workers: int) -> int:
    """Cases per task. A task is a forked worker process, which costs tens of milliseconds
    on a busy machine while a 2D case scores in a few: cases are batched, about four
    batches per worker so the load stays balanced. Small sets keep one case per task, so
    a bad file fails alone; in a batch, it fails its batch (whose message names it)."""
    return max(1, -(-n_cases // (4 * max(1, workers))))


def voxel_count(path: Path) -> int:
    """Voxels of a truth image from its header (for the memory estimate); the file size if the
    header cannot be read (the worker then reports why)."""
    try:
        return int(np.prod(images.probe_shape(path, display="a ground-truth label map", trusted=True), dtype=np.int64))
    except GraderError:
        return path.stat().st_size if path.is_file() else 1 << 20


# --------------------------------------------------------------------------------------------
# Scoring one case


def as_labels(volume: images.Volume, display: str, error=SubmissionError) -> np.ndarray:
    """An integer label map: integer and boolean arrays as they are, floats only when every
    value is a whole number (NIfTI label maps are often stored as floats)."""
    array = volume.array
    if array.dtype.kind in "biu":
        return array
    if array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):  # NaN and huge values fail the comparison below
            whole = array.astype(np.int64)
        if np.array_equal(whole, array):
            return whole
        raise error(f"{display}: holds non-integer values; a label map must hold class ids (0, 1, 2, ...)")
    raise error(f"{display}: has data type {array.dtype}; a label map must hold integer class ids")


def refuse_unknown_labels(pred: np.ndarray, index: ClassIndex, display: str) -> None:
    """A prediction value that is no declared class (nor ``ignore_index``) usually means a
    wrong label convention (-1 for background, 255 for foreground, ids from another dataset).
    nnU-Net counts such pixels as "no class" (``unknown_labels: ignore``); by default they are
    reported instead of silently lowering every score."""
    known = np.array(index.ids + ([index.ignore] if index.ignore is not None else []))
    if pred.dtype.kind == "b" or (int(pred.min()) >= known.min() and int(pred.max()) <= known.max() and np.isin(pred, known).all()):
        return
    unknown = np.setdiff1d(np.unique(pred), known)
    shown = ", ".join(str(v) for v in unknown[:5]) + (", ..." if unknown.size > 5 else "")
    raise SubmissionError(f"{display}: holds label values that are not classes of this challenge ({shown}); "
                          f"expected only {', '.join(map(str, index.ids))}")


def without_png_geometry(volume: images.Volume, path: str) -> images.Volume:
    """PNG stores no spacing or origin (SimpleITK reports 1 and 0): compare its shape only."""
    if images.suffix(Path(path)) != ".png":
        return volume
    return images.Volume(volume.array)


def score_case(payload: dict) -> dict:
    index = ClassIndex(payload["class_ids"], payload["ignore_index"])
    try:
        truth_volume = images.read(Path(payload["truth"]), display="a ground-truth label map", trusted=True)
    except SubmissionError as exc:
        raise PhaseError(f"case {payload['case']}: {exc}") from None
    truth = as_labels(truth_volume, f"the ground truth of case {payload['case']}", PhaseError)
    if payload["pred"] is None:  # missing_cases: empty
        fill = payload["background"] if payload["background"] is not None else index.hi + 1
        pred = np.full(truth.shape, fill, dtype=np.int64)
    else:
        volume = images.read(Path(payload["pred"]), display=payload["display"], max_voxels=truth.size)
        images.check_geometry(without_png_geometry(volume, payload["pred"]), without_png_geometry(truth_volume, payload["truth"]),
                              payload["display"])
        pred = as_labels(volume, payload["display"])
        if payload["unknown_labels"] == "reject":
            refuse_unknown_labels(pred, index, payload["display"])
    counts = class_counts(truth, pred, index)
    return {key: getattr(counts, key.lower()).tolist() for key in COUNT_KEYS}


# --------------------------------------------------------------------------------------------
# Results as metrics.json trees


def per_class(options: Options, values) -> dict[str, object]:
    return {str(c): v for c, v in zip(options.class_ids, values)}


def nnunet_case_metrics(options: Options, summary: Summary) -> list[dict]:
    """nnU-Net's per-case ``metrics``: class -> Dice, IoU, FP, TP, FN, TN, n_pred, n_ref."""
    columns = {"Dice": summary.dice, "IoU": summary.iou, "FP": summary.fp, "TP": summary.tp, "FN": summary.fn,
               "TN": summary.tn, "n_pred": summary.tp + summary.fp, "n_ref": summary.tp + summary.fn}
    rows = {key: values.tolist() for key, values in columns.items()}
    return [{str(c): {key: rows[key][i][j] for key in columns} for j, c in enumerate(options.class_ids)}
            for i in range(summary.n_images)]


def case_entries(options: Options, summary: Summary, cases: list[str], files: dict[str, str | None]) -> dict:
    """metrics.json ``case.<case>``: Dice and IoU per class (nnU-Net's names) and the image's
    mean foreground Dice. The counts live in ``summary.json``: metrics.json is validated
    value by value, and 400 cases x 70 classes x 8 entries take the validator minutes."""
    dice, iou, mean = summary.dice.tolist(), summary.iou.tolist(), summary.image_fg_dice().tolist()
    ids = [str(c) for c in options.class_ids]
    return {json_key(case): {"Dice": dict(zip(ids, dice[i])), "IoU": dict(zip(ids, iou[i])), "mean_dice_fg_nanmean": mean[i],
                             "prediction_file": files.get(case), "status": "scored"} for i, case in enumerate(cases)}


def aggregates(options: Options, summary: Summary, n_missing: int, n_failed: int) -> dict:
    means = summary.counts_mean()
    mean = {str(c): {"Dice": d, "IoU": u, **{k: v[j] for k, v in means.items()}}
            for j, (c, d, u) in enumerate(zip(options.class_ids, summary.class_dice, summary.class_iou))}
    fg = summary.foreground
    foreground_mean = {"Dice": summary.fg_dice_plain, "IoU": summary.fg_iou_plain,
                       **{k: (float(np.mean(v[fg])) if fg.any() else np.nan) for k, v in means.items()}}
    return {
        "mean_dice_fg_nanmean": summary.fg_dice,
        "mean_iou_fg_nanmean": summary.fg_iou,
        "mean_dice_fg_np_mean": summary.fg_dice_plain,
        "mean_iou_fg_np_mean": summary.fg_iou_plain,
        "n_fg_classes": int(np.count_nonzero(fg)),
        "n_fg_classes_defined": summary.n_fg_defined,
        "n_images": summary.n_images,
        "n_missing_images": n_missing,
        "n_failed_images": n_failed,
        "mean": mean,
        "foreground_mean": foreground_mean,
        "zero_dice_ratio_of_valid_images": per_class(options, summary.zero_of_valid),
        "zero_dice_ratio_of_all_images": per_class(options, summary.zero_of_all),
        "n_valid_images_per_class": per_class(options, summary.n_valid.tolist()),
        "n_truth_images_per_class": per_class(options, summary.n_in_truth.tolist()),
        "pooled": {
            "per_class": {str(c): {"Dice": d, "IoU": u} for c, d, u in zip(options.class_ids, summary.pooled_dice, summary.pooled_iou)},
            "mean_dice_fg_nanmean": summary.pooled_fg_dice,
            "mean_iou_fg_nanmean": summary.pooled_fg_iou,
        },
        "groups": summary.group_table(),
    }


def deltas(options: Options, candidate: Summary, baseline: Summary) -> dict:
    """SPEC 6: candidate − baseline per class (NaN if either is NaN) and the difference of the
    headlines (not the mean of per-class deltas)."""
    groups_c, groups_b = candidate.group_table(), baseline.group_table()
    per_class_dice = candidate.class_dice - baseline.class_dice
    return {
        "delta_per_class_dice": per_class(options, per_class_dice),
        "delta_per_class_iou": per_class(options, candidate.class_iou - baseline.class_iou),
        "delta_mean_dice_fg_nanmean": candidate.fg_dice - baseline.fg_dice,
        "delta_mean_iou_fg_nanmean": candidate.fg_iou - baseline.fg_iou,
        "delta_pooled_mean_dice_fg_nanmean": candidate.pooled_fg_dice - baseline.pooled_fg_dice,
        "delta_groups": {name: {"Dice": groups_c[name]["Dice"] - groups_b[name]["Dice"],
                                "IoU": groups_c[name]["IoU"] - groups_b[name]["IoU"]} for name in groups_c},
        "n_classes_better": int(np.count_nonzero(per_class_dice[candidate.foreground] > 0)),
        "n_classes_worse": int(np.count_nonzero(per_class_dice[candidate.foreground] < 0)),
    }


def nnunet_summary(per_case: list[dict], cases: list[str], files: dict, aggregate: dict) -> dict:
    """nnU-Net's own ``summary.json`` layout (``save_summary_json``): ``metric_per_case`` as a
    list, ``mean`` and ``foreground_mean``. Truth paths are not written: the file is the
    participant's to see; ``reference_file`` holds the case's name instead."""
    entries = [{"metrics": metrics, "prediction_file": files.get(case), "reference_file": case} for metrics, case in zip(per_case, cases)]
    return {"foreground_mean": aggregate["foreground_mean"], "mean": aggregate["mean"], "metric_per_case": entries}


def leaderboard_columns(aggregate: dict, prefix: str = "") -> dict[str, float]:
    columns = {
        "mean_dice_fg_nanmean": aggregate["mean_dice_fg_nanmean"],
        "mean_iou_fg_nanmean": aggregate["mean_iou_fg_nanmean"],
        "pooled_mean_dice_fg_nanmean": aggregate["pooled"]["mean_dice_fg_nanmean"],
    }
    columns.update({f"group_{name}_Dice": row["Dice"] for name, row in aggregate["groups"].items()})
    columns.update({f"class_{c}_Dice": entry["Dice"] for c, entry in aggregate["mean"].items()})
    return {prefix + key: float(v) for key, v in columns.items() if v is not None and np.isfinite(v)}


# --------------------------------------------------------------------------------------------
# The suite


@register
class Multiclass(Suite):
    name = "multiclass"
    ranking = "mean_dice_fg_nanmean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        truth = truth_cases(phase, options)
        models = find_models(submission, options.max_models)
        multi = len(models) > 1
        baseline = options.baseline if options.baseline is not None else sorted(models)[0]
        if multi and baseline not in models:
            raise SubmissionError(f"this phase compares models against '{baseline}': include a folder of that name")
        sizes = {case: voxel_count(path) for case, path in truth.items()}
        size = batch_size(len(truth) * len(models), resources.workers)
        tasks, layout = [], {}
        for model, submitted in sorted(models.items()):
            cases = match_cases(model, submitted, truth, options.missing_cases, multi)
            files = {c: (os.path.relpath(submitted[c], submission.root) if c in submitted else None) for c in cases}
            missing = len(truth) - len(cases) + sum(f is None for f in files.values())
            keys = {}
            for start in range(0, len(cases), size):
                batch = cases[start:start + size]
                key = (f"{model}/" if multi else "") + (batch[0] if len(batch) == 1 else f"{batch[0]} .. {batch[-1]}")
                items = [{"case": c, "truth": str(truth[c]), "pred": str(submitted[c]) if c in submitted else None,
                          "display": files[c]} for c in batch]
                payload = {"cases": items, "class_ids": list(options.class_ids), "ignore_index": options.ignore_index,
                           "background": options.background, "unknown_labels": options.unknown_labels}
                tasks.append(Task(key=key, payload=payload, memory_bytes=max(sizes[c] for c in batch) * BYTES_PER_VOXEL + (64 << 20)))
                keys.update(dict.fromkeys(batch, key))
            layout[model] = {"cases": cases, "files": files, "missing": missing, "tasks": keys}
        _log.info("multiclass_plan", models=len(models), cases=len(truth), tasks=len(tasks))
        context = {"options": options, "layout": layout, "multi": multi, "baseline": baseline}
        return Plan(tasks=tasks, context=context)

    def score(self, payload: dict) -> dict:
        """Scores every case of the batch; if some cannot be scored, the batch fails with one
        message naming each bad file (the participant sees all problems at once)."""
        results, problems = {}, []
        for item in payload["cases"]:
            try:
                results[item["case"]] = score_case({**payload, **item})
            except SubmissionError as exc:
                problems.append(str(exc))
        if problems:
            more = f" (and {len(problems) - 1} more: {'; '.join(problems[1:4])}{' ...' if len(problems) > 4 else ''})" if len(problems) > 1 else ""
            raise SubmissionError(problems[0] + more)
        return results

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        options = plan.context["options"]
        multi, layout = plan.context["multi"], plan.context["layout"]
        k = len(options.class_ids)
        summaries, cases_out, aggregates_out, files, scored_names = {}, {}, {}, {}, {}
        for model, info in layout.items():
            scored, failed = [], {}
            for case in info["cases"]:
                outcome = outcomes.get(info["tasks"][case])
                if outcome is not None and outcome.ok:
                    scored.append((case, outcome.value[case]))
                else:
                    failed[case] = outcome.message if outcome is not None else "not scored"
            counts = {key: np.array([v[key] for _, v in scored], dtype=np.int64).reshape(len(scored), k) for key in COUNT_KEYS}
            summary = Summary(counts["TP"], counts["FP"], counts["FN"], counts["TN"], options.foreground, options.group_indices())
            names = [case for case, _ in scored]
            entries = case_entries(options, summary, names, info["files"])
            entries.update({json_key(c): {"status": "failed", "error": message, "prediction_file": info["files"].get(c)}
                            for c, message in failed.items()})
            aggregate = aggregates(options, summary, info["missing"], len(failed))
            summaries[model], cases_out[model], aggregates_out[model] = summary, dict(sorted(entries.items())), aggregate
            scored_names[model] = names
            per_case = nnunet_case_metrics(options, summary)
            files[f"summary_{model}.json" if multi else "summary.json"] = nnunet_summary(per_case, names, info["files"], aggregate)
        report = self._report(options, plan.context["baseline"], multi, summaries, cases_out, aggregates_out)
        ranked = report.metrics["aggregates"].get("best_model") if multi else next(iter(summaries))
        image_scores = summaries[ranked].image_fg_dice()
        report.case_scores = {json_key(c): float(v) for c, v in zip(scored_names[ranked], image_scores) if np.isfinite(v)}
        text = multiclass_report.render(options, summaries, plan.context["baseline"] if multi else None, layout)
        report.files = {**files, "report.txt": text, "report.html": multiclass_report.as_html(text)}
        return report

    def _report(self, options, baseline, multi, summaries, cases_out, aggregates_out) -> Result:
        shared = {"class_names": per_class(options, options.class_names), "background": options.background,
                  "ignore_index": options.ignore_index, "headline": "mean_dice_fg_nanmean"}
        reference = {**REFERENCE, "convention": "per image and class; class means over images (NaN-ignoring), then over classes"}
        if not multi:
            (model,) = summaries
            metrics = {"case": cases_out[model], "aggregates": {**aggregates_out[model], **shared}, "reference": reference}
            board = leaderboard_columns(aggregates_out[model])
        else:
            comparison = {"baseline": baseline, "deltas": {m: deltas(options, summaries[m], summaries[baseline])
                                                           for m in summaries if m != baseline}}
            ranked = max(summaries, key=lambda m: (np.nan_to_num(summaries[m].fg_dice, nan=-1.0), m == baseline))
            metrics = {
                "case": cases_out,
                "aggregates": {"models": aggregates_out, "comparison": comparison, "best_model": ranked,
                               "mean_dice_fg_nanmean": aggregates_out[ranked]["mean_dice_fg_nanmean"], **shared},
                "reference": reference,
            }
            board = leaderboard_columns(aggregates_out[ranked])
            for m in summaries:
                board.update(leaderboard_columns(aggregates_out[m], prefix=f"{m}_"))
        return Result(metrics=metrics, leaderboard=board)
