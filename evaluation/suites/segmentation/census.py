"""The segmentation suite's census: how many (case, class) pairs hit each empty-mask rule
(``empties.situation``: both masks, only the truth or only the prediction empty) and left the
ranking key undefined, and the ranking score under each ``nan_policy`` and, where the phase
keeps the definitions' own empty-mask conventions, under ``empty_masks: nan`` (every compared
value of an empty pair null). Both are computed from the cases' values, no case is scored
again; ``empty_masks: definition`` from ``nan`` would need the values the conventions give,
so it is not offered then."""

import copy
import dataclasses
from collections import Counter

from evaluation.contract import census as census_node
from evaluation.phase import option_schemas
from evaluation.suites.segmentation import aggregate
from evaluation.suites.segmentation.options import Options


def nan_policies() -> tuple[str, ...]:
    """Every ``nan_policy`` of the schema but ``definition`` (which is one of them)."""
    return tuple(p for p in option_schemas("segmentation")["nan_policy"]["enum"] if p != "definition")


def _score(options: Options, scored: dict[str, dict]) -> float | None:
    overall = aggregate.summarize(options, scored, [options.ranking])["overall"]
    return aggregate.ranking_score(options, overall)


def _empties_as_null(options: Options, scored: dict[str, dict]) -> dict[str, dict]:
    """The cases' values as ``empty_masks: nan`` gives them, for the ranking key."""
    key = options.ranking
    out = copy.deepcopy(scored)
    for value in out.values():
        for cls, where in value.get("empty", {}).items():
            if where is None:
                continue
            entry = value["classes"][cls]
            if key.startswith("instances_") and "instances" in entry:
                entry["instances"][key.removeprefix("instances_")] = None
            elif key in entry:
                entry[key] = None
    return out


def census(options: Options, scored: dict[str, dict]) -> dict:
    rules = Counter()
    for value in scored.values():
        for cls in options.classes:
            where = value.get("empty", {}).get(cls.name)
            if where is not None:
                rules[where] += 1
            if not aggregate.defined(aggregate.flat(value["classes"][cls.name]).get(options.ranking)):
                rules[f"{options.ranking} undefined"] += 1
    alternatives = {
        "nan_policy": (
            options.nan_policy,
            {policy: _score(dataclasses.replace(options, nan_policy=policy), scored) for policy in nan_policies()},
        )
    }
    if options.empty_masks == "definition" and not options.empty_values:
        alternatives["empty_masks"] = (
            "definition",
            {"definition": _score(options, scored), "nan": _score(options, _empties_as_null(options, scored))},
        )
    return census_node("(case, class) pairs", rules, "score", alternatives)
