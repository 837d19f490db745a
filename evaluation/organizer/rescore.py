"""Re-score many submissions against one phase on Dask distributed.

``python -m evaluation rescore --ground-truth PHASE --submissions DIR --output OUT
[--scheduler tcp://host:port] [--workers N]``

Every entry of DIR is one submission: a folder (scored exactly as the command line scores its
``--input``) or an archive (``.zip``, ``.tar``, ``.tar.gz``, ...). The work units are
(submission, task) pairs, the suite's own ``Task``s from ``plan()``; they run on a Dask
cluster: a ``LocalCluster`` of N single-threaded worker processes by default, or any running
scheduler (a lab cluster, a cloud deployment) given by its address. Planning and summarizing stay in this process and go through the same suite
code as the command line, so every ``metrics.json`` is identical to a single run's.

Nothing finished is computed twice. A worker writes each unit's outcome atomically to
``OUT/.rescore/units/<submission>/<unit id>.json`` as soon as it has it; the unit id hashes the
grader version, the suite, the phase (``phase.yaml`` and a listing of the phase folder with
sizes and modification times), the submission (the same kind of listing), the task key and its
payload. A restarted run — after the driver was killed, a worker died, or the machine went down
— loads what is on disk and submits only the rest; a submission whose results are complete and
whose fingerprints match is not even planned again. Only deterministic outcomes are kept (a
score, or the participant's data being unusable); an internal error or a dead worker is tried
again on the next run.

Dask moves a unit whose worker dies to another worker (up to its ``allowed-failures``, 3 by
default); a unit that keeps killing workers is reported as crashed. Paths in task payloads are
absolute, so on a multi-machine cluster the phase, the submissions and OUT must be on a file
system every worker sees under the same path, and the workers must have this package installed.
The phase option ``case_time_limit_s`` is not enforced on Dask (a Dask task cannot be stopped);
the phase's per-case memory estimates are not used either — size the workers instead.
"""

import hashlib
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from evaluation import __version__, grading, log, numba_cache, provenance, public, report, sealed, suites
from evaluation import phase as phases
from evaluation import progress as progresses
from evaluation.archive import TAR_SUFFIXES, ZIP_SUFFIXES, extract, is_archive
from evaluation.contract import Outcome, Payload, Plan, Resources, Suite, failure
from evaluation.errors import PhaseError, SubmissionError, participant_file
from evaluation.organizer import cluster, leaderboard
from evaluation.organizer.leaderboard import LEADERBOARD, ranked  # noqa: F401 - the leaderboard's names, as before
from evaluation.platforms.base import Platform, archive_limits
from evaluation.submission import Submission

_log = log.get(__name__)

STATE_DIR = ".rescore"
CASE_SCORES_FILE = "case_scores.json"
REJECTED_FILE = "rejected.json"
# Outcomes that do not change when a unit is run again; anything else is retried next run.
DETERMINISTIC_KINDS = (None, "submission")
SCORED, FAILED, REJECTED, ERROR = "scored", "failed", "rejected", "error"


# --------------------------------------------------------------------------------------------
# Fingerprints


def _digest(document) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# What a re-run trusts to tell that an upload did not change (said in the run's summary).
TRUSTED = "the size and modification time of data files, the content of metadata files (provenance.DEFINITION_SUFFIXES)"


def listing(path: Path) -> list:
    """(relative path, size, modification time or, for a metadata file, its content's SHA-256)
    of every file under ``path`` (or of the file itself): changes whenever data is replaced,
    without reading it, and whenever a metadata file changes, even to the same size with its
    time restored. The phase's content-hash cache (``provenance.CACHE_NAME``) is not part of it."""
    found = [(path.name, path.stat())] if path.is_file() else provenance.files(path)
    root = path.parent if path.is_file() else path
    return [
        [relative, info.st_size, provenance.content_hash(root / relative) if _metadata(relative) else info.st_mtime_ns]
        for relative, info in found
    ]


def _metadata(relative: str) -> bool:
    return relative.lower().endswith(provenance.DEFINITION_SUFFIXES)


