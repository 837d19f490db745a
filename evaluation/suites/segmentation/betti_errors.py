"""Betti-number errors of a class: |b(prediction) - b(truth)|, TopCoW's topology metrics.

``betti0_error`` counts 26-connected components (8-connected in 2-D), as TopCoW 2024 does per
label and for the merged masks (CoWBenchmark/TopCoW_Eval_Metrics@25ca839,
``topcow24_eval/metrics/seg_metrics/cls_avg_b0.py: betti_number_error_single_label``);
``betti1_error`` the tunnels (b1 from the Euler characteristic, ``metrics.betti``), as the
TopCoW 2023 release computes it for the merged masks (@7c722ff, ``metric_functions.py:
betti_number_error_all_classes``). No library of the suite defines either: every definition
computes them the same way. An empty mask has no component and no tunnel.
"""

from evaluation.metrics import betti


def betti_errors(m) -> dict:
    """The errors of a ``measured.Measured`` (its masks): b1 only where the phase asks for it."""
    ref, pred = m.masks
    found = {"betti0_error": abs(betti.components(pred) - betti.components(ref))}
    if "betti1_error" in m.options.metrics:
        found["betti1_error"] = abs(betti.betti_numbers(pred)[1] - betti.betti_numbers(ref)[1])
    return found
