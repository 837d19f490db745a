"""A phase's additional evaluation inputs and outputs (``grand_challenge:`` in ``phase.yaml``).

Grand-Challenge phases have had both since 2025-04 (rse-grand-challenge
``evaluation/models.py``: ``Phase.additional_evaluation_inputs``, ``Phase.evaluation_outputs``):

- An **additional input** is a value or file the participant gives with each submission. The
  platform places it at ``/input/<relative path>`` beside the predictions (a value as its JSON
  text: ``components/backends/base.py`` ``_get_civ_provisioning_tasks``). The grader sets these
  paths aside, so they are never taken for a prediction (an upload of one archive plus an
  input is still "one archive"), and records them in ``metrics.json`` under
  ``additional_inputs``, where a leaderboard column can show them.
- An **evaluation output** is read back after the run, each from ``/output/<relative path>``;
  one that is missing or not of its socket's kind fails the whole evaluation ("Output file
  ... was not produced": ``Executor._create_json_result``/``_create_file_result``). So every
  configured output is written on every run, from the sources below, before ``metrics.json``.
  Grand-Challenge shows additional outputs to everyone who may see the evaluation, the
  participant included (``evaluation_detail.html``), so a source that carries per-case values
  is refused when ``publish_cases`` is false.
"""

import csv
import hashlib
import io
import os
import zipfile
from pathlib import Path

from evaluation import phase as phases
from evaluation import report as reports
from evaluation.contract import Result
from evaluation.errors import PhaseError, Unusable, participant_file
from evaluation.readers import untrusted

MAX_INPUT_VALUE_BYTES = 64 << 10  # a value socket's JSON text kept in metrics.json
_PER_CASE = ("case-scores", "report", "file:")


def _options(phase: phases.Phase) -> dict:
    return phase.option("grand_challenge") or {}


def input_paths(phase: phases.Phase) -> frozenset[str]:
    """The relative paths of the additional inputs, which are not predictions."""
    return frozenset(_options(phase).get("additional_inputs", []))


def outputs(phase: phases.Phase) -> dict[str, str]:
    """Relative path -> source, checked against ``publish_cases`` before anything is scored."""
    declared = dict(_options(phase).get("additional_outputs", {}))
    if not phase.option("publish_cases"):
        leaking = sorted(path for path, source in declared.items() if source.startswith(_PER_CASE))
        if leaking:
            raise PhaseError(
                f"{phases.PHASE_FILE}: additional output(s) {', '.join(leaking)} would show per-case results to "
                "participants while publish_cases is false; use 'leaderboard' or publish the cases"
            )
    return declared


def read_inputs(phase: phases.Phase, folder: Path) -> dict:
    """Each declared input as found in ``folder``: a JSON value as it is (Grand-Challenge writes
    value sockets as JSON text), any other file by size and SHA-256, ``None`` when absent (a
    local run that does not replay the platform's input folder). They are the participant's."""
    with participant_file():
        return {relative: _read_input(folder / relative, relative) for relative in sorted(input_paths(phase))}


def _read_input(path: Path, relative: str) -> dict | None:
    if not os.path.lexists(path):
        return None
    size = untrusted.check_regular(path, relative).st_size
    if size <= MAX_INPUT_VALUE_BYTES:
        try:
            return {"value": untrusted.load_json(path, relative, limit=MAX_INPUT_VALUE_BYTES)}
        except Unusable:  # not JSON: a file, recorded by its digest
            pass
    digest = hashlib.sha256()
    with untrusted.open_regular(path, relative) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return {"file": relative, "bytes": size, "sha256": digest.hexdigest()}


def render(source: str, result: Result, files: dict[str, dict | str | bytes]) -> bytes:
    """The bytes of one output. ``files`` are the report files the suite wrote."""
    if source == "leaderboard":
        return reports.json_bytes(result.leaderboard)
    if source == "case-scores":
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(["case", "score"])
        writer.writerows([case, "" if score is None else score] for case, score in reports.sanitize(result.case_scores).items())
        return text.getvalue().encode()
    if source == "report":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, content in sorted(files.items()):
                archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), _bytes(content))
            if not files:
                archive.writestr(zipfile.ZipInfo("README.txt", (1980, 1, 1, 0, 0, 0)), b"This suite writes no report files.\n")
        return buffer.getvalue()
    name = source.removeprefix("file:")
    if name not in files:
        raise PhaseError(
            f"{phases.PHASE_FILE}: additional output source {source!r} names a file this suite does not write "
            f"(it writes: {', '.join(sorted(files)) or 'none'})"
        )
    return _bytes(files[name])


def _bytes(content: dict | str | bytes) -> bytes:
    if isinstance(content, dict):
        return reports.json_bytes(content)
    return content.encode() if isinstance(content, str) else content
