"""Scoring one sample: read both arrays, preprocess them as the reference does, evaluate.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``evaluate.evaluate_file``
(read, squeeze, ``util.check_and_fix_sizes``, ``util.check_fix_and_unify_ids``) followed by
``evaluate.evaluate_volume`` with the FlyLight preset.
"""

import math
from pathlib import Path

from evaluation import public
from evaluation.errors import PhaseError
from evaluation.metrics.sparse_labels import SparseLabels
from evaluation.report import sanitize
from evaluation.suites.fisbe.image import evaluate, unify
from evaluation.suites.fisbe.inputs import Sample, read_prediction, read_sample

# The preflight's time model: a 128 x 512 x 512 sample scores in about 2 s (bench/README.md),
# 60 s per G voxel of the image.
SECONDS_PER_GVOXEL = 60.0


def load_sample(sample: Sample) -> tuple[SparseLabels, SparseLabels, list[int]]:
    """GT and prediction as unified sparse labels, plus the relabelled ``dim_neurons``."""
    pair = read_sample(sample)
    pred, _ = unify(pair.pred, pair.shape, remove_small=sample.remove_small_components)
    pair.pred.clear()  # the raw channels are not needed any more
    gt, dims = unify(pair.gt, pair.shape, dims=pair.dims)
    if any(d == 0 for d in dims):
        raise PhaseError(f"dim_neurons of sample {sample.sample} names ids that are not in its ground truth")
    return gt, pred, dims


def score(sample: Sample) -> dict:
    """The reference's per-image metrics dictionary, as JSON values."""
    gt, pred, dims = load_sample(sample)
    return sanitize(evaluate(gt, pred, dims, sample.partly))


def check(sample: Sample) -> dict:
    """The preflight of one sample: the prediction read, checked and streamed as scoring reads
    it, against the image's shape from the ground truth's header; the estimated seconds."""
    spatial = public.read_header(Path(sample.truth)).shape
    if sample.prediction is not None:
        read_prediction(sample, spatial)
    return {"seconds": math.prod(spatial) / 1e9 * SECONDS_PER_GVOXEL}