def phase_fingerprint(fingerprint: dict, overrides: dict | None = None) -> str:
    """The grader version and the phase's content fingerprint (``provenance.phase_fingerprint``),
    and options replaced on the command line if any (``rescore(overrides=...)``)."""
    found = {"grader": __version__, "phase": fingerprint["sha256"]}
    return _digest({**found, "overrides": overrides} if overrides else found)


def unit_id(phase_fp: str, submission_fp: str, suite: str, key: str, payload: dict) -> str:
    return _digest(
        {
            "phase": phase_fp,
            "submission": submission_fp,
            "suite": suite,
            "task": key,
            "payload": payload.to_dict() if isinstance(payload, Payload) else payload,
        }
    )[:32]


# --------------------------------------------------------------------------------------------
# One unit, on a Dask worker


def score_unit(suite_name: str, key: str, payload: dict, record_path: str) -> dict:
    """Score one task and persist its outcome atomically if it is deterministic.

    The value makes the same JSON round trip as in ``runner`` (the pipe from the isolated
    worker), and exceptions map to the same outcome kinds, so ``summarize`` sees exactly what
    the command line would give it."""
    started = time.monotonic()
    numba_cache.use_install_cache(numba_cache.compiled_folders())  # a Dask worker never ran ``cli.main``
    try:
        record = {"value": json.loads(json.dumps(grading.scoring(suites.get(suite_name))(payload), allow_nan=True))}
    except MemoryError:  # depends on the Dask worker's size, not only on the submission: retried next run
        record = {"kind": "crashed", "message": f"the worker scoring {key} ran out of memory"}
    except Exception as exc:
        record = failure(key, exc)
        if "traceback" in record:
            _log.error("unit_exception", unit=key, traceback=record.pop("traceback"))
    record.update(
        key=key,
        seconds=time.monotonic() - started,
        computed={"host": socket.gethostname(), "pid": os.getpid(), "at": time.time()},
    )
    if record.get("kind") in DETERMINISTIC_KINDS:
        report.write_atomic(Path(record_path), json.dumps(record, allow_nan=True).encode())
    return record


def to_outcome(record: dict) -> Outcome:
    return Outcome(
        record["key"],
        value=record.get("value"),
        kind=record.get("kind"),
        message=record.get("message"),
        seconds=record.get("seconds", 0.0),
    )


# --------------------------------------------------------------------------------------------
# Submissions


@dataclass
class Entry:
    """One submission of the run and what has become of it."""

    name: str
    source: Path
    fingerprint: str
    output: Path
    plan: Plan | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    status: str | None = None
    message: str | None = None
    leaderboard: dict = field(default_factory=dict)
    private_leaderboard: dict = field(default_factory=dict)  # with the phase's private_cases
    complete: bool = False  # nothing left that a later run would try again
    reused: int = 0
    given_inputs: dict | None = None  # the phase's additional inputs, as the upload gave them

    @property
    def done(self) -> bool:
        return self.status is not None


def submission_name(path: Path) -> str:
    """A folder's name, or an archive's name without its suffix (``team.tar.gz`` -> ``team``)."""
    if path.is_dir():
        return path.name
    suffix = next(s for s in ZIP_SUFFIXES + TAR_SUFFIXES if path.name.lower().endswith(s))
    return path.name[: -len(suffix)]


def discover(folder: Path, output: Path) -> tuple[list[Entry], dict[str, list[str]]]:
    """Every folder and archive (zip, tar) in ``folder`` (hidden ones skipped), by name; and the
    names two or more uploads share (``team`` and ``team.zip``), which are not scored: which one
    is meant is the organizer's to say."""
    if not folder.is_dir():
        raise PhaseError(f"the submissions folder {folder} does not exist")
    found: dict[str, list[Path]] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if not (path.is_dir() or is_archive(path)):
            _log.warning("not_a_submission", path=str(path))
            continue
        found.setdefault(submission_name(path), []).append(path)
    clashes = {name: [p.name for p in paths] for name, paths in found.items() if len(paths) > 1}
    entries = [
        Entry(name, paths[0], _digest(listing(paths[0])), output / name) for name, paths in found.items() if len(paths) == 1
    ]
    return entries, clashes


