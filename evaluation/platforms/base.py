"""The local platform, and the interface the others refine."""

from pathlib import Path

from evaluation import phase as phases
from evaluation.archive import Limits
from evaluation.submission import Submission, unpack
from evaluation.suites.base import Report

PLATFORM_GROUND_TRUTH = Path("/opt/ml/input/data/ground_truth")  # Grand-Challenge phase tarball
BAKED_GROUND_TRUTH = Path("/opt/app/ground-truth")


def default_ground_truth() -> Path:
    """The platform's ground truth when it supplies one, else the copy baked into the image."""
    return PLATFORM_GROUND_TRUTH if (PLATFORM_GROUND_TRUTH / phases.PHASE_FILE).is_file() else BAKED_GROUND_TRUTH


class Platform:
    """Local runs: the submission folder, phase folder and output folder as given."""

    name = "local"

    def __init__(self, input_folder: Path, ground_truth: Path | None, output: Path):
        self.input = input_folder
        self.ground_truth = ground_truth or self.default_ground_truth()
        self.output = output

    @staticmethod
    def recognises(input_folder: Path) -> bool:
        return True

    def default_ground_truth(self) -> Path:
        return default_ground_truth()

    def submission_folder(self) -> Path:
        return self.input

    def submission(self, phase: phases.Phase, scratch: Path) -> Submission:
        return unpack(self.submission_folder(), scratch, Limits.from_options(phase.option("archive")))

    def publish(self, report: Report, metrics: dict) -> None:
        """Write what the platform needs beyond metrics.json (nothing, locally)."""
