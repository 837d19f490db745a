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

from evaluation import __version__, grading, log, machine, numba_cache, provenance, public, report, sealed, suites
from evaluation import phase as phases
from evaluation.archive import TAR_SUFFIXES, ZIP_SUFFIXES, extract, is_archive
from evaluation.contract import Outcome, Payload, Plan, Resources, Suite, failure
from evaluation.errors import PhaseError, SubmissionError, participant_file
from evaluation.organizer import leaderboard
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


def listing(path: Path) -> list:
    """(relative path, size, modification time) of every file under ``path`` (or of the file
    itself): changes whenever content is replaced, without reading the data. The phase's
    content-hash cache (``provenance.CACHE_NAME``) is not part of it."""
    if path.is_file():
        stat = path.stat()
        return [[path.name, stat.st_size, stat.st_mtime_ns]]
    return [[relative, info.st_size, info.st_mtime_ns] for relative, info in provenance.files(path)]


def phase_fingerprint(phase_folder: Path, overrides: dict | None = None) -> str:
    """The grader version and the phase folder's listing, and options replaced on the command
    line if any (``rescore(overrides=...)``)."""
    found = {"grader": __version__, "phase": listing(phase_folder)}
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


def discover(folder: Path, output: Path) -> list[Entry]:
    """Every folder and archive (zip, tar) in ``folder`` (hidden ones skipped), by name."""
    if not folder.is_dir():
        raise PhaseError(f"the submissions folder {folder} does not exist")
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if not (path.is_dir() or is_archive(path)):
            _log.warning("not_a_submission", path=str(path))
            continue
        name = submission_name(path)
        if name in found:
            raise PhaseError(f"two submissions are named {name!r}: {found[name].name} and {path.name}")
        found[name] = path
    return [Entry(name, path, _digest(listing(path)), output / name) for name, path in found.items()]


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
    organizers = report.json_bytes(scores, listing_infinities=True)  # an infinite case score stays infinite
    report.write(entry.output, document, {**result.files, CASE_SCORES_FILE: organizers})
    _log.info("submission_scored", submission=entry.name, status=entry.status, units=len(entry.outcomes), reused=entry.reused)


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
        if name == CASE_SCORES_FILE and not (entry.output / report.METRICS_FILE).is_file():
            continue
        entry.status, entry.message, entry.complete = record["status"], record.get("message"), True
        entry.leaderboard = record.get("leaderboard", {})
        entry.private_leaderboard = record.get("private", {}).get("leaderboard", {})
        return True
    return False


# --------------------------------------------------------------------------------------------
# The run


# Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers. Setting it switches off
# glibc's dynamic mmap threshold, so every array above 128 KiB is mapped afresh and faulted in
# page by page: scoring ran 1.7x slower (bench/rescore_scaling.py). None unsets it.
WORKER_CONFIG = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


def connect(scheduler: str | None, workers: int | None):
    """A Dask client: to the given scheduler, or to a new LocalCluster of single-threaded
    worker processes. Returns (client, cluster or None)."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise PhaseError("rescore needs Dask distributed: pip install 'evaluation[ops]'") from None
    if scheduler:
        return Client(scheduler), None
    with dask.config.set(WORKER_CONFIG):
        cluster = LocalCluster(
            n_workers=workers or machine.cpu_count(), threads_per_worker=1, processes=True, dashboard_address=None
        )
    return Client(cluster), cluster


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


def _submit(dask: "_Dask", entry: Entry, suite: Suite, state: Path, phase_fp: str, priority: int) -> dict:
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


class _Dask:
    """The cluster, connected on first use: a run that finds everything on disk starts none."""

    def __init__(self, scheduler: str | None, workers: int | None):
        self.scheduler, self.workers = scheduler, workers
        self._client = self._cluster = None

    @property
    def client(self):
        if self._client is None:
            self._client, self._cluster = connect(self.scheduler, self.workers)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


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
    phase_fp = phase_fingerprint(phase_folder, overrides)
    fingerprint = provenance.phase_fingerprint(phase_folder)
    state = output / STATE_DIR
    entries = discover(submissions, output)
    todo = [e for e in entries if not load_finished(e, phase_fp)]
    _log.info("rescore", suite=suite.name, submissions=len(entries), finished_before=len(entries) - len(todo))
    computed = 0
    resources = Resources.detect(workers)  # planned as for a run with as many workers as the cluster's default
    dask = _Dask(scheduler, workers)
    try:
        futures = {}
        for index, entry in enumerate(todo):
            _plan(entry, suite, phase, resources, state, phase_fp)
            if entry.plan is None:
                continue
            futures.update(_submit(dask, entry, suite, state, phase_fp, priority=-index))
            if len(entry.outcomes) == len(entry.plan.tasks):
                finish(entry, suite, phase, phase_fp, fingerprint)
        if futures:
            from dask.distributed import as_completed

            for future in as_completed(list(futures)):
                entry, key = futures.pop(future)
                _collect(future, entry, key)
                computed += 1
                if len(entry.outcomes) == len(entry.plan.tasks):
                    finish(entry, suite, phase, phase_fp, fingerprint)
    finally:
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
        "submissions": len(entries),
        **{status: sum(e.status == status for e in entries) for status in (SCORED, FAILED, REJECTED, ERROR)},
        "units_computed": computed,
        "units_reused": sum(e.reused for e in entries),
        "submissions_reused": len(entries) - len(todo),
        "seconds": round(time.monotonic() - started, 3),
        "retry": [e.name for e in entries if not e.complete],
    }
    _log.info("rescore_done", **summary)
    return summary
