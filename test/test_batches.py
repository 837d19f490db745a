"""A submission's files paired with the truth's cases, and cases scored together in one task:
the shared rules of the suites that score small files (segmentation, multiclass, detection)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from evaluation.batches import Case, every_case
from evaluation.errors import SubmissionError
from evaluation.submission import pair_cases

TRUTH = {name: Path(f"/truth/{name}.nii.gz") for name in ("a", "b", "c")}


def test_pairing_follows_the_missing_cases_policy():
    submitted = {"b": Path("/in/b.nii.gz"), "a": Path("/in/a.nii.gz")}
    assert pair_cases(submitted, TRUTH, "empty") == ["a", "b", "c"]
    assert pair_cases(submitted, TRUTH, "skip") == ["a", "b"]
    with pytest.raises(SubmissionError, match=r"^model 'm': 1 of 3 test cases have no prediction \(c\)$"):
        pair_cases(submitted, TRUTH, "reject", "model 'm': ")
    assert pair_cases({**submitted, "c": Path("/in/c.mha")}, TRUTH, "reject") == ["a", "b", "c"]


def test_a_file_of_no_case_is_named_as_the_participant_sees_it():
    """By its name, and by the case read from it where a platform named it otherwise."""
    submitted = {"a": Path("/in/a.nii.gz"), "zz": Path("/in/zz.nii.gz"), "job7": Path("/in/output.mha")}
    with pytest.raises(SubmissionError) as raised:
        pair_cases(submitted, TRUTH, "empty")
    assert str(raised.value) == "2 file(s) match no test case (job7 (output.mha), zz.nii.gz); name each file after its test case"


@dataclass(frozen=True)
class Batch:
    cases: tuple[Case, ...]


def test_a_batch_names_every_unusable_case_at_once():
    batch = Batch(tuple(Case(name, f"/truth/{name}", f"/in/{name}", f"{name}.nii.gz") for name in "abcdefg"))

    def score(given, item):
        assert given is batch
        if item.case in "bcdef":
            raise SubmissionError(f"{item.display}: broken")
        return len(item.case)

    assert every_case(Batch(batch.cases[:1]), lambda _, item: item.case) == {"a": "a"}
    with pytest.raises(SubmissionError) as raised:
        every_case(batch, score)
    assert str(raised.value) == "b.nii.gz: broken (and 4 more: c.nii.gz: broken; d.nii.gz: broken; e.nii.gz: broken ...)"


@pytest.mark.parametrize("suite", ["segmentation", "detection", "multiclass"])
def test_a_truth_folder_that_cannot_be_read_is_the_phases_problem(tmp_path, suite):
    """Every suite reading a folder of truth label maps refuses a missing, an empty or a
    dotted one as a phase error (exit 1, never the participant's fault), naming the folder."""
    import numpy as np

    from evaluation.errors import PhaseError
    from evaluation.phase import Phase
    from evaluation.suites import detection, multiclass, segmentation

    inputs = {"segmentation": segmentation.inputs, "detection": detection.inputs, "multiclass": multiclass.inputs}[suite]
    options = type("Options", (), {"truth": "labels", "case_weights": {}})()
    phase = Phase(root=tmp_path, suite=suite)
    with pytest.raises(PhaseError, match="the truth folder 'labels' does not exist"):
        inputs.truth_cases(phase, options)
    (tmp_path / "labels").mkdir()
    with pytest.raises(PhaseError, match="holds no label maps"):
        inputs.truth_cases(phase, options)
    np.save(tmp_path / "labels" / "case.a.npy", np.zeros((2, 2), np.uint8))
    if suite == "multiclass":  # dots are written otherwise in its keys
        assert list(inputs.truth_cases(phase, options)) == ["case.a"]
    else:
        with pytest.raises(PhaseError, match="must not contain dots"):
            inputs.truth_cases(phase, options)
