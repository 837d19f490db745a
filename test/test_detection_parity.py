"""Parity with picai_eval 1.4.13 (and report_guided_annotation 0.3.4 for softmax maps) through
the public command line, on the fixture cases of ``test/fixtures/detection``, for every
configuration ``expected.json`` records: every value of picai_eval's ``Metrics`` (AP, AUROC,
score, the precision-recall, ROC and FROC arrays, the sensitivities, the counts), every case's
rows in the reference's order, targets, predictions and weights. Counts and decisions exact,
floats within 1e-9 relative; an undefined value (the reference's NaN, infinity, or an error
where it raises) is null.

Not reproduced, by design: ``subject_list_after_cache`` (a ``Metrics`` object whose subject
list is changed after its first use: no phase does that) and the configurations whose
reference is a Python callable (``callable_mean`` is graded instead with its case confidences
submitted as likelihoods, which the PI-CAI Grand-Challenge evaluation puts in the same place).
"""

import json
import math

import pytest
from helpers.detection_cases import FPR_POINTS, SUBSET, expected, lay_out, manifest
from helpers.grading import close, run_cli, validate_metrics

EXPECTED = expected()
POINTS = "fp_per_case: [" + ", ".join(repr(x) for x in FPR_POINTS) + "]\n"
WEIGHTS = "case_weights: " + json.dumps(manifest()["weights"]) + "\n"

# expected.json's configuration -> (phase options, softmax cases?, the cases)
CONFIGS = {
    "default": ("score_ci_resamples: 200\nscore_ci_seed: 0\n", False, None),
    "num_parallel_calls_1": ("workers: 1\n", False, None),
    "dsc": ("overlap_func: DSC\n", False, None),
    "iou_min0.25": ("min_overlap: 0.25\n", False, None),
    "iou_min0.5": ("min_overlap: 0.5\n", False, None),
    "dsc_min0.5": ("overlap_func: DSC\nmin_overlap: 0.5\n", False, None),
    "iou_min0.0": ("min_overlap: 0.0\n", False, None),
    "allow_unmatched_false": ("allow_unmatched_candidates_with_minimal_overlap: false\n", False, None),
    "dsc_allow_unmatched_false": ("overlap_func: DSC\nallow_unmatched_candidates_with_minimal_overlap: false\n", False, None),
    "bayesian": ("case_confidence_func: bayesian\n", False, None),
    "callable_mean": ("likelihoods: required\n", False, None),
    "weights": (WEIGHTS, False, None),
    "subject_list_subset": ("", False, SUBSET),
    "y_true_postprocess_eq1": ("lesion_labels: [1]\n", False, None),
    "elc_dynamic-fast": ("input: softmax\n", True, None),
    "elc_dynamic": ("input: softmax\nextraction: dynamic\n", True, None),
    "elc_dynamic-v2": ("input: softmax\nextraction: dynamic-v2\n", True, None),
    "elc_dynamic-mean": ("input: softmax\nextraction: dynamic-mean\n", True, None),
    "elc_dynamic-fast-mean": ("input: softmax\nextraction: dynamic-fast-mean\n", True, None),
    "elc_static_0.25": ("input: softmax\nextraction: 0.25\n", True, None),
    "elc_static_str_0.1": ("input: softmax\nextraction: 0.1\n", True, None),
    "elc_dynamic-fast_round1_minvox0": (
        "input: softmax\nextraction: dynamic-fast\nmax_prob_round_decimals: 1\nmin_voxels_detection: 0\n",
        True,
        None,
    ),
    "elc_dynamic_n2_factor4": (
        "input: softmax\nextraction: dynamic\nnum_lesions_to_extract: 2\ndynamic_threshold_factor: 4.0\n",
        True,
        None,
    ),
}
# configurations where the reference raises: the grader's exit status and what its last line says
REFUSED = {
    "selection_criteria_overlap": ("multiple_lesion_candidates_selection_criteria: overlap\n", False, 1, None),
    "selection_criteria_lesion_confidence": (
        "multiple_lesion_candidates_selection_criteria: lesion_confidence\n",
        False,
        1,
        None,
    ),
    "elc_dynamic_no_adjacent_removal": (
        "input: softmax\nextraction: dynamic\nremove_adjacent_lesion_candidates: false\n",
        True,
        1,
        None,
    ),
    "softmax_without_postprocess": ("", True, 2, "is not a detection map"),
}
NOT_REPRODUCED = {"subject_list_after_cache"}


