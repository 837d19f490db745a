"""FISBe / FlyLight instance segmentation benchmark, reproducing the official evaluation.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d (``evalinstseg``, command
line ``--app flylight``): per-image skeleton-based scores (``image``, after
``evaluate.evaluate_volume``) and the cross-image aggregation of ``summarize.py``
(``aggregate``). docs/suites/fisbe.md describes the phase, the submission and every rule.

Phase layout: one ground-truth file per sample in the phase folder (``<sample>.zarr`` with
``volumes/gt_instances``, an (instances, z, y, x) stack, as FISBe releases it; or a label
image), ``phase.yaml`` naming the partly labelled samples. The submission holds one
prediction per sample, ``<sample>.hdf|.h5|.zarr|.tif``, a label image or a channel stack.

Arrays are read channel by channel and slab by slab and kept as sparse per-instance voxel
lists (``readers.label_stacks``, ``metrics.sparse_labels``), so a 7 x 385 x 685 x 686 sample
never exists whole in memory.
"""

from pathlib import Path

from evaluation import public
from evaluation.contract import Outcome, Plan, Resources, Result, Suite
from evaluation.metrics import lee_thinning
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.fisbe import aggregate, inputs, scoring
from evaluation.suites.fisbe.inputs import Sample
from evaluation.suites.fisbe.options import Options


@register
class Fisbe(Suite):
    name = "fisbe"
    ranking = "S"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[None]:
        tasks = inputs.tasks(submission, phase, Options.from_phase(phase))
        if not public.is_public(phase):  # once here rather than in every forked worker; a check runs no kernel
            lee_thinning.warm_up()
        return Plan(tasks=tasks, missing=[t.key for t in tasks if t.payload.prediction is None])

    def score(self, payload: Sample) -> dict:
        return scoring.score(payload)

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, Options.from_phase(phase), output)

    def check(self, payload: Sample) -> dict:
        return scoring.check(payload)

    def summarize(self, phase: Phase, plan: Plan[None], outcomes: dict[str, Outcome]) -> Result:
        return aggregate.summarize(plan, outcomes)

    def definitions(self, phase: Phase) -> dict[str, dict]:
        where = {"source": "reference", "repository": aggregate.REFERENCE["repository"], "commit": aggregate.REFERENCE["commit"]}
        pooled = "evalinstseg/summarize.py:average_flylight_score_over_instances"
        return {column: {**where, "function": f"{pooled} ({entry})"} for column, entry in aggregate.LEADERBOARD.items()}
