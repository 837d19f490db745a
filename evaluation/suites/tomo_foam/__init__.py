"""TomoChallenge foam phantoms: foam Dice, void recall per size class, boundary Dice.

Reproduces tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.py``
(``compute_scores``, ``compute_scores_dyn``, ``metrics``, ``load_submission``), with the ground
truth voxelised as dmpelt/foam_ct_phantom@5aaaf7e ``genvol`` does (``phantom``). The phase
names one or more phantoms (cases), each given by its void list or by a label volume
precomputed from it (``rasterize``); the submission holds one volume per phantom, bit-packed
as the challenge packs it or plain (``readers.tomo_volumes``). Everything is counted slab by
slab (``scoring``, ``scores``). docs/suites/tomo_foam.md is the organiser's page.

Modules: ``options`` (the phase options), ``truth`` (a phantom's ground truth), ``phantom``
(the voxeliser), ``inputs`` (tasks), ``scores`` (the reference's ``metrics`` as counts),
``scoring`` (one phantom), ``aggregate`` (the phase's result), ``rasterize`` (build time).
"""

from pathlib import Path

from evaluation.contract import Outcome, Plan, Resources, Result, Suite
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.tomo_foam import aggregate, inputs, scoring, truth
from evaluation.suites.tomo_foam.inputs import Phantoms, PhantomTask
from evaluation.suites.tomo_foam.options import NAME, Options
from evaluation.suites.tomo_foam.rasterize import rasterize_phase

__all__ = ["TomoFoam", "Options", "rasterize_phase"]


@register
class TomoFoam(Suite):
    name = NAME
    ranking = "harm_mean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        return inputs.plan(submission, phase, resources)

    def score(self, payload: PhantomTask) -> dict:
        return scoring.score_phantom(payload)

    def summarize(self, phase: Phase, plan: Plan[Phantoms], outcomes: dict[str, Outcome]) -> Result:
        return aggregate.summarize(list(plan.context.names), outcomes)

    def cases(self, plan: Plan[Phantoms]) -> list[str]:
        return list(plan.context.names)

    def census(self, phase: Phase, plan: Plan[Phantoms], outcomes: dict[str, Outcome], result: Result) -> dict:
        return aggregate.census(list(plan.context.names), outcomes, Options.from_phase(phase).harm_mean_of)

    def restrict(self, plan: Plan[Phantoms], cases: set[str]) -> Plan[Phantoms]:
        kept = Phantoms(tuple(name for name in plan.context.names if name in cases))
        return Plan([t for t in plan.tasks if t.key in cases], kept)

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "reference", "repository": aggregate.REFERENCE["repository"], "commit": aggregate.REFERENCE["commit"]}
        return {
            key: {**where, "function": "foam_phantom_utils.py:compute_scores, metrics"}
            for key in ("harm_mean", "dice", "recall", "boundary_dice")
        }

    def publish(self, phase: Phase, output: Path) -> None:
        truth.publish(phase, Options.from_phase(phase), output)

    def check(self, payload: PhantomTask) -> dict:
        return scoring.check_phantom(payload)
