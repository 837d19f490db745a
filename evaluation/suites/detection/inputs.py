"""From the phase's truth folder and the participant's upload to batches of cases.

picai_eval pairs a detection map with its label by case id (``picai_eval/eval.py:
evaluate_folder``, ``<id>_detection_map.<ext>`` and ``<id>_label.<ext>``) and stops on a
missing one (an ``AssertionError``); the PI-CAI Grand-Challenge evaluation adds the case-level
likelihood of each algorithm job (``cspca-case-level-likelihood.json``), which replaces the
case confidence of the AUROC. Here the truth is one label map per case in ``truth``
(``<case>.<ext>``), the submission one map per case named after it, and the likelihoods, when
given, one file (``likelihood_file``). Every problem is a message for the participant, before
anything is scored: a file that matches no case, a missing case (by default), a likelihood that
is missing, not a number, or outside [0, 1].
"""

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evaluation import log, public
from evaluation.batches import Case
from evaluation.contract import Payload, Plan, Resources, Task
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file, participant_file
from evaluation.phase import Phase
from evaluation.readers import images, untrusted
from evaluation.submission import Submission, pair_cases, refuse_dotted, truth_files
from evaluation.suites.detection.options import Extraction, Matching, Options

_log = log.get(__name__)

TRUTH = "a ground-truth label map"  # how messages name a truth file
# Peak bytes per voxel of one case: the map as read (up to 8 bytes) and as float32, the truth
# (up to 8) and its lesion mask, the non-zero masks and the labels of the boxes (4 each); a
# softmax map adds the extraction's working copy, its output and masks.
BYTES_PER_VOXEL = {"detection": 32, "softmax": 48}
MAX_LIKELIHOOD_BYTES = 16 << 20  # a likelihood table: ~30 bytes a case
MAX_JOB_LIKELIHOOD_BYTES = 1 << 10  # one algorithm job's likelihood: one number


@dataclass(frozen=True)
class Batch(Payload):
    """The cases one worker scores, with what scoring a case needs."""

    cases: tuple[Case, ...]
    matching: Matching
    extraction: Extraction | None  # input: softmax


@dataclass(frozen=True)
class Context:
    """What ``summarize`` needs from the plan: the scored cases (sorted, as picai_eval's
    ``Metrics`` sorts them), their prediction files, the task of each, the submitted
    likelihoods (None: the case confidence of ``case_confidence_func``)."""

    options: Options
    cases: list[str]
    files: dict[str, str | None]
    tasks: dict[str, str]
    likelihoods: dict[str, float] | None


def truth_cases(phase: Phase, options: Options) -> dict[str, Path]:
    """Case name -> truth file, from the phase's truth folder; the phase's case weights name
    only its cases."""
    cases = truth_files(phase, options.truth)
    refuse_dotted(cases)
    unknown = sorted(set(options.case_weights) - set(cases))
    if unknown:
        raise PhaseError(f"phase.yaml: case_weights names {unknown[0]!r}, which is no case of the truth folder")
    return cases


# --------------------------------------------------------------------------------------------
# Likelihoods


def likelihoods(submission: Submission, options: Options, cases: list[str], submitted: dict[str, Path]) -> dict | None:
    """The submitted case-level likelihoods (case -> float in [0, 1]) or None, as the
    ``likelihoods`` option says; every scored case with a prediction needs one, and every
    entry must name a case."""
    if options.likelihoods == "ignore":
        return None
    with participant_file():
        found = _job_likelihoods(submission, options, submitted) if submission.named_files is not None else None
        if found is None:
            found = _table_likelihoods(submission, options)
    if found is None:
        if options.likelihoods == "required":
            raise SubmissionError(
                f"this phase needs case-level likelihoods: add {options.likelihood_file} "
                + (
                    "(a JSON object {case: likelihood})"
                    if options.likelihood_file.endswith(".json")
                    else "(columns case,likelihood)"
                )
            )
        return None
    unknown = sorted(set(found) - set(cases))
    if unknown:
        raise SubmissionError(
            f"{options.likelihood_file}: names {len(unknown)} case(s) that are no test case ({', '.join(unknown[:5])})"
        )
    without = sorted(c for c in cases if c in submitted and c not in found)
    if without:
        raise SubmissionError(
            f"{options.likelihood_file}: gives no likelihood for {len(without)} case(s) ({', '.join(without[:5])}); give one per case"
        )
    return found