class Upload(Platform):
    """One downloaded upload, taken in as the command line takes in its ``--input``
    (``Platform.intake``: platform files and additional inputs set aside, archives unpacked,
    running out of memory refused), or a single archive file. What is unpacked goes into the
    state folder, keyed by the upload's fingerprint, and is reused by later runs."""

    def __init__(self, entry: Entry, phase_folder: Path, state: Path):
        super().__init__(entry.source, phase_folder, entry.output)
        self.entry = entry
        self.unpacked = state / "unpacked" / entry.name / entry.fingerprint[:16]

    def submission(self, phase, scratch: Path) -> Submission:
        marker = self.unpacked / ".root"
        if marker.is_file():
            kept = json.loads(marker.read_text())
            return Submission(Path(kept["root"]), set_aside=frozenset(kept["set_aside"]))
        shutil.rmtree(self.unpacked, ignore_errors=True)
        self.unpacked.mkdir(parents=True)
        if self.entry.source.is_dir():
            submission = super().submission(phase, self.unpacked)
        else:
            with participant_file():
                submission = Submission(extract(self.entry.source, self.unpacked / "submission", archive_limits(phase)))
        kept = {"root": str(submission.root), "set_aside": sorted(submission.set_aside)}
        report.write_atomic(marker, json.dumps(kept).encode())
        return submission


# --------------------------------------------------------------------------------------------
# Results of one submission


def finish(entry: Entry, suite: Suite, phase, phase_fp: str, fingerprint: dict) -> None:
    """Summarize a submission whose units are all in, and write its files: metrics.json as
    the command line writes it, the private result beside it (``sealed``), and
    case_scores.json with both leaderboards and the full provenance (organizer's files)."""
    in_plan_order = {task.key: entry.outcomes[task.key] for task in entry.plan.tasks}
    summaries = sealed.summarize(suite, phase, entry.plan, in_plan_order)
    result = summaries.public
    failures = [o for o in entry.outcomes.values() if not o.ok]
    entry.status = FAILED if failures else SCORED
    entry.message = failures[0].message if failures else None
    entry.leaderboard = dict(result.leaderboard)
    entry.private_leaderboard = dict(summaries.private.leaderboard) if summaries.private else {}
    entry.complete = all(o.kind in DETERMINISTIC_KINDS for o in failures)
    (entry.output / REJECTED_FILE).unlink(missing_ok=True)
    made_by = grading.provenance_of(phase, suite, summaries, fingerprint)
    scores = {
        "suite": suite.name,
        "ranking": suite.ranking,
        "higher_is_better": suite.higher_is_better,
        "status": entry.status,
        "message": entry.message,
        "complete": entry.complete,
        "fingerprint": {"phase": phase_fp, "submission": entry.fingerprint},
        "leaderboard": result.leaderboard,
        "case_scores": result.case_scores,
        "provenance": made_by(False),
    }
    private = grading.private_document(suite, summaries, made_by)
    if private is not None:
        scores["private"] = {"leaderboard": entry.private_leaderboard, "case_scores": summaries.private.case_scores}
        sealed.write_private(entry.output, private)
    else:
        (entry.output / sealed.PRIVATE_RESULTS_FILE).unlink(missing_ok=True)
    document = grading.metrics_document(suite, in_plan_order, summaries, made_by, True, entry.given_inputs)
    (entry.output / CASE_SCORES_FILE).unlink(missing_ok=True)  # this submission is unfinished until it is written again
    report.write(entry.output, document, result.files)
    scores["files"] = written_digests(
        entry.output, [report.METRICS_FILE, *result.files, *([sealed.PRIVATE_RESULTS_FILE] if private else [])]
    )
    report.write_atomic(entry.output / CASE_SCORES_FILE, report.json_bytes(scores, listing_infinities=True))
    _prune_units(entry, suite, phase_fp)
    _log.info("submission_scored", submission=entry.name, status=entry.status, units=len(entry.outcomes), reused=entry.reused)


def written_digests(folder: Path, names) -> dict[str, str]:
    """The SHA-256 of each file written for a submission: case_scores.json, written last,
    holds them, so that a run killed while the files were being replaced leaves a set that
    does not verify and is made again (``load_finished``), never an old score beside new files."""
    return {name: provenance.content_hash(folder / name) for name in sorted(set(names))}


