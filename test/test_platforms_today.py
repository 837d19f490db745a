"""The platforms as they run today (issue 21): Grand-Challenge's prediction-file uploads with
``inputs.json`` beside them, nested archives, additional evaluation inputs and outputs, the
invoke API, the ground-truth tarball's ``data`` filter; logs that leave stderr to the
participant's line; CodaBench's submission folder as a link.

The container-level emulation of the same rules runs in ``./test.sh``; here the rules are
checked against the real things the host has: CPython's own ``tarfile.data_filter`` for the
runtime's copy of it, real HTTP calls for the invoke server.
"""

import csv
import importlib.util
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import warnings
import zipfile
from pathlib import Path

import pytest
from helpers.grading import ROOT, run_cli, validate_metrics

from evaluation import log

GRAND_CHALLENGE = ROOT / "container" / "scenarios" / "grand-challenge-jobs"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runtime = _module(ROOT / "container" / "grand-challenge-runtime" / "runtime.py")
tarball = _module(ROOT / "container" / "ground_truth_tarball.py")


def _phase(tmp_path: Path, extra: str = "") -> Path:
    phase = tmp_path / "phase"
    shutil.copytree(GRAND_CHALLENGE / "ground-truth", phase, dirs_exist_ok=True)
    if extra:
        (phase / "phase.yaml").write_text((phase / "phase.yaml").read_text() + extra)
    return phase


