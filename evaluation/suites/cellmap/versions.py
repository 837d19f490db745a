"""What a reference version provides: the interface ``v2.py`` and ``head.py`` both implement.

The two commits share intake, alignment, masks, connected components, matching and the
per-instance distance (``inputs``, ``alignment``, ``instances``); they differ in what a
(crop, label) entry holds, how entries combine over crops, and which files the reference
writes. The suite picks the module once, by ``options.version`` (or the task's ``version``),
and the shared code calls it through this interface only.
"""

from pathlib import Path
from typing import Protocol

import numpy as np


class Version(Protocol):
    COMMIT: str
    # head also downsamples a large array without a voxel size by its shape ratio to the crop
    # (``utils/matched_crop.py`` ``MatchedCrop._load_source_array``); v2 centre-crops it.
    INFER_SCALE_FROM_SHAPE: bool

    def score_label(self, pred: np.ndarray, truth: np.ndarray, pair) -> dict:
        """The entry of one scored (crop, label) without the fields every entry has; ``pair``
        is the task's ``inputs.Pair`` (not imported here: ``inputs`` imports this module)."""

    def missing_entry(self, truth_path: Path | None, instance: bool, voxel_size, shape) -> dict:
        """The entry of a truth label that was not submitted (or whose task failed)."""

    def combine(self, entries: dict, instance_classes, include_missing: bool) -> dict:
        """``label_scores`` and the three overall scores from crop -> label -> entry."""

    def result_files(self, entries: dict, everything: dict, submitted: dict, bookkeeping: dict) -> dict:
        """The reference's own result files, by name."""
