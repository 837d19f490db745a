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
from evaluation.errors import participant_file
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.tomo_foam import aggregate, inputs, scoring, truth
from evaluation.suites.tomo_foam.inputs import PhantomTask
from evaluation.suites.tomo_foam.options import NAME, Options
from evaluation.suites.tomo_foam.rasterize import rasterize_phase

__all__ = ["TomoFoam", "Options", "rasterize_phase"]


@register
class TomoFoam(Suite):
    name = NAME
    ranking = "harm_mean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        with participant_file():  # the ground truth's reads say so themselves (organizer_file)
            return inputs.plan(submission, phase, resources)

    def score(self, payload: PhantomTask) -> dict:
        with participant_file():
            return scoring.score_phantom(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        return aggregate.summarize(plan.context, outcomes)

    def cases(self, plan: Plan) -> list[str]:
        return list(plan.context)

    def census(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome], result: Result) -> dict:
        return aggregate.census(plan.context, outcomes, Options.from_phase(phase).harm_mean_of)

    def restrict(self, plan: Plan, cases: set[str]) -> Plan:
        return Plan([t for t in plan.tasks if t.key in cases], [name for name in plan.context if name in cases])

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "reference", "repository": aggregate.REFERENCE["repository"], "commit": aggregate.REFERENCE["commit"]}
        return {
            key: {**where, "function": "foam_phantom_utils.py:compute_scores, metrics"}
            for key in ("harm_mean", "dice", "recall", "boundary_dice")
        }

    def publish(self, phase: Phase, output: Path) -> None:
        truth.publish(phase, Options.from_phase(phase), output)

    def check(self, payload: PhantomTask) -> dict:
        with participant_file():
            return scoring.check_phantom(payload)