def _case_files() -> dict[str, bytes]:
    """The scenario's two predictions under their case names, as a participant uploads them."""
    found = {}
    for job in json.loads((GRAND_CHALLENGE / "input" / "predictions.json").read_text()):
        case = job["inputs"][0]["image"]["name"]
        found[case] = next((GRAND_CHALLENGE / "input" / job["pk"] / "output").rglob("*.mha")).read_bytes()
    return found


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def _extracted_upload(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """/input of a prediction-file phase after the shim: the files plus ``inputs.json``."""
    folder = tmp_path / "input"
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    (folder / "inputs.json").write_text(json.dumps([{"socket": {"slug": "predictions-zip-file"}, "value": None}]))
    return folder


# --------------------------------------------------------------------------------------------
# Prediction-file phases: inputs.json, one inner archive, additional inputs and outputs


@pytest.mark.parametrize("inner", ["submission.zip", "predictions.tar.gz"])
def test_an_upload_holding_one_archive_is_unpacked_beside_inputs_json(tmp_path, inner):
    """The shim extracts the upload one level: a zip holding a zip (or a tarball) reaches the
    grader as that archive beside inputs.json, and scores as the same files uploaded flat."""
    files = _case_files()
    if inner.endswith(".zip"):
        archive = _zip(files)
    else:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for name, content in files.items():
                member = tarfile.TarInfo(name)
                member.size = len(content)
                tar.addfile(member, io.BytesIO(content))
        archive = buffer.getvalue()
    nested = run_cli(_extracted_upload(tmp_path / "nested", {inner: archive}), _phase(tmp_path), tmp_path / "out-nested")
    flat = run_cli(_extracted_upload(tmp_path / "flat", files), _phase(tmp_path / "again"), tmp_path / "out-flat")
    assert nested.code == flat.code == 0, nested.stdout[-2000:]
    assert nested.metrics["aggregates"] == flat.metrics["aggregates"]
    assert "grand-challenge" in nested.stdout  # recognised by inputs.json


def test_additional_inputs_are_set_aside_and_recorded_and_outputs_written(tmp_path):
    phase = _phase(
        tmp_path,
        "grand_challenge:\n"
        "  additional_inputs: [algorithm-notes.json, weights-card.pdf, not-given.json]\n"
        "  additional_outputs: {leaderboard.json: leaderboard, per-case.csv: case-scores, report.zip: report}\n",
    )
    folder = _extracted_upload(tmp_path, {"submission.zip": _zip(_case_files())})
    (folder / "algorithm-notes.json").write_text('{"external_data": true, "ensemble": 5}')
    (folder / "weights-card.pdf").write_bytes(b"%PDF-1.4 not json")
    run = run_cli(folder, phase, tmp_path / "out")
    assert run.code == 0, run.stdout[-2000:]  # still "one archive" with two inputs beside it
    metrics = run.metrics
    validate_metrics(metrics)
    given = metrics["additional_inputs"]
    assert given["algorithm-notes.json"] == {"value": {"external_data": True, "ensemble": 5}}
    assert given["weights-card.pdf"]["bytes"] == len(b"%PDF-1.4 not json") and len(given["weights-card.pdf"]["sha256"]) == 64
    assert given["not-given.json"] is None
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert board and all(v is None or isinstance(v, float) for v in board.values())
    rows = list(csv.DictReader(open(tmp_path / "out" / "per-case.csv")))
    assert {row["case"] for row in rows} == {"case_a", "case_b"}
    assert all(0 <= float(row["score"]) <= 1 for row in rows)
    with zipfile.ZipFile(tmp_path / "out" / "report.zip") as report:
        assert report.namelist()  # a valid ZIP, as the socket's kind requires


def test_outputs_that_would_publish_cases_of_a_hidden_test_set_are_refused(tmp_path):
    phase = _phase(tmp_path, "publish_cases: false\ngrand_challenge:\n  additional_outputs: {cases.csv: case-scores}\n")
    run = run_cli(_extracted_upload(tmp_path, _case_files()), phase, tmp_path / "out")
    assert run.code == 1 and "publish_cases" in run.stdout and "cases.csv" in run.stdout
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_an_output_naming_a_file_the_suite_does_not_write_is_the_organizers_error(tmp_path):
    phase = _phase(tmp_path, "grand_challenge:\n  additional_outputs: {x.csv: 'file:nothing.csv'}\n")
    run = run_cli(_extracted_upload(tmp_path, _case_files()), phase, tmp_path / "out")
    assert run.code == 1 and "nothing.csv" in run.stdout and "internal error" in run.last_line


def test_a_single_crop_stripped_of_its_name_gets_a_hint(cellmap_phase, tmp_path):
    """Grand-Challenge strips the path all files share: a zip of one crop without the zarr's
    root group arrives as label arrays at the top."""
    phase, submission = cellmap_phase("a_perfect_instance")
    crop = next(p for p in (submission / "submission.zarr").iterdir() if p.is_dir())
    stripped = tmp_path / "stripped"
    shutil.copytree(crop, stripped)
    run = run_cli(stripped, phase, tmp_path / "out")
    assert run.code == 2 and "label arrays, not crop groups" in run.last_line


# --------------------------------------------------------------------------------------------
# Logs: stderr is the participant's


def test_a_successful_run_writes_nothing_on_stderr_and_ends_its_log_with_a_summary(tmp_path):
    run = run_cli(_extracted_upload(tmp_path, _case_files()), _phase(tmp_path), tmp_path / "out")
    assert run.code == 0 and run.stderr == ""
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert events[-1]["event"] == "written" and events[-1]["memory_limited_by"] in ("ram", "cgroup", "rlimit_data", "rlimit_as")
    assert events[-1]["workers"] >= 1 and events[-1]["platform"] == "grand-challenge"


def test_a_rejected_run_ends_stderr_with_the_participants_line(tmp_path):
    files = _case_files()
    files["case_x.mha"] = files.pop("case_b.mha")
    run = run_cli(_extracted_upload(tmp_path, files), _phase(tmp_path), tmp_path / "out")
    assert run.code == 2 and run.stderr.splitlines() == [run.last_line] and "case_x" in run.last_line


def test_warnings_and_long_lines_stay_in_the_log(capsys, monkeypatch):
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored afterwards
    log.configure()
    warnings.warn("a library complains", RuntimeWarning, stacklevel=1)
    log.get("test").info("huge", value="x" * 100_000)
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert "a library complains" in lines[0] and json.loads(lines[0])["event"] == "python_warning"
    assert len(lines[1]) <= log.MAX_LINE_CHARS and lines[1].endswith("[truncated]")


# --------------------------------------------------------------------------------------------
# CodaBench: the submission folder is the worker's


def test_a_submission_folder_that_is_a_link_is_refused(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    app = tmp_path / "app" / "input"
    shutil.copytree(phase, app / "ref")
    (app / "res").symlink_to(app / "ref")  # would score the truth against itself
    run = run_cli(app, app / "ref", tmp_path / "out", "--platform", "codabench")
    assert run.code == 2 and "symbolic link" in run.last_line


# --------------------------------------------------------------------------------------------
# The invoke API


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _request(port: int, method: str, path: str, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.mark.slow
def test_the_invoke_server_grades_once_per_call_as_the_shim_drives_it(tmp_path):
    """sagemaker-shim's order: start, poll /health, place the input, POST /invoke (201 or a
    failure), again for the next task, then SIGTERM."""
    phase, upload, output = _phase(tmp_path), tmp_path / "input", tmp_path / "output"
    server, port = _start_server(phase, upload, output)
    try:
        assert _request(port, "GET", "/elsewhere")[0] == 404
        _extracted_upload(tmp_path, _case_files())
        assert _request(port, "POST", "/invoke") == (201, {"exit_status": 0})
        scored = json.loads((output / "metrics.json").read_text())
        shutil.rmtree(upload)
        shutil.rmtree(output)
        output.mkdir()
        files = _case_files()
        files["case_x.mha"] = files.pop("case_b.mha")
        _extracted_upload(tmp_path, files)
        assert _request(port, "POST", "/invoke") == (422, {"exit_status": 2})
    finally:
        server.terminate()
        stdout, stderr = server.communicate(timeout=30)
    validate_metrics(scored)
    assert [line for line in stderr.splitlines() if line.strip()][-1].startswith("Submission rejected: ")
    assert "case_x" in stderr.splitlines()[-1] and len(stderr.splitlines()) == 1  # nothing else on stderr
    assert '"event": "serving"' in stdout


def _start_server(phase: Path, upload: Path, output: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "evaluation", "serve", "--port", str(port), "--input", str(upload), "--ground-truth", str(phase),
         "--output", str(output)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            if _request(port, "GET", "/health", timeout=5)[0] == 200:
                return server, port
        except (urllib.error.URLError, OSError):
            assert time.monotonic() < deadline, "no /health within 60 s"
            time.sleep(0.2)


@pytest.mark.slow
def test_the_invoke_server_answers_health_through_a_flood_and_a_caller_that_goes_away(tmp_path, monkeypatch):
    """300 half-open connections (a request head that never ends) and 100 that open and say
    nothing: /health answers within a second throughout and after; the flood's connections are
    closed after HEAD_SECONDS. A caller that drops its /invoke connection leaves the grading to
    finish and nothing on stderr (Grand-Challenge shows its last line)."""
    from evaluation.platforms import invoke

    phase, upload, output = _phase(tmp_path), tmp_path / "input", tmp_path / "output"
    _extracted_upload(tmp_path, _case_files())
    server, port = _start_server(phase, upload, output)
    flood = []
    try:
        for number in range(400):
            connection = socket.create_connection(("127.0.0.1", port), timeout=5)
            if number < 300:
                connection.sendall(b"GET /hea")
            flood.append(connection)
        started = time.monotonic()
        assert _request(port, "GET", "/health", timeout=1)[0] == 200
        assert time.monotonic() - started < 1
        for connection in flood[:50]:
            connection.close()
        assert _request(port, "GET", "/health", timeout=1)[0] == 200
        flood[100].settimeout(invoke.HEAD_SECONDS + 10)
        assert flood[100].recv(1) == b""  # closed by the server once its head timed out
        caller = socket.create_connection(("127.0.0.1", port), timeout=5)
        caller.sendall(b"POST /invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        caller.close()
        deadline = time.monotonic() + 120
        while not (output / "metrics.json").is_file():
            assert time.monotonic() < deadline, "the dropped invoke did not grade"
            time.sleep(0.2)
        time.sleep(1)
        assert _request(port, "GET", "/health", timeout=1)[0] == 200
    finally:
        for connection in flood:
            connection.close()
        server.terminate()
        stdout, stderr = server.communicate(timeout=30)
    assert stderr == ""  # the grading succeeded: nothing on stderr, no traceback of the dropped caller
    assert '"event": "serving"' in stdout and '"host": "127.0.0.1"' in stdout


# --------------------------------------------------------------------------------------------
# The ground-truth tarball: the shim's data filter, and the writer that satisfies it


def _member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname, member.mode = kind, linkname, mode
    return member


FILTER_CASES = [
    _member("phase.yaml"),
    _member("/abs/path.txt"),
    _member("../escape.txt"),
    _member("a/../../escape.txt"),
    _member("run.sh", mode=0o4777),
    _member("plain", mode=0o666),
    _member("labels", tarfile.DIRTYPE, mode=0o777),
    _member("link-inside", tarfile.SYMTYPE, "phase.yaml"),
    _member("labels/up", tarfile.SYMTYPE, "../phase.yaml"),
    _member("link-out", tarfile.SYMTYPE, "../outside"),
    _member("link-abs", tarfile.SYMTYPE, "/etc/os-release"),
    _member("hard-in", tarfile.LNKTYPE, "phase.yaml"),
    _member("hard-out", tarfile.LNKTYPE, "../x"),
    _member("fifo", tarfile.FIFOTYPE),
    _member("dev", tarfile.CHRTYPE),
]


@pytest.mark.skipif(not hasattr(tarfile, "data_filter"), reason="this Python has no tarfile extraction filters")
@pytest.mark.parametrize("member", FILTER_CASES, ids=lambda m: m.name)
def test_the_runtimes_data_filter_decides_as_cpythons(member, tmp_path):
    """The image's Python (Debian's 3.11.2) has no filters: test.sh's copy of the rules is
    checked here against CPython's own ``tarfile.data_filter``."""
    dest = os.path.realpath(tmp_path)
    try:
        real = tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        real = None
    try:
        ours = runtime.data_filter(member, dest)
    except runtime.FilterError:
        ours = None
    assert (real is None) == (ours is None)
    if real is not None and (real.isreg() or real.islnk()):
        assert (real.name, real.mode) == (ours.name, ours.mode)


def test_the_tarball_writer_stores_links_inside_as_files_and_refuses_the_rest(tmp_path):
    phase = _phase(tmp_path)
    (phase / "alias.yaml").symlink_to("phase.yaml")
    written = tmp_path / "gt.tar.gz"
    assert tarball.write(phase, written, "validation") == 4  # phase.yaml, alias, two label maps
    with tarfile.open(written) as archive:
        members = archive.getmembers()
        assert all(m.isreg() or m.isdir() for m in members) and archive.pax_headers["comment"] == "phase validation"
        if hasattr(tarfile, "data_filter"):
            archive.extractall(tmp_path / "extracted", filter="data")  # what the shim does
    assert (tmp_path / "extracted" / "alias.yaml").read_bytes() == (phase / "phase.yaml").read_bytes()
    (phase / "escape.txt").symlink_to("/etc/os-release")
    with pytest.raises(tarball.Refused, match="escape.txt.*leaving the phase folder"):
        tarball.write(phase, tmp_path / "refused.tar.gz", "validation")
    assert not (tmp_path / "refused.tar.gz").exists()
    (phase / "escape.txt").unlink()
    os.mkfifo(phase / "pipe")
    with pytest.raises(tarball.Refused, match="pipe.*FIFO"):
        tarball.write(phase, tmp_path / "refused.tar.gz", "validation")


def test_tarballs_are_reproducible_and_differ_per_phase(tmp_path):
    """Grand-Challenge refuses a ground-truth upload whose SHA-256 it already has."""
    phase = _phase(tmp_path)
    first, again, other = (tmp_path / f"{n}.tar.gz" for n in ("first", "again", "other"))
    tarball.write(phase, first, "validation")
    os.utime(phase / "phase.yaml", (0, 12345))
    tarball.write(phase, again, "validation")
    tarball.write(phase, other, "test")
    assert first.read_bytes() == again.read_bytes() != other.read_bytes()
