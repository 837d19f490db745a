"""The phase's result: each phantom's scores, and each score's mean over the phantoms.

The reference scores one phantom at a time (tomochallenge/tomochallenge_utils@fab535f
``foam_phantom_utils.compute_scores``); a phase of several phantoms ranks by the mean of
their harmonic means. A phantom that could not be scored counts 0 in every mean, as an
empty submission would rank.
"""

import math

import numpy as np

from evaluation.contract import Outcome, Result
from evaluation.contract import census as census_node
from evaluation.metrics.means import harmonic_mean
from evaluation.suites.tomo_foam.scores import SCORE_KEYS

REFERENCE = {
    "repository": "tomochallenge/tomochallenge_utils",
    "commit": "fab535fd79844c23f6f0660453d83e1f1b9fff46",
    "phantom_generator": "dmpelt/foam_ct_phantom@5aaaf7e",
}


def summarize(names: list[str], outcomes: dict[str, Outcome]) -> Result:
    cases = {name: case_entry(outcomes[name]) for name in names}
    aggregates = mean_scores(list(cases.values()))
    metrics = {"case": cases, "aggregates": aggregates, "reference": REFERENCE}
    return Result(metrics=metrics, leaderboard=dict(aggregates), case_scores={name: cases[name]["harm_mean"] for name in cases})


def case_entry(outcome: Outcome) -> dict:
    """A phantom's entry in ``case``: its scores, or zeros and why it failed."""
    if outcome.ok:
        return {**outcome.value, "status": "scored"}
    return {**dict.fromkeys(SCORE_KEYS, 0.0), "status": "failed", "error": outcome.message}


def mean_scores(entries: list[dict]) -> dict[str, float]:
    """Each score's arithmetic mean over the phantoms (NaN if one is NaN)."""
    return {key: float(np.mean([entry[key] for entry in entries])) for key in SCORE_KEYS}


PARTS = ("dice_foam", "sens_large", "sens_medium", "sens_small", "dice_edge")  # the harmonic mean's five scores


def census(names: list[str], outcomes: dict[str, Outcome], harm_mean_of: str) -> dict:
    """Undefined scores (a void class absent from the phantom: NaN), and the leaderboard's
    ``harm_mean`` under each ``harm_mean_of`` (the reference's NaN, or the defined scores')."""
    undefined = sum(math.isnan(outcomes[n].value[k]) for n in names if outcomes[n].ok for k in PARTS)
    values = {
        policy: float(
            np.mean(
                [
                    harmonic_mean([outcomes[n].value[k] for k in PARTS], policy == "defined") if outcomes[n].ok else 0.0
                    for n in names
                ]
            )
        )
        for policy in ("all", "defined")
    }
    return census_node(
        "(phantom, score) pairs",
        {"undefined score (void class absent)": undefined},
        "harm_mean",
        {"harm_mean_of": (harm_mean_of, values)},
    )
