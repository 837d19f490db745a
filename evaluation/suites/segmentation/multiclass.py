"""MetricsReloaded's multi-class measures of one case (``metrics: [multiclass]``).

``MultiClassPairwiseMeasures`` (``MetricsReloaded/metrics/pairwise_measures.py``) takes the
two flattened label maps and the list of labels 0..K, one-hot encodes them, and derives four
measures from the (prediction, reference) confusion matrix over those labels: the multi-class
MCC, Cohen's kappa weighted by 1 - identity, the balanced accuracy and the expected cost with
prior-based weights. Here that matrix is the case's (truth slot, prediction slot) table,
transposed: slot 0 is the background (every label that is no class), slot i the i-th label.
Everything but the MCC is the library's own arithmetic on that K x K matrix (numpy, float64,
in the same order), so bit for bit; the library takes the MCC's covariances with ``np.cov``
over every voxel, here from the same sums in closed form (equal to about 1e-15 relative).
A label absent from the truth leaves a column sum of 0: balanced accuracy and expected cost
are then nan, as in the library.
"""

import numpy as np

KEYS = ("mcc", "weighted_kappa", "balanced_accuracy", "expected_cost")


def measures(table: np.ndarray) -> dict:
    """The four measures from the (truth slot, prediction slot) count table."""
    cm = np.asarray(table, np.float64).T  # prediction rows, reference columns
    k = cm.shape[0]
    n = cm.sum()
    pred, ref = cm.sum(1), cm.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        # np.cov(x, y)[0, 1] of two one-hot columns: (sum xy - sum x * sum y / n) / (n - 1)
        cov_pr = sum((cm[f, f] - pred[f] * ref[f] / n) / (n - 1) for f in range(k))
        cov_pred = sum((pred[f] - pred[f] * pred[f] / n) / (n - 1) for f in range(k))
        cov_ref = sum((ref[f] - ref[f] * ref[f] / n) / (n - 1) for f in range(k))
        mcc = cov_pr / np.sqrt(cov_pred * cov_ref)
        expectation = np.multiply.outer(pred, ref) / n
        weights = np.ones([k, k]) - np.eye(k)
        kappa = 1 - np.sum(weights * cm) / np.sum(weights * expectation)
        balanced = np.sum(np.diag(cm) / ref) / k
        prior_matrix = np.tile(ref / n, [k, 1])
        costs = 1.0 / (k * prior_matrix)
        np.fill_diagonal(costs, 0)
        cost = np.sum(prior_matrix * costs * (cm / ref))
    return dict(zip(KEYS, (float(mcc), float(kappa), float(balanced), float(cost))))
