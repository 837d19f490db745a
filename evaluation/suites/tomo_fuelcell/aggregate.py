"""The phase's result: each time step's scores, and each score's mean over the time steps.

The challenge website ranks by the harmonic mean of the four region Dice per time step (no
code was published: tomochallenge/tomochallenge_utils@fab535f ``fuelcell_utils.py`` only packs
submissions); the leaderboard gets the mean over the steps and each step's own. A time step
that could not be scored counts 0, as an empty submission would rank.
"""

import math

import numpy as np

from evaluation.contract import Outcome, Result
from evaluation.contract import census as census_node
from evaluation.metrics.means import harmonic_mean
from evaluation.suites.tomo_fuelcell.inputs import Steps
from evaluation.suites.tomo_fuelcell.regions import RegionCounts, dice

REFERENCE = {
    "repository": "tomochallenge/tomochallenge_utils",
    "commit": "fab535fd79844c23f6f0660453d83e1f1b9fff46",
    "definition": "challenge website: water Dice in regions 1-4 and their harmonic mean (no published code)",
}


def summarize(context: Steps, outcomes: dict[str, Outcome]) -> Result:
    keys = ["harm_mean", *(f"dice_{name}" for name in context.regions)]
    cases = {}
    for step in context.steps:
        outcome = outcomes[step]
        if outcome.ok:
            cases[step] = {**outcome.value, "status": "scored"}
        else:
            cases[step] = {**dict.fromkeys(keys, 0.0), "status": "failed", "error": outcome.message}
    aggregates = {key: float(np.mean([cases[step][key] for step in cases])) for key in keys}
    per_step = {f"harm_mean_{step}": cases[step]["harm_mean"] for step in cases}
    metrics = {"case": cases, "aggregates": {**aggregates, **per_step}, "reference": REFERENCE}
    return Result(
        metrics=metrics, leaderboard={**aggregates, **per_step}, case_scores={step: cases[step]["harm_mean"] for step in cases}
    )


def census(context: Steps, outcomes: dict[str, Outcome], empty_region: str) -> dict:
    """Regions where neither the submission nor the truth has water (the ``empty_region``
    rule), and the leaderboard's ``harm_mean`` under each value of it, from the counts."""
    empty, means = 0, {"nan": [], "one": []}
    for step in context.steps:
        outcome = outcomes[step]
        counts = [RegionCounts(**outcome.value["counts"][name]) for name in context.regions] if outcome.ok else []
        empty += sum(c.submitted + c.truth == 0 for c in counts)
        for policy, when_empty in (("nan", math.nan), ("one", 1.0)):
            means[policy].append(harmonic_mean([dice(c, when_empty) for c in counts]) if outcome.ok else 0.0)
    values = {policy: float(np.mean(found)) if found else None for policy, found in means.items()}
    return census_node(
        "(time step, region) pairs",
        {"empty region (neither has water)": empty},
        "harm_mean",
        {"empty_region": (empty_region, values)},
    )
