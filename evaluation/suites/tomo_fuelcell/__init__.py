"""TomoChallenge operando fuel cells: Dice of water in four regions and their harmonic mean.

No scoring code was published for this track: tomochallenge/tomochallenge_utils@fab535f
``fuelcell_utils.py`` only packs submissions (reconstructed slices 240-840 of 1100, bit-packed
as for the foam). The challenge website defines the score: the Dice of water in region 1
(catalyst-coated membrane + gas diffusion layer + channels), region 2 (one channel), region 3
(gas diffusion layer) and region 4 (membrane), and the harmonic mean of the four, for three
time steps A, B and C. This suite implements that definition with the foam scorer's IEEE
conventions (``scoring``). The regions come with the ground truth (``inputs``); regions may
nest, and every region is counted in one pass (``regions``). docs/suites/tomo_fuelcell.md is
the organiser's page.
"""

import dataclasses
from pathlib import Path

from evaluation.contract import Outcome, Plan, Resources, Result, Suite
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.tomo_fuelcell import aggregate, inputs, scoring
from evaluation.suites.tomo_fuelcell.inputs import StepTask
from evaluation.suites.tomo_fuelcell.options import NAME, Options

__all__ = ["TomoFuelCell", "Options"]


@register
class TomoFuelCell(Suite):
    name = NAME
    ranking = "harm_mean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[inputs.Steps]:
        return inputs.plan(submission, phase, resources)

    def score(self, payload: StepTask) -> dict:
        return scoring.score_step(payload)

    def summarize(self, phase: Phase, plan: Plan[inputs.Steps], outcomes: dict[str, Outcome]) -> Result:
        return aggregate.summarize(plan.context, outcomes)

    def cases(self, plan: Plan[inputs.Steps]) -> list[str]:
        return list(plan.context.steps)

    def census(self, phase: Phase, plan: Plan[inputs.Steps], outcomes: dict[str, Outcome], result: Result) -> dict:
        return aggregate.census(plan.context, outcomes, Options.from_phase(phase).empty_region)

    def restrict(self, plan: Plan[inputs.Steps], cases: set[str]) -> Plan[inputs.Steps]:
        steps = tuple(step for step in plan.context.steps if step in cases)
        return Plan([t for t in plan.tasks if t.key in cases], dataclasses.replace(plan.context, steps=steps))

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "suite", "definition": aggregate.REFERENCE["definition"]}
        return {"harm_mean": {**where, "function": "evaluation/suites/tomo_fuelcell/aggregate.py:summarize"}}

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, output)

    def check(self, payload: StepTask) -> dict:
        return scoring.check_step(payload)
