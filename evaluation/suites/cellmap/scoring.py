"""Score one (crop, label) task: read and align its arrays, let the version score them, and add
the fields every entry carries (``utils/eval_utils/scoring.py`` ``score_label``)."""

import numpy as np

from evaluation.suites.cellmap import volumes
from evaluation.suites.cellmap.alignment import BlockResampled, Resampled
from evaluation.suites.cellmap.inputs import Pair, open_pair, open_prediction
from evaluation.suites.cellmap.versions import Version

# The preflight's time model: seconds of a task per G voxel of its crop, from the summed task
# seconds of the synthetic test set (bench/README.md, "Real scale": instance 13.8, semantic 1.9;
# about 2.8 times that when the prediction is resampled).
INSTANCE_SECONDS_PER_GVOXEL = 14.0
SEMANTIC_SECONDS_PER_GVOXEL = 2.0
RESAMPLED_FACTOR = 3.0


def entry_fields(shape, voxel_size, missing: bool) -> dict:
    """What every per-(crop, label) entry holds besides its scores: the crop's voxel count (the
    v2 aggregation weight), the voxel size and whether the label was missing; a missing entry
    also says so in its status (``score_label``, ``empty_label_score``)."""
    fields = {"num_voxels": int(np.prod(shape)), "voxel_size": list(voxel_size), "is_missing": missing}
    return {**fields, "status": "missing"} if missing else fields


def score(pair: Pair, version: Version) -> dict:
    """``version`` is the module of ``pair.version``."""
    truth, pred = open_pair(pair, version.INFER_SCALE_FROM_SHAPE)
    return {**version.score_label(pred, truth, pair), **entry_fields(truth.shape, pair.grid.voxel_size, missing=False)}


def check(pair: Pair, version: Version) -> dict:
    """The preflight of one pair: the arrays opened as scoring opens them (of the truth and its
    mask, the metadata a public phase holds), then the submitted array, aligned onto the crop's
    grid, decoded in the tiles of the pass that scores it, in their order (unmasked: a public
    phase cannot tell where the mask is empty); and the estimated seconds of scoring it."""
    truth, scored = open_pair(pair, version.INFER_SCALE_FROM_SHAPE)
    pred = open_prediction(pair, version.INFER_SCALE_FROM_SHAPE)
    volumes.decode(pred, volumes.instance_tiles(truth, scored) if pair.instance else volumes.semantic_tiles(truth, scored))
    resampled = isinstance(pred.inner, (Resampled, BlockResampled))
    rate = INSTANCE_SECONDS_PER_GVOXEL if pair.instance else SEMANTIC_SECONDS_PER_GVOXEL
    return {"seconds": int(np.prod(pair.grid.shape)) / 1e9 * rate * (RESAMPLED_FACTOR if resampled else 1.0)}