def reject(entry: Entry, status: str, message: str, phase_fp: str) -> None:
    """A submission that could not be planned: the participant's fault (kept) or an internal
    error (tried again next run). Results of an earlier version of it are removed."""
    entry.status, entry.message, entry.complete = status, message, status == REJECTED
    _log.warning("submission_not_scored", submission=entry.name, status=status, message=message)
    for stale in (report.METRICS_FILE, CASE_SCORES_FILE, REJECTED_FILE, sealed.PRIVATE_RESULTS_FILE):
        (entry.output / stale).unlink(missing_ok=True)
    if entry.complete:
        record = {"status": status, "message": message, "fingerprint": {"phase": phase_fp, "submission": entry.fingerprint}}
        report.write_atomic(entry.output / REJECTED_FILE, report.json_bytes(record))


def _files_verify(folder: Path, digests) -> bool:
    """Every file case_scores.json lists is there, with the content it had when written."""
    if not isinstance(digests, dict) or report.METRICS_FILE not in digests:
        return False
    return all((folder / name).is_file() and provenance.content_hash(folder / name) == sha for name, sha in digests.items())


def load_finished(entry: Entry, phase_fp: str) -> bool:
    """Take a submission's results from disk if a previous run completed them for the same
    phase and the same submission."""
    expected = {"phase": phase_fp, "submission": entry.fingerprint}
    for name in (CASE_SCORES_FILE, REJECTED_FILE):
        path = entry.output / name
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        if record.get("fingerprint") != expected or not record.get("complete", True):
            continue
        if name == CASE_SCORES_FILE and not _files_verify(entry.output, record.get("files")):
            continue
        entry.status, entry.message, entry.complete = record["status"], record.get("message"), True
        entry.leaderboard = record.get("leaderboard", {})
        entry.private_leaderboard = record.get("private", {}).get("leaderboard", {})
        return True
    return False


# --------------------------------------------------------------------------------------------
# The run


def _plan(entry: Entry, suite: Suite, phase, resources: Resources, state: Path, phase_fp: str) -> None:
    try:
        submission, entry.given_inputs = grading.take_in(Upload(entry, phase.root, state), phase, state, resources)
        entry.plan = grading.plan(suite, submission, phase, resources)
    except SubmissionError as exc:
        reject(entry, REJECTED, str(exc), phase_fp)
    except PhaseError:
        raise  # the phase is broken for every submission
    except Exception as exc:
        _log.exception("plan_failed", submission=entry.name)
        reject(entry, ERROR, f"{type(exc).__name__}: {exc}", phase_fp)


def _record_path(state: Path, entry: Entry, unit: str) -> Path:
    return state / "units" / entry.name / f"{unit}.json"


def _prune_units(entry: Entry, suite: Suite, phase_fp: str) -> None:
    """A finished submission keeps the units of this phase and upload only: those of an earlier
    phase or version of the upload, and the temporary files of a worker killed while writing,
    are removed."""
    folder = entry.output.parent / STATE_DIR / "units" / entry.name
    kept = {f"{unit_id(phase_fp, entry.fingerprint, suite.name, t.key, t.payload)}.json" for t in entry.plan.tasks}
    for path in folder.iterdir() if folder.is_dir() else ():
        if path.name not in kept:
            path.unlink(missing_ok=True)


def _submit(dask: cluster.Dask, entry: Entry, suite: Suite, state: Path, phase_fp: str, priority: int) -> dict:
    """Futures of the entry's units that are not on disk yet; the others become outcomes."""
    futures = {}
    for task in entry.plan.tasks:
        unit = unit_id(phase_fp, entry.fingerprint, suite.name, task.key, task.payload)
        path = _record_path(state, entry, unit)
        if path.is_file():
            entry.outcomes[task.key] = to_outcome(json.loads(path.read_text()))
            entry.reused += 1
            continue
        future = dask.client.submit(
            score_unit, suite.name, task.key, task.payload, str(path), key=f"unit-{unit}", pure=False, priority=priority
        )
        futures[future] = (entry, task.key)
    return futures