def likelihood_value(value, where: str) -> float:
    """A likelihood: a number in [0, 1] (booleans and strings are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unusable(f"{where}: {value!r} is not a number; a likelihood is a number between 0 and 1")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise Unusable(f"{where}: {value!r} is not between 0 and 1; a likelihood is the probability that the case holds a lesion")
    return float(value)


def _table_likelihoods(submission: Submission, options: Options) -> dict[str, float] | None:
    """The one ``likelihood_file`` anywhere in the upload, or None."""
    name = options.likelihood_file
    found = [path for path, is_folder in untrusted.walk(submission.root) if not is_folder and path.name == name]
    if not found:
        return None
    if len(found) > 1:
        shown = " and ".join(p.relative_to(submission.root).as_posix() for p in found[:2])
        raise Unusable(f"{name} appears {len(found)} times in the submission ({shown}); keep one")
    display = found[0].relative_to(submission.root).as_posix()
    if name.endswith(".json"):
        table = untrusted.load_json(found[0], display, limit=MAX_LIKELIHOOD_BYTES)
        if not isinstance(table, dict):
            raise Unusable(f"{display}: must be a JSON object mapping each case to its likelihood")
        return {str(case): likelihood_value(value, f"{display}, case {case}") for case, value in table.items()}
    return _csv_likelihoods(untrusted.read_bytes(found[0], display, MAX_LIKELIHOOD_BYTES, "a likelihood table"), display)


def _csv_likelihoods(data: bytes, display: str) -> dict[str, float]:
    """A CSV with the header ``case,likelihood`` and one row per case."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unusable(f"{display}: is not UTF-8 text") from None
    rows = [row for row in csv.reader(io.StringIO(text)) if any(cell.strip() for cell in row)]
    if not rows or [cell.strip().lower() for cell in rows[0]] != ["case", "likelihood"]:
        raise Unusable(f"{display}: must start with the header line 'case,likelihood'")
    found = {}
    for number, row in enumerate(rows[1:], 2):
        if len(row) != 2:
            raise Unusable(f"{display}, line {number}: expected two columns (case,likelihood), found {len(row)}")
        case, text = row[0].strip(), row[1].strip()
        if case in found:
            raise Unusable(f"{display}: case {case} appears twice")
        try:
            value = float(text)
        except ValueError:
            raise Unusable(
                f"{display}, line {number}: {text!r} is not a number; a likelihood is a number between 0 and 1"
            ) from None
        found[case] = likelihood_value(value, f"{display}, case {case}")
    return found


def _job_likelihoods(submission: Submission, options: Options, submitted: dict[str, Path]) -> dict[str, float] | None:
    """A Grand-Challenge algorithm phase: each job's ``likelihood_file`` (a JSON number, the
    value of a float output socket such as ``cspca-case-level-likelihood``), in the job's
    output folder ``<job>/output/``; None when no job has one, refused when only some do."""
    found, absent = {}, []
    for case, path in sorted(submitted.items()):
        parts = PurePosixPath(os.path.relpath(path, submission.root)).parts
        if len(parts) < 3 or parts[1] != "output":
            return None
        candidate = submission.root / parts[0] / "output" / options.likelihood_file
        if not candidate.is_file():
            absent.append(case)
            continue
        display = f"{options.likelihood_file} of case {case}"
        found[case] = likelihood_value(untrusted.load_json(candidate, display, limit=MAX_JOB_LIKELIHOOD_BYTES), display)
    if found and absent:
        raise Unusable(f"{len(absent)} algorithm job(s) wrote no {options.likelihood_file} ({', '.join(absent[:5])})")
    return found or None


# --------------------------------------------------------------------------------------------
# The plan


def batch_size(n_cases: int, workers: int) -> int:
    """Cases per task: a task is a forked process, which costs tens of milliseconds on a
    busy machine, while a PI-CAI case scores in a few; about four batches per worker keep the
    load balanced. A bad file fails its batch, whose message names every bad file in it."""
    return max(1, -(-n_cases // (4 * max(1, workers))))


def plan(submission: Submission, phase: Phase, resources: Resources) -> Plan:
    options = Options.from_phase(phase)
    truth = truth_cases(phase, options)
    submitted = submission.case_files()
    cases = pair_cases(submitted, truth, options.missing_cases)
    given = likelihoods(submission, options, cases, submitted)
    files = {c: (os.path.relpath(submitted[c], submission.root) if c in submitted else None) for c in cases}
    per_voxel = BYTES_PER_VOXEL[options.input]
    size = batch_size(len(cases), resources.workers)
    matching, extraction = options.matching(), options.extraction_settings()
    tasks, keys = [], {}
    for start in range(0, len(cases), size):
        batch = cases[start : start + size]
        key = batch[0] if len(batch) == 1 else f"{batch[0]} .. {batch[-1]}"
        items = tuple(
            Case(case=c, truth=str(truth[c]), pred=str(submitted[c]) if c in submitted else None, display=files[c]) for c in batch
        )
        voxels = max(public.estimated_voxels(truth[c]) for c in batch)
        tasks.append(Task(key=key, payload=Batch(items, matching, extraction), memory_bytes=voxels * per_voxel + (64 << 20)))
        keys.update(dict.fromkeys(batch, key))
    _log.info("detection_plan", cases=len(cases), tasks=len(tasks), likelihoods=given is not None)
    context = Context(options=options, cases=cases, files=files, tasks=keys, likelihoods=given)
    return Plan(tasks=tasks, context=context, missing=[c for c in cases if files[c] is None])


def publish(phase: Phase, output: Path) -> None:
    """A header (shape, data type, geometry) for every truth label map, as scoring reads it."""
    for path in truth_cases(phase, Options.from_phase(phase)).values():
        with organizer_file():
            volume = images.read(path, display=TRUTH)
        public.header_of(phase, path, output, public.Header.of(volume))
