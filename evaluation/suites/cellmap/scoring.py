"""Score one (crop, label) task: read and align its arrays, let the version score them, and add
the fields every entry carries (``utils/eval_utils/scoring.py`` ``score_label``)."""

import numpy as np

from evaluation.suites.cellmap.inputs import Pair, read_pair
from evaluation.suites.cellmap.versions import Version


def entry_fields(shape, voxel_size, missing: bool) -> dict:
    """What every per-(crop, label) entry holds besides its scores: the crop's voxel count (the
    v2 aggregation weight), the voxel size and whether the label was missing; a missing entry
    also says so in its status (``score_label``, ``empty_label_score``)."""
    fields = {"num_voxels": int(np.prod(shape)), "voxel_size": list(voxel_size), "is_missing": missing}
    return {**fields, "status": "missing"} if missing else fields


def score(pair: Pair, version: Version) -> dict:
    """``version`` is the module of ``pair.version``."""
    truth, pred = read_pair(pair, version.INFER_SCALE_FROM_SHAPE)
    return {**version.score_label(pred, truth, pair), **entry_fields(truth.shape, pair.grid.voxel_size, missing=False)}
