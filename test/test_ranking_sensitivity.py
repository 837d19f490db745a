"""Ranking sensitivity to the metric definition: the comparison on rankings known by hand, and
the whole command on a small segmentation phase where the libraries' empty-mask rules decide
the winner."""

import json
import subprocess
import sys

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import ROOT

from evaluation import phase as phases
from evaluation.errors import PhaseError
from evaluation.organizer.ranking import config, final, methods, sensitivity


def ranking(matrix) -> final.FinalRanking:
    matrix = np.asarray(matrix, dtype=np.float64)
    rows = [(f"c{j}", f"s{i}", matrix[i, j]) for i in range(matrix.shape[0]) for j in range(matrix.shape[1])]
    return final.rank_tasks([methods.prepare("t", rows, True)], config.resolve({"resamples": 0}))


def test_changed_places_and_reversed_pairs_against_the_reference():
    chosen = [
        sensitivity.Variant("as configured", "phase", {}),
        sensitivity.Variant("b", "b", {}),
        sensitivity.Variant("c", "c", {}),
    ]
    rankings = {
        "as configured": ranking([[0.9], [0.8], [0.7]]),
        "b": ranking([[0.8], [0.9], [0.7]]),  # s0 and s1 swap
        "c": "not scored: no instance evaluation",
    }
    result = sensitivity.compare(chosen, rankings)
    assert result["submissions"] == ["s0", "s1", "s2"]
    same, swapped, failed = result["variants"]
    assert same["changed"] == [] and same["kendall_tau"] == 1.0
    assert swapped["changed"] == ["s0", "s1"] and swapped["swapped_pairs"] == [["s0", "s1"]]
    assert swapped["kendall_tau"] == pytest.approx(1 / 3, rel=1e-15) and swapped["ranks"] == {"s0": 2.0, "s1": 1.0, "s2": 3.0}
    assert failed["error"].startswith("not scored")


def test_variants_cover_the_spec_and_only_segmentation(tmp_path):
    phase = phases.Phase(tmp_path, "segmentation", {"classes": [1], "instance_metrics": ["detection"]})
    found = sensitivity.variants(phase, config.from_phase(phase))
    assert [v.folder for v in found] == ["phase"] + [
        f"{lib}-{e}" for lib in ("panoptica", "metricsreloaded", "monai", "deepmind") for e in ("definition", "nan")
    ]
    deepmind = next(v for v in found if v.folder == "deepmind-nan")
    assert deepmind.overrides == {"definition": "deepmind", "definitions": {"instances": "panoptica"}, "empty_masks": "nan"}
    with pytest.raises(PhaseError, match="segmentation"):
        sensitivity.variants(phases.Phase(tmp_path, "cellmap", {}), config.resolve(None))


def image(array, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))


def run_where_the_empty_mask_rule_decides(tmp_path):
    """Case 'e' has no class 2 in its truth. 'careful' predicts none there (both empty: Dice 1
    under MetricsReloaded, 0 under panoptica) but misses half of class 1 on case 'f'; 'bold'
    predicts a false class-2 blob on 'e' (Dice 0 under both) and is perfect on 'f'. Case
    scores (Dice averaged over the classes), MetricsReloaded: careful 1 and 5/6, bold 1/2 and
    1; panoptica: careful 1/2 and 5/6, bold 1/2 and 1. The mean ranks careful first under
    MetricsReloaded (the phase's definition), bold under panoptica."""
    truth = {"e": np.zeros((12, 12), np.uint8), "f": np.zeros((12, 12), np.uint8)}
    truth["e"][2:8, 2:8] = 1
    truth["f"][2:8, 2:8] = 1
    truth["f"][8:11, 8:11] = 2
    careful = {"e": truth["e"].copy(), "f": truth["f"].copy()}
    careful["f"][2:8, 2:5] = 0  # half of class 1 missed
    bold = {"e": truth["e"].copy(), "f": truth["f"].copy()}
    bold["e"][9:11, 9:11] = 2  # a false class 2 where the truth has none
    phase = tmp_path / "phase"
    for case, array in truth.items():
        image(array, phase / "labels" / f"{case}.nii.gz")
    for name, predicted in (("careful", careful), ("bold", bold)):
        for case, array in predicted.items():
            image(array, tmp_path / "subs" / name / f"{case}.nii.gz")
    (phase / "phase.yaml").write_text(
        "suite: segmentation\nclasses: [1, 2]\nmetrics: [dice]\n"
        "final_ranking:\n  na_treat: 0\n  sensitivity: {definitions: [panoptica, metricsreloaded], empty_masks: [definition]}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "sensitivity", "--ground-truth", phase, "--submissions", tmp_path / "subs"]
        + ["--output", tmp_path / "out", "--workers", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path / "out"


@pytest.mark.slow
def test_the_empty_mask_rule_decides_the_winner(tmp_path):
    """``sensitivity`` ranks the two uploads above as each library's empty-mask rule does."""
    run_where_the_empty_mask_rule_decides(tmp_path)
    result = json.loads((tmp_path / "out" / "sensitivity.json").read_text())
    ranks = {v["variant"]: v["ranks"] for v in result["variants"]}
    assert ranks["as configured"] == ranks["metricsreloaded"] == {"careful": 1.0, "bold": 2.0}
    assert ranks["panoptica"] == {"careful": 2.0, "bold": 1.0}
    panoptica = next(v for v in result["variants"] if v["variant"] == "panoptica")
    assert panoptica["swapped_pairs"] == [["careful", "bold"]] and panoptica["kendall_tau"] == pytest.approx(-1, abs=1e-15)
    for name in ("sensitivity.csv", "sensitivity.png", "sensitivity.html", "panoptica-definition/leaderboard.json"):
        assert (tmp_path / "out" / name).is_file()
