"""The detection phase's options, typed and checked once, before anything is read.

Names and defaults are those of the reference's arguments: picai_eval 1.4.13
(``picai_eval/eval.py: evaluate``: ``min_overlap``, ``overlap_func``, ``case_confidence_func``,
``allow_unmatched_candidates_with_minimal_overlap``, ``sample_weight``) and
report_guided_annotation 0.3.4 (``extract_lesion_candidates.py: extract_lesion_candidates``:
``threshold`` as ``extraction``, ``min_voxels_detection``, ``num_lesions_to_extract``,
``dynamic_threshold_factor``, ``max_prob_round_decimals``,
``remove_adjacent_lesion_candidates``). Every default is the phase schema's.
"""

from dataclasses import dataclass

from evaluation.errors import PhaseError
from evaluation.phase import Phase

CORRECTIONS = ("froc_last_point", "disjoint_never_match", "constant_blobs")


@dataclass(frozen=True)
class Extraction:
    """``extract_lesion_candidates``' settings (input: softmax)."""

    threshold: str | float  # a mode ('dynamic-fast', 'dynamic', ...) or a static threshold
    min_voxels_detection: int
    num_lesions_to_extract: int
    dynamic_threshold_factor: float
    max_prob_round_decimals: int | None
    remove_adjacent_lesion_candidates: bool

    @property
    def mode(self) -> str:
        """'static', 'dynamic-fast' or 'dynamic' (the reference's three code paths)."""
        if not isinstance(self.threshold, str):
            return "static"
        return "dynamic-fast" if self.threshold.startswith("dynamic-fast") else "dynamic"

    @property
    def mean(self) -> bool:
        """The ``*-mean`` modes: a candidate's confidence is its blob's mean, not its maximum."""
        return isinstance(self.threshold, str) and self.threshold.endswith("-mean")

    @property
    def version(self) -> int:
        """The dynamic search's version: 2 when the mode's name holds 'v2'."""
        return 2 if isinstance(self.threshold, str) and "v2" in self.threshold else 1


@dataclass(frozen=True)
class Matching:
    """What a worker needs to turn one case into lesion rows (``lesions.evaluate``)."""

    min_overlap: float
    overlap_func: str
    allow_unmatched_candidates_with_minimal_overlap: bool
    case_confidence_func: str
    lesion_labels: tuple[int, ...] | None
    disjoint_never_match: bool
    constant_blobs: bool


@dataclass(frozen=True)
class Options:
    truth: str
    input: str
    extraction: str | float
    min_voxels_detection: int
    num_lesions_to_extract: int
    dynamic_threshold_factor: float
    max_prob_round_decimals: int | None
    remove_adjacent_lesion_candidates: bool
    min_overlap: float
    overlap_func: str
    case_confidence_func: str
    allow_unmatched_candidates_with_minimal_overlap: bool
    lesion_labels: tuple[int, ...] | None
    case_weights: dict[str, float]
    likelihoods: str
    likelihood_file: str
    fp_per_case: tuple[float, ...]
    missing_cases: str
    corrections: tuple[str, ...]
    score_ci_resamples: int
    score_ci_seed: int

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        labels = phase.option("lesion_labels")
        options = cls(
            truth=phase.option("truth"),
            input=phase.option("input"),
            extraction=phase.option("extraction"),
            min_voxels_detection=phase.option("min_voxels_detection"),
            num_lesions_to_extract=phase.option("num_lesions_to_extract"),
            dynamic_threshold_factor=float(phase.option("dynamic_threshold_factor")),
            max_prob_round_decimals=phase.option("max_prob_round_decimals"),
            remove_adjacent_lesion_candidates=phase.option("remove_adjacent_lesion_candidates"),
            min_overlap=float(phase.option("min_overlap")),
            overlap_func=phase.option("overlap_func"),
            case_confidence_func=phase.option("case_confidence_func"),
            allow_unmatched_candidates_with_minimal_overlap=phase.option("allow_unmatched_candidates_with_minimal_overlap"),
            lesion_labels=None if labels is None else tuple(sorted(int(v) for v in labels)),
            case_weights={str(k): float(v) for k, v in phase.option("case_weights").items()},
            likelihoods=phase.option("likelihoods"),
            likelihood_file=phase.option("likelihood_file"),
            fp_per_case=tuple(float(x) for x in phase.option("fp_per_case")),
            missing_cases=phase.option("missing_cases"),
            corrections=tuple(phase.option("corrections")),
            score_ci_resamples=phase.option("score_ci_resamples"),
            score_ci_seed=phase.option("score_ci_seed"),
        )
        options.validate()
        return options

    def validate(self) -> None:
        if self.lesion_labels is not None and 0 in self.lesion_labels:
            raise PhaseError("phase.yaml: lesion_labels lists 0, the background; list the lesion values only")
        keys = [fp_key(x) for x in self.fp_per_case]
        if len(set(keys)) != len(keys):
            raise PhaseError("phase.yaml: two fp_per_case values give the same column name; keep one")

    def extraction_settings(self) -> Extraction | None:
        """The softmax extraction's settings, or None for detection maps."""
        if self.input != "softmax":
            return None
        return Extraction(
            threshold=self.extraction,
            min_voxels_detection=self.min_voxels_detection,
            num_lesions_to_extract=self.num_lesions_to_extract,
            dynamic_threshold_factor=self.dynamic_threshold_factor,
            max_prob_round_decimals=self.max_prob_round_decimals,
            remove_adjacent_lesion_candidates=self.remove_adjacent_lesion_candidates,
        )

    def matching(self) -> Matching:
        return Matching(
            min_overlap=self.min_overlap,
            overlap_func=self.overlap_func,
            allow_unmatched_candidates_with_minimal_overlap=self.allow_unmatched_candidates_with_minimal_overlap,
            case_confidence_func=self.case_confidence_func,
            lesion_labels=self.lesion_labels,
            disjoint_never_match="disjoint_never_match" in self.corrections,
            constant_blobs="constant_blobs" in self.corrections,
        )

    def weight(self, case: str) -> float | int:
        """The case's sample weight: the phase's, else picai_eval's default (the integer 1)."""
        return self.case_weights.get(case, 1)


def fp_key(fp: float) -> str:
    """The aggregate key of the sensitivity at ``fp`` false positives per case: the PI-CAI
    Grand-Challenge evaluation's ``lesion_TPR_at_FPR_0.1``, its dot written as ``_`` (metrics
    keys cannot hold dots)."""
    return "lesion_TPR_at_FPR_" + repr(float(fp)).replace(".", "_")
