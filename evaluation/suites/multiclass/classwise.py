"""Per-image, per-class Dice and IoU and their aggregates, on (images × classes) arrays.

The convention is nnU-Net v2's (MIC-DKFZ/nnUNet@0e49508,
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics`` and
``compute_metrics_on_folder``): per image and class ``Dice = 2tp / (2tp + fp + fn)``,
``IoU = tp / (tp + fp + fn)``, NaN when ``tp + fp + fn == 0`` (the class is in neither mask);
per class the NaN-ignoring mean over images; ``foreground_mean`` the plain mean over the
non-background classes (NaN as soon as one class is NaN everywhere). Everything here works
on whole arrays: no loop over classes or images.

The NaN-ignoring means sum each class's values along a contiguous axis, which is the
summation order of nnU-Net's ``np.nanmean`` over a per-class list: results are bit-identical,
not merely close (tests check this).
"""

import warnings

import numpy as np


def dice_iou(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 Dice and IoU from integer counts of any shape; NaN where tp + fp + fn == 0."""
    tp, fp, fn = (np.asarray(x, dtype=np.int64) for x in (tp, fp, fn))
    union = tp + fp + fn
    defined = union > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        dice = np.where(defined, 2 * tp / (2 * tp + fp + fn), np.nan)
        iou = np.where(defined, tp / union, np.nan)
    return dice, iou


def nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """``np.nanmean`` without the 'Mean of empty slice' warning (an all-NaN slice is NaN),
    summed along a contiguous axis so the rounding equals a 1-D ``np.nanmean`` per slice."""
    moved = np.ascontiguousarray(np.moveaxis(np.asarray(values, dtype=np.float64), axis, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(moved, axis=-1)


def per_class_mean(values: np.ndarray) -> np.ndarray:
    """(images × classes) -> per-class NaN-ignoring mean over images (nnU-Net's ``mean``)."""
    return nanmean(values, axis=0)


def class_means(per_class: np.ndarray, members: np.ndarray) -> tuple[float, float, int]:
    """Over the classes selected by ``members`` (bool or index array): the plain mean
    (nnU-Net's ``foreground_mean``, NaN-propagating), the NaN-ignoring mean, and how many
    members are not NaN."""
    chosen = np.asarray(per_class, dtype=np.float64)[members]
    plain = float(np.mean(chosen)) if chosen.size else float("nan")
    ignoring = float(nanmean(chosen, axis=0)) if chosen.size else float("nan")
    return plain, ignoring, int(np.count_nonzero(~np.isnan(chosen)))


def zero_dice_ratios(dice: np.ndarray) -> dict[str, np.ndarray]:
    """Per class: images where Dice is defined, the share of those with Dice 0 (NaN if none),
    and the share of all images with Dice 0 (NaN never equals 0)."""
    dice = np.asarray(dice, dtype=np.float64)
    valid = np.count_nonzero(~np.isnan(dice), axis=0)
    zeros = np.count_nonzero(dice == 0, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        of_valid = np.where(valid > 0, zeros / np.maximum(valid, 1), np.nan)
    of_all = zeros / dice.shape[0] if dice.shape[0] else np.full(dice.shape[1], np.nan)
    return {"n_valid": valid, "of_valid": of_valid, "of_all": of_all}


def pooled(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dataset-level Dice and IoU per class: counts summed over images first (the
    convention of MMSegmentation's ``IoUMetric`` and torchmetrics' ``average='global'``)."""
    return dice_iou(np.sum(tp, axis=0), np.sum(fp, axis=0), np.sum(fn, axis=0))


def group_values(per_class: np.ndarray, groups: dict[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """For every group (class indices): the NaN-ignoring mean of its members' values and the
    number of members that are not NaN. Class-first, like the foreground headline."""
    result = {}
    for name, members in groups.items():
        _, value, defined = class_means(per_class, members)
        result[name] = (value, defined)
    return result


class Summary:
    """Everything the multi-class report needs, from per-image counts (images × classes).

    ``foreground`` selects the classes of the headline means; ``groups`` maps a group name to
    class indices. Per-image and per-class arrays are indexed like the counts' columns."""

    def __init__(self, tp, fp, fn, tn, foreground: np.ndarray, groups: dict[str, np.ndarray] | None = None):
        self.tp, self.fp, self.fn, self.tn = (np.asarray(x, dtype=np.int64) for x in (tp, fp, fn, tn))
        self.n_images, self.n_classes = self.tp.shape
        self.foreground = np.asarray(foreground, dtype=bool)
        self.dice, self.iou = dice_iou(self.tp, self.fp, self.fn)
        self.class_dice, self.class_iou = per_class_mean(self.dice), per_class_mean(self.iou)
        self.fg_dice_plain, self.fg_dice, self.n_fg_defined = class_means(self.class_dice, self.foreground)
        self.fg_iou_plain, self.fg_iou, _ = class_means(self.class_iou, self.foreground)
        zero = zero_dice_ratios(self.dice)
        self.n_valid, self.zero_of_valid, self.zero_of_all = zero["n_valid"], zero["of_valid"], zero["of_all"]
        self.n_in_truth = np.count_nonzero(self.tp + self.fn > 0, axis=0)
        self.pooled_dice, self.pooled_iou = pooled(self.tp, self.fp, self.fn)
        _, self.pooled_fg_dice, _ = class_means(self.pooled_dice, self.foreground)
        _, self.pooled_fg_iou, _ = class_means(self.pooled_iou, self.foreground)
        self.groups = {name: np.asarray(members, dtype=np.intp) for name, members in (groups or {}).items()}

    def counts_mean(self) -> dict[str, np.ndarray]:
        """nnU-Net's ``mean`` of its count entries per class (means over images)."""
        counts = {
            "TP": self.tp,
            "FP": self.fp,
            "FN": self.fn,
            "TN": self.tn,
            "n_pred": self.tp + self.fp,
            "n_ref": self.tp + self.fn,
        }
        return {key: per_class_mean(value) for key, value in counts.items()}

    def group_table(self) -> dict[str, dict]:
        """Per group: class-first NaN-ignoring means of each per-class statistic, the number
        of members and of members whose values are defined (Dice, IoU, pooled values and the
        valid-image zero ratio share one NaN pattern: the class occurs somewhere)."""
        statistics = {
            "Dice": self.class_dice,
            "IoU": self.class_iou,
            "pooled_Dice": self.pooled_dice,
            "pooled_IoU": self.pooled_iou,
            "zero_dice_ratio_of_valid_images": self.zero_of_valid,
            "zero_dice_ratio_of_all_images": self.zero_of_all,
        }
        table = {}
        for name, members in self.groups.items():
            row = {key: group_values(values, {name: members})[name][0] for key, values in statistics.items()}
            row["n_classes"] = int(members.size)
            row["n_classes_defined"] = int(np.count_nonzero(~np.isnan(self.class_dice[members])))
            table[name] = row
        return table

    def image_fg_dice(self) -> np.ndarray:
        """Per image, the NaN-ignoring mean Dice over the foreground classes defined in it."""
        return nanmean(self.dice[:, self.foreground], axis=1)
