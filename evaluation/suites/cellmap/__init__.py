"""CellMap Segmentation Challenge, reproducing the official evaluator.

Reference: janelia-cellmap/cellmap-segmentation-challenge, ``v2`` = commit 0f50f70 and
``head`` = commit 6b9ad68 (``utils/eval_utils``: ``scoring.py``, ``instance_matching.py``,
``distance.py``, ``aggregation.py``, ``submission.py``; ``utils/matched_crop.py``).
docs/suites/cellmap.md describes the phase, the submission and every rule.

A submission is a zarr with one group per test crop (``crop<N>``) and one array per label.
Every array of every crop of ``truth.zarr`` is scored: instance classes by connected
components, min-cost-flow matching and per-instance Hausdorff; the others as semantic masks.

- ``inputs``: the manifest, the submission's crops and labels, the tasks and their arrays;
- ``alignment``: a submitted array onto the crop's voxel grid (``MatchedCrop``);
- ``instances``: connected components, matching and per-instance distances, from one pass
  over the crop in tiles (``tiles``: one tile labelled; ``scan``: the tiles joined) and sets
  read box by box (``streamed_sets``);
- ``v2`` / ``head``: each version's per-label entry, aggregation and result files, behind
  the interface of ``versions``, chosen here once by ``options.version``;
- ``scoring`` (one task) and ``aggregate`` (the result).
"""

import dataclasses
from collections import Counter
from pathlib import Path

from evaluation import log
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task, census
from evaluation.phase import Phase
from evaluation.submission import Submission
from evaluation.suites import register
from evaluation.suites.cellmap import aggregate, head, inputs, scoring, v2
from evaluation.suites.cellmap.inputs import Pair
from evaluation.suites.cellmap.options import Options
from evaluation.suites.cellmap.versions import Version

__all__ = ["VERSIONS", "CellMap", "Options"]

VERSIONS: dict[str, Version] = {"v2": v2, "head": head}
_log = log.get("cellmap")


@register
class CellMap(Suite):
    """One task per submitted (crop, label); each entry point picks the version module once,
    from the phase's options, the task's payload or the plan's context."""

    name = "cellmap"
    ranking = "overall_score"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan[inputs.Context]:
        return inputs.plan(submission, phase, options := Options.from_phase(phase), VERSIONS[options.version])

    def score(self, payload: Pair) -> dict:
        return scoring.score(payload, VERSIONS[payload.version])

    def summarize(self, phase: Phase, plan: Plan[inputs.Context], outcomes: dict[str, Outcome]) -> Result:
        return aggregate.summarize(plan, outcomes, VERSIONS[plan.context.options.version])

    def case_of(self, task: Task) -> str:
        return task.payload.crop

    def census(self, phase: Phase, plan: Plan[inputs.Context], outcomes: dict[str, Outcome], result: Result) -> dict:
        """(crop, label) pairs by the rule that gave their entry other than scoring it: not
        submitted (``missing``: zero scores, the capped distance), failed, or a pathological
        status (too many instances, matching given up: the reference's own scores). The
        pathological pairs are named, in the log too: under ``head``'s default (``ignore``)
        they leave their class, so noise that makes a badly predicted crop pathological lifts
        the class's score (``pathological_crops: unmatched`` corrects it)."""
        entries = [
            (f"{crop}/{label}", entry) for crop, labels in result.metrics["case"].items() for label, entry in labels.items()
        ]
        statuses = Counter(entry.get("status", "scored") for _, entry in entries)
        statuses.pop("scored", None)
        pathological = {
            status: [pair for pair, entry in entries if entry.get("status") == status]
            for status in statuses
            if status not in ("missing", "failed")
        }
        if pathological:
            options = plan.context.options
            _log.warning(
                "pathological_crops",
                policy=options.pathological_crops if options.version == "head" else "reference scores (v2)",
                pairs=pathological,
            )
        return census("(crop, label) pairs", statuses, self.ranking, units=pathological)

    def cases(self, plan: Plan[inputs.Context]) -> list[str]:
        """Every truth crop: submitted labels are tasks, the others fixed entries."""
        return sorted({*plan.context.fixed, *(task.payload.crop for task in plan.tasks)}, key=inputs.crop_order)

    def restrict(self, plan: Plan[inputs.Context], cases: set[str]) -> Plan[inputs.Context]:
        context = plan.context
        fixed = {crop: labels for crop, labels in context.fixed.items() if crop in cases}
        return Plan([t for t in plan.tasks if t.payload.crop in cases], dataclasses.replace(context, fixed=fixed))

    def definitions(self, phase: Phase) -> dict[str, dict]:
        return aggregate.definitions(Options.from_phase(phase), VERSIONS[Options.from_phase(phase).version])

    def publish(self, phase: Phase, output: Path) -> None:
        inputs.publish(phase, Options.from_phase(phase), output)

    def check(self, payload: Pair) -> dict:
        return scoring.check(payload, VERSIONS[payload.version])