def _collect(future, entry: Entry, key: str) -> None:
    """The unit's outcome. ``score_unit`` catches the suite's exceptions, so an error here is
    the cluster's: workers that kept dying on the unit (``KilledWorker``), or a failure to
    store the outcome."""
    if future.status == "finished":
        entry.outcomes[key] = to_outcome(future.result())
    else:
        exc = future.exception()
        _log.error("unit_lost", submission=entry.name, unit=key, error=repr(exc))
        if type(exc).__name__ == "KilledWorker":
            entry.outcomes[key] = Outcome(key, kind="crashed", message=f"the workers scoring {key} died (probably out of memory)")
        else:
            entry.outcomes[key] = Outcome(key, kind="internal", message=f"{type(exc).__name__}: {exc}")
    future.release()


def rescore(
    phase_folder: Path,
    submissions: Path,
    output: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    overrides: dict | None = None,
    worker_timeout: float = cluster.WORKER_TIMEOUT_S,
) -> dict:
    """Score every submission in ``submissions``; returns the run's summary. ``overrides``
    replaces phase options (``sensitivity`` re-scores under other definitions); they are part
    of the fingerprint and recorded in the leaderboard."""
    started = time.monotonic()
    phase = phases.load(phase_folder)
    public.refuse_grading(phase)
    if overrides:
        phase = phases.with_options(phase, overrides)
    suite = suites.get(phase.suite)
    if phase.option("case_time_limit_s"):
        _log.warning("time_limit_not_enforced", reason="Dask tasks cannot be stopped; case_time_limit_s is ignored")
    fingerprint = provenance.phase_fingerprint(phase_folder)
    phase_fp = phase_fingerprint(fingerprint, overrides)
    state = output / STATE_DIR
    entries, clashes = discover(submissions, output)
    for name, paths in clashes.items():
        _log.error("submission_names_clash", submission=name, uploads=paths)
    todo = [e for e in entries if not load_finished(e, phase_fp)]
    _log.info("rescore", suite=suite.name, submissions=len(entries), finished_before=len(entries) - len(todo))
    resources = Resources.detect(workers)  # planned as for a run with as many workers as the cluster's default
    dask = cluster.Dask(scheduler, workers)
    watch = cluster.Watch(progresses.at_terminal("rescoring"), worker_timeout)
    try:
        futures = {}
        for index, entry in enumerate(todo):
            _plan(entry, suite, phase, resources, state, phase_fp)
            if entry.plan is None:
                continue
            futures.update(_submit(dask, entry, suite, state, phase_fp, priority=-index))
            if len(entry.outcomes) == len(entry.plan.tasks):
                finish(entry, suite, phase, phase_fp, fingerprint)
        watch.total = len(futures)
        while futures and not watch.gave_up:
            for future in watch.finished(dask, list(futures)):
                entry, key = futures.pop(future)
                _collect(future, entry, key)
                if len(entry.outcomes) == len(entry.plan.tasks):
                    finish(entry, suite, phase, phase_fp, fingerprint)
    finally:
        watch.close()
        dask.close()
    run_provenance = {
        "grader": provenance.build(),
        "phase": {"fingerprint": fingerprint, "options": provenance.options_in_force(phase)},
        **({"overrides": overrides} if overrides else {}),
    }
    leaderboard.write(output, suite, phase_folder, entries, run_provenance)
    if any(e.private_leaderboard for e in entries):
        leaderboard.write(output, suite, phase_folder, entries, run_provenance, private=True)
    summary = {
        "submissions": len(entries) + sum(len(paths) for paths in clashes.values()),
        **{status: sum(e.status == status for e in entries) for status in (SCORED, FAILED, REJECTED, ERROR)},
        "units_computed": watch.done,
        "units_reused": sum(e.reused for e in entries),
        "submissions_reused": len(entries) - len(todo),
        "reuse_trusts": TRUSTED,
        "workers_lost": watch.lost,
        **(
            {"gave_up": f"no Dask worker for {worker_timeout:g} s; {len(futures)} units left for the next run"}
            if watch.gave_up
            else {}
        ),
        **({"names_clash": clashes} if clashes else {}),
        "seconds": round(time.monotonic() - started, 3),
        "retry": [e.name for e in entries if not e.complete] + sorted(clashes),
    }
    _log.info("rescore_done", **summary)
    return summary
