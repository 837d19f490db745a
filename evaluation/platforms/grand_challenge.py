"""Grand-Challenge: an algorithm-submission phase, or a prediction-file phase.

Grand-Challenge writes ``inputs.json`` (every input of the evaluation, serialised) into
``/input`` of every evaluation (rse-grand-challenge ``components/backends/base.py``
``Executor._with_inputs_json``), so either file names the platform. In a prediction-file
phase the shim has extracted the uploaded zip into ``/input`` (sagemaker-shim ``extract.py``
``safe_extract``); the submission is then read as on any platform, ``inputs.json`` and the
phase's additional inputs set aside.

In an algorithm phase ``/input/predictions.json`` lists the algorithm jobs. Each job has ``inputs`` and
``outputs``; each of those names its socket (``interface`` in the platform's API, ``socket``
in the 2026 starter kit: both are accepted) with ``slug``, ``kind``/``super_kind`` and
``relative_path``, and carries ``image: {pk, name}`` for image sockets. An image output lives
in ``/input/<job pk>/output/<relative_path>/`` as one ``.mha``/``.tif`` file with a UUID
name. The job is matched to its ground truth through its *input* image's ``name`` (the file
name the organizer uploaded), never through file order.

Phase options (``grand_challenge: {input: <slug>, output: <slug>}``) choose the sockets when
a job has several image inputs or outputs.
"""

import re
from pathlib import Path, PurePosixPath

from evaluation import phase as phases
from evaluation.errors import PhaseError, SubmissionError, participant_file
from evaluation.platforms.base import Platform
from evaluation.readers import images, limits, untrusted
from evaluation.submission import Submission

PREDICTIONS = "predictions.json"
INPUTS = "inputs.json"
IMAGE_OUTPUT_SUFFIXES = (".mha", ".tif", ".tiff", ".nii.gz", ".nii")
_SAFE_PK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SAFE_RELATIVE = re.compile(r"^[A-Za-z0-9._/-]{1,256}$")  # socket paths are slugs joined by '/'


class GrandChallenge(Platform):
    name = "grand-challenge"

    @staticmethod
    def recognises(input_folder: Path) -> bool:
        return (input_folder / PREDICTIONS).is_file() or (input_folder / INPUTS).is_file()

    def submission_folder(self) -> Path:
        return self.input.resolve()  # /input is the runtime's symlink to the job's input folder

    def private_output(self) -> None:
        """None: Grand-Challenge keeps only the outputs the phase configures, and shows every one
        beyond metrics.json to whoever may see the evaluation, the participant included
        (rse-grand-challenge ``evaluation/templates/evaluation/evaluation_detail.html``, the
        "Additional Outputs" of ``Evaluation.additional_outputs``); its one hidden channel,
        metrics.json with ``display_all_metrics`` off, hangs on a setting the grader cannot see.
        The private leaderboard comes from ``rescore`` on the uploads, which organizers can
        download (a prediction-file phase's zips; an algorithm phase's job outputs)."""
        return None

    def submission(self, phase: phases.Phase, scratch: Path) -> Submission:
        if not (self.input / PREDICTIONS).is_file():
            return super().submission(phase, scratch)
        options = phase.option("grand_challenge") or {}
        root = self.submission_folder()
        with participant_file():
            untrusted.check_tree(root)
            jobs = read_jobs(root / PREDICTIONS)
        named = {}
        for job in jobs:
            case = images.stem(Path(_socket_value(job, "inputs", options.get("input"))["image"]["name"]))
            output = _output_file(root, job, options.get("output"))
            if case in named:
                raise SubmissionError(f"two algorithm jobs were run on the same input image '{case}'")
            named[case] = output
        return Submission(root, named_files=named)


def read_jobs(path: Path) -> list[dict]:
    with participant_file():
        jobs = untrusted.load_json(path, PREDICTIONS, limit=limits.MAX_JOB_LIST_BYTES)
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise SubmissionError(f"{PREDICTIONS} must be a list of algorithm jobs")
    if not jobs:
        raise SubmissionError(f"{PREDICTIONS} lists no algorithm jobs")
    for job in jobs:
        if not isinstance(job.get("pk"), str) or not _SAFE_PK.match(job["pk"]):
            raise SubmissionError(f"{PREDICTIONS}: a job has a missing or malformed 'pk'")
        for side in ("inputs", "outputs"):
            if not isinstance(job.get(side), list):
                raise SubmissionError(f"{PREDICTIONS}: job {job['pk']} has no '{side}' list")
    return jobs


def _socket(entry: dict) -> dict:
    socket = entry.get("socket") or entry.get("interface")
    if not isinstance(socket, dict) or not isinstance(socket.get("slug"), str):
        raise SubmissionError(f"{PREDICTIONS}: an input or output names no socket (no 'socket'/'interface' slug)")
    return socket


def _is_image(entry: dict) -> bool:
    socket = _socket(entry)
    return bool(socket.get("is_image_kind")) or socket.get("super_kind") == "Image" or isinstance(entry.get("image"), dict)


def _socket_value(job: dict, side: str, slug: str | None) -> dict:
    """The job's image entry on ``side``: the one with ``slug``, else the only image one."""
    entries = [e for e in job[side] if isinstance(e, dict) and _is_image(e)]
    if slug is not None:
        entries = [e for e in entries if _socket(e)["slug"] == slug]
    if len(entries) != 1:
        slugs = sorted(_socket(e)["slug"] for e in entries)
        if len(entries) > 1:
            raise PhaseError(f"jobs have several image {side} ({', '.join(slugs)}); name one in phase.yaml under grand_challenge")
        raise SubmissionError(f"{PREDICTIONS}: job {job['pk']} has no image {side[:-1]}" + (f" '{slug}'" if slug else ""))
    entry = entries[0]
    if side == "inputs" and not (isinstance(entry.get("image"), dict) and isinstance(entry["image"].get("name"), str)):
        raise SubmissionError(f"{PREDICTIONS}: job {job['pk']} names no input image")
    return entry


def _output_file(root: Path, job: dict, slug: str | None) -> Path:
    """The single image file of the job's output socket, which must stay inside ``root``."""
    socket = _socket(_socket_value(job, "outputs", slug))
    relative = socket.get("relative_path")
    if (
        not isinstance(relative, str)
        or not _SAFE_RELATIVE.match(relative)
        or PurePosixPath(relative).is_absolute()
        or ".." in PurePosixPath(relative).parts
    ):
        raise SubmissionError(f"{PREDICTIONS}: output '{socket['slug']}' of job {job['pk']} has an unusable relative_path")
    folder = (root / job["pk"] / "output" / relative).resolve()
    if root.resolve() not in folder.parents:
        raise SubmissionError(f"{PREDICTIONS}: output '{socket['slug']}' of job {job['pk']} points outside the input folder")
    if folder.is_file():
        return folder
    found = (
        [p for p in sorted(folder.glob("*")) if p.is_file() and images.suffix(p) in IMAGE_OUTPUT_SUFFIXES]
        if folder.is_dir()
        else []
    )
    if len(found) != 1:
        raise SubmissionError(f"job {job['pk']}: expected one image in its output '{socket['slug']}', found {len(found)}")
    return found[0]
