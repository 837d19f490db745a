"""What every evaluation a phase can choose provides: the interface the phase's listed metrics
(``listed``) and the whole evaluations (``mode_results``: panoptica's configuration, the BraTS
presets) implement.

``modes.from_phase`` reads once what the phase evaluates (``Options.mode``: its classes, its
keys and their kinds, its default ranking); the suite picks the implementation by that mode's
``kind`` (``segmentation.EVALUATIONS``) and calls it through this interface only, at every
entry point: the plan, the warm-up, each case, its preflight, the summary and the sources of
the keys.
"""

from pathlib import Path
from typing import Protocol


class Evaluation(Protocol):
    def warm_up(self, options) -> None:
        """Compile (or load from numba's cache) the kernels the phase uses, in the parent, so
        that the forked workers do not each pay for it."""

    def context(self, options, truth: dict[str, Path], cases: list[str], policy: str) -> dict:
        """What the summary needs in the plan's context beyond the suite's own (the truth
        files ``truth``, the ``cases`` to score, the missing-case ``policy``)."""

    def score(self, task) -> dict:
        """One case (an ``inputs.CaseTask``): its ``classes`` (class -> key -> value), its
        ``spacing``, ``shape`` and ``diagonal``, and its ``instances`` (instances.json)."""

    def check(self, task) -> dict:
        """The preflight of one case: the prediction read and refused as ``score`` reads it,
        against the truth's header in the public phase; the estimated ``seconds``."""

    def summarize(self, phase, plan, outcomes) -> object:
        """The ``contract.Result``: metrics.json's cases, aggregates and reference, the
        leaderboard, the case scores and the evaluation's files."""

    def definitions(self, options) -> dict[str, dict]:
        """Each key's source, as metrics.json's ``reference.definitions`` gives it."""