def test_every_recorded_configuration_is_covered():
    assert set(EXPECTED["configs"]) == set(CONFIGS) | set(REFUSED) | NOT_REPRODUCED


def value(entry):
    """A recorded result: its value (scalars unwrapped), or None where the reference raised."""
    if "error" in entry:
        return None
    found = entry["ok"]
    if isinstance(found, dict) and "value" in found:
        return found["value"]
    if isinstance(found, dict) and "values" in found:
        return found["values"]
    return found


def same(got, want, path: str) -> list[str]:
    """The conformance rule: NaN, infinity and an error are null; ints exact; floats 1e-9."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: expected {want!r}, got {got!r}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in same(g, w, f"{path}[{i}]")]
    if want is None or (isinstance(want, float) and not math.isfinite(want)):
        return [] if got is None else [f"{path}: expected undefined (null), got {got!r}"]
    if isinstance(want, str):
        return [] if got == want else [f"{path}: expected {want!r}, got {got!r}"]
    if isinstance(want, int) and not isinstance(want, bool):
        return [] if got == want and isinstance(got, (int, float)) else [f"{path}: expected {want!r}, got {got!r}"]
    return [] if got is not None and close(got, want) else [f"{path}: expected {want!r}, got {got!r}"]


ARRAYS = ("precision", "recall", "lesion_TP", "lesion_FP", "lesion_TPR", "lesion_FPR", "thresholds", "case_TPR", "case_FPR")


def differences(metrics: dict, recorded: dict) -> list[str]:
    """Every recorded value of ``Metrics`` against the grader's metrics.json."""
    aggregates, cases = metrics["aggregates"], metrics["case"]
    found = []
    for key in ("auroc", "AP", "score", "num_cases", "num_lesions", *ARRAYS):
        found += same(aggregates[key], value(recorded[key]), key)
    found += same(aggregates["picai_eval_version"], recorded["version"], "version")
    for point, entry in recorded["lesion_TPR_at_FPR"].items():
        key = "lesion_TPR_at_FPR_" + point.replace(".", "_")
        found += same(aggregates[key], value(entry), key)
    found += same(sorted(cases), recorded["subject_list"], "subject_list")
    for case, rows in recorded["lesion_results"].items():
        mine = cases[case]["lesion_results"]
        found += same([list(r) for r in zip(mine["is_lesion"], mine["confidence"], mine["overlap"])], rows, f"{case}/rows")
        found += same(cases[case]["lesion_weight"], recorded["lesion_weight"][case], f"{case}/lesion_weight")
        for key in ("case_pred", "case_target", "case_weight"):
            found += same(cases[case][key], recorded[key][case]["value"], f"{case}/{key}")
    return found


def likelihoods_of(recorded: dict) -> dict:
    return {case: entry["value"] for case, entry in recorded["case_pred"].items()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_configuration(name, tmp_path):
    options, softmax, cases = CONFIGS[name]
    recorded = EXPECTED["configs"][name]
    phase, submission = lay_out(tmp_path, "suite: detection\n" + POINTS + options, softmax=softmax, cases=cases)
    if name == "callable_mean":  # the reference's case confidence, submitted as likelihoods
        (submission / "likelihoods.json").write_text(json.dumps(likelihoods_of(recorded["metrics"])))
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    assert differences(run.metrics, recorded["metrics"]) == []
    if name == "default":
        gc = {key.replace(".", "_"): v for key, v in recorded["gc_aggregates"].items()}
        assert [d for key, want in gc.items() for d in same(run.metrics["aggregates"][key], want, key)] == []
        interval = run.metrics["aggregates"]["score_ci"]
        for key, want in recorded["bootstrap_score_ci_seed0_n200"].items():
            assert same(interval[key], want, key) == []
        assert run.metrics["leaderboard"]["score"] == run.metrics["aggregates"]["score"]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_configurations_the_reference_refuses(name, tmp_path):
    options, softmax, code, line = REFUSED[name]
    phase, submission = lay_out(tmp_path, "suite: detection\n" + options, softmax=softmax)
    run = run_cli(submission, phase, tmp_path / "out")
    assert "error" in EXPECTED["configs"][name]
    assert run.code == code, run.stderr
    if line is not None:
        assert line in run.last_line
