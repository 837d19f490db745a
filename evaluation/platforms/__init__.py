"""Platform adapters: where the submission, the phase and the output are, and what the
platform expects back.

- ``local``: the command line's ``--input/--ground-truth/--output``.
- ``grand-challenge``: ``/input/predictions.json`` lists algorithm jobs; each job's output
  image is matched to its ground truth through the job's *input* image name.
- ``codabench``: ``input/ref`` (reference data, carrying the phase) and ``input/res`` (the
  submission); a flat ``scores.json`` and ``detailed_results.html`` go to the output folder.

``detect`` picks the platform from what it finds unless one is named.
"""

from pathlib import Path

from evaluation.platforms.base import Platform
from evaluation.platforms.codabench import CodaBench
from evaluation.platforms.grand_challenge import GrandChallenge

PLATFORMS = {"local": Platform, "grand-challenge": GrandChallenge, "codabench": CodaBench}


def detect(name: str, input_folder: Path, ground_truth: Path | None, output: Path) -> Platform:
    return PLATFORMS[recognise(name, input_folder)](input_folder, ground_truth, output)


def recognise(name: str, input_folder: Path) -> str:
    """The platform ``name`` stands for: itself, or for ``auto`` the one whose input folder this is."""
    if name != "auto":
        return name
    if GrandChallenge.recognises(input_folder):
        return "grand-challenge"
    if CodaBench.recognises(input_folder):
        return "codabench"
    return "local"


__all__ = ["PLATFORMS", "Platform", "detect"]
