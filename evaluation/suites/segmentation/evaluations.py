"""What every evaluation a phase can choose provides: the interface the phase's listed metrics
(``listed``) and the whole evaluations (``mode_results``: panoptica's configuration, the BraTS
presets; ``autopet_evaluation``: the autoPET presets; ``topcow_results``: TopCoW's) implement.

``modes.from_phase`` reads once what the phase evaluates (``Options.mode``: its classes, its
keys and their kinds, its default ranking); the suite picks the implementation by that mode's
``kind`` (``segmentation.EVALUATIONS``) and calls it through this interface only, at every
entry point: the plan, the warm-up, each case, its preflight, the summary and the sources of the
keys.
"""

from pathlib import Path
from typing import Protocol


class Evaluation(Protocol):
    def warm_up(self, options) -> None:
        """Compile (or load from numba's cache) the kernels the phase uses, in the parent, so
        that the forked workers do not each pay for it."""

    def predictions(self, options, files: dict[str, Path], truth: dict[str, Path]) -> dict:
        """The submission's files (case name -> file, as the upload names them) as the cases'
        predictions: the same, or (several files per case) case -> the files in order."""

    def context(self, options, truth: dict[str, Path], cases: list[str], policy: str) -> dict:
        """What the summary needs in the plan's context beyond the suite's own (the truth
        files ``truth``, the ``cases`` to score, the missing-case ``policy``)."""

    def score(self, task) -> dict:
        """One case (an ``inputs.CaseTask``): its ``classes`` (class -> key -> value), its
        ``spacing``, ``shape`` and ``diagonal``, and its ``instances`` (instances.json)."""

    def check(self, task) -> dict:
        """The preflight of one case: its prediction read as ``score`` reads it, against the
        public phase's header; the estimated ``seconds``."""

    def summarize(self, phase, plan, outcomes) -> object:
        """The ``contract.Result``: metrics.json's cases, aggregates and reference, the
        leaderboard, the case scores and the evaluation's files."""

    def definitions(self, options) -> dict[str, dict]:
        """Each key's source, as metrics.json's ``reference.definitions`` gives it."""
