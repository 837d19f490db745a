"""The local platform, and the interface the others refine."""

from pathlib import Path

from evaluation import phase as phases
from evaluation.archive import Limits
from evaluation.contract import Resources, Result
from evaluation.errors import PhaseError, SubmissionError
from evaluation.platforms import additional
from evaluation.submission import Submission, unpack

PLATFORM_GROUND_TRUTH = Path("/opt/ml/input/data/ground_truth")  # Grand-Challenge phase tarball
BAKED_GROUND_TRUTH = Path("/opt/app/ground-truth")


def phase_folder(folder: Path, what: str) -> Path | None:
    """The phase in ``folder``, a platform's ground-truth location: None when the folder is
    missing or empty (nothing was uploaded there), the folder itself when ``phase.yaml`` is at
    its top, or the one subfolder holding it (an archive made with a wrapping folder: both
    platforms extract as they find it). Anything else is refused, never silently replaced by
    the phase baked into the image."""
    if not folder.is_dir():
        return None
    entries = [p for p in folder.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX"]
    if not entries:
        return None
    if (folder / phases.PHASE_FILE).is_file():
        return folder
    holding = [p for p in entries if p.is_dir() and (p / phases.PHASE_FILE).is_file()]
    if len(entries) == 1 and len(holding) == 1:
        return holding[0]
    raise PhaseError(
        f"{what} holds no {phases.PHASE_FILE} at its top (nor a single folder holding one); "
        "make the archive from inside the phase folder, e.g. tar -czf ground-truth.tar.gz -C PHASE_FOLDER ."
    )


def default_ground_truth() -> Path:
    """The platform's ground truth when it supplies one, else the copy baked into the image."""
    return phase_folder(PLATFORM_GROUND_TRUTH, "the ground-truth tarball of this phase") or BAKED_GROUND_TRUTH


def archive_limits(phase: phases.Phase) -> Limits:
    """The phase's caps for unpacking an uploaded archive."""
    return Limits.from_options(phase.option("archive"))


class Platform:
    """Local runs: the submission folder, phase folder and output folder as given."""

    name = "local"
    time_limit_s: float | None = None  # the platform's limit for the whole run, where it is known

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

    def intake(self, phase: phases.Phase, scratch: Path, resources: Resources) -> tuple[Submission, dict | None]:
        """The submission, and the phase's additional inputs as given (None when it declares
        none): everything grading and the preflight read of the upload before planning.
        Running out of memory on it is the upload's fault (it was larger than it could be)."""
        try:
            submission = self.submission(phase, scratch)
        except MemoryError:
            raise SubmissionError(
                f"reading the submission needed more than the {resources.memory_bytes >> 20} MB of memory available; "
                "upload smaller files"
            ) from None
        given = additional.read_inputs(phase, self.submission_folder()) if additional.input_paths(phase) else None
        return submission, given

    def submission(self, phase: phases.Phase, scratch: Path) -> Submission:
        return unpack(self.submission_folder(), scratch, archive_limits(phase), additional.input_paths(phase))

    def publish(self, report: Result, metrics: dict) -> None:
        """Write what the platform needs beyond metrics.json (nothing, locally)."""

    def private_output(self) -> Path | None:
        """Where the private cases' results (``sealed.PRIVATE_RESULTS_FILE``) may be written:
        a folder no participant sees, or None when the platform has none."""
        return self.output
