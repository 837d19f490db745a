"""Grand-Challenge's evaluation runtime, played for test.sh (never part of the grader image).

Read from DIAGNijmegen/rse-sagemaker-shim v0.7.0 (b20f0a71) and DIAGNijmegen/rse-grand-challenge
(4e38c78b), with the changes of shim 0.8.1/0.8.3 known only from the platform's threads (PR
#4797, issue #4971) marked as such:

1. Memory: ``RLIMIT_DATA`` = ``GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB`` MiB, soft and hard
   (shim ``cli.py`` ``set_memory_limits``), 7168 on the default 8 GB instance
   (``amazon_sagemaker_base.py`` ``_max_memory_mb``). Whether shim 0.8 still sets it is not in
   any published code: leave the variable out to run under a cgroup limit alone.
2. Ground truth: /opt/ml/input/data/ground_truth made 0777 and the phase's tarball extracted
   into it with tarfile's ``data`` filter, members chowned to the image's user
   (``download_and_extract_tarball``, ``ProcUserTarfile``, ``AuxiliaryData``). The image's
   Python (Debian's 3.11.2) predates the filters, so their rules are written out here
   (``data_filter``, after PEP 706). A tarball the filter refuses ends the job with "Could not
   set up ground truth" and no result: Grand-Challenge then reports "The invocation request
   did not return a result".
3. Input: /input a root-owned link to /opt/ml/input/data/<job>-input (``reset_linked_input``).
   A prediction upload (socket ``predictions-zip-file``, relative path ``predictions.zip``,
   ``decompress``) is extracted there by ``extract.py`` ``safe_extract``/``_filter_members``:
   directory entries and every member whose path *contains* ``__MACOSX``, ``.DS_Store`` or
   ``desktop?ini`` (a regular-expression search) dropped, the common path of all remaining
   files stripped at any depth (the parent, for a single file). An algorithm phase's
   ``predictions.json`` and job outputs are copied. Additional evaluation inputs are written
   at /input/<relative path> (a value as JSON text: ``Executor._get_civ_provisioning_tasks``),
   and ``inputs.json`` lists every input value with ``interface`` and ``socket``
   (``Executor._with_inputs_json``, ``ComponentInterfaceValueSerializer``, c49ef8bcb).
4. The process: the image's ENTRYPOINT + CMD (``GRAND_CHALLENGE_COMPONENT_*_B64J``, Docker's
   rules) as the image's user with its groups, the primary one first, in a new session;
   ``grand_challenge_*`` variables (any case) removed, ``LD_LIBRARY_PATH`` restored or removed,
   ``HOME`` from passwd (``ProcUserMixin``, ``UserProcess.proc_env``); Grand-Challenge adds
   ``LOG_LEVEL``, ``PYTHONUNBUFFERED``, ``no_proxy`` (``Executor.invocation_environment``).
   Exec: run once, stopped at the phase's time limit (``EMULATION_TIME_LIMIT``: SageMaker's
   ``MaxRuntimeInSeconds``, the phase's ``evaluation_time_limit``). Invoke (the image label ``org.grand-challenge.api-method=invoke``, passed as
   ``GRAND_CHALLENGE_COMPONENT_API_METHOD``): started before the input is placed, ``GET
   /health`` polled (10 s a call, 300 s in all, a redirect fails), then ``POST /invoke``, which
   must answer 201; then the process group gets SIGTERM, SIGKILL after 5 s (``UserProcess.setup``,
   ``health_check``, ``invoke``, ``_terminate_group_and_wait``).
5. The streams: read line by line, a line over 64 KiB skipped with a warning
   (``_stream_to_external``); Grand-Challenge keeps the last 500 lines of each
   (``_set_task_logs``, ``LOGLINES``).
6. The result, written as JSON to ``EMULATION_RESULT`` (what Grand-Challenge would store and
   show): outputs are read only after exit 0 (``InferenceTask._run_inference``), each
   configured evaluation output must exist and parse as its kind ("Output file ... was not
   produced": ``Executor._create_json_result``/``_create_file_result``); a failure's message is
   the last non-empty stderr line, timestamps stripped (``backends/utils.py`` ``user_error``;
   137 is "killed as it exceeded its memory limit"); invoke failures: shim 0.7 reports
   "Invoke endpoint returned status N, expected 201", shim 0.8.3 the user process's last error
   line (issue #4971); the badge is "warning" for a success that wrote on stderr
   (``ComponentJob.status_context``).

The runtime's own exit status is the user process's (invoke: 0 for 201, else 1; 70 when the
ground truth could not be set up).
"""

import base64
import collections
import copy
import grp
import json
import os
import pwd
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from pathlib import Path

JOB = "evaluation-evaluation-00000000-0000-0000-0000-000000000000-00"
DATA = Path("/opt/ml/input/data")
GROUND_TRUTH = DATA / "ground_truth"
LOGLINES = 500
MAX_LINE = 64 * 1024  # asyncio's StreamReader default limit in the shim
PORT = 4743
NO_RESULT = 70
SHIM_0_8_3 = os.environ.get("EMULATION_SHIM", "0.8.3") >= "0.8.3"
_DROPPED = re.compile(r"(__MACOSX|\.DS_Store|desktop.ini)")
_TIMESTAMP = re.compile(
    r"^(?P<timestamp>([\d]+)-(0[1-9]|1[012])-(0[1-9]|[12][\d]|3[01])[Tt]([01][\d]|2[0-3]):([0-5][\d]):([0-5][\d]|60)"
    r"(\.[\d]+)?(([Zz])|([\+|\-]([01][\d]|2[0-3]):[0-5][\d])))?(?P<error_message>.*)$"
)


# ---------------------------------------------------------------------------------------------
# 1-2. Memory and ground truth


class FilterError(Exception):
    """A member tarfile's ``data`` filter refuses."""


def data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """PEP 706's ``data`` filter: leading slashes stripped; refused: a name or a link leaving
    ``dest``, an absolute link, a device, FIFO or other special file; permissions of files made
    owner-readable/writable without group/other write, setuid/setgid/sticky or new execute bits."""
    name = member.name.lstrip("/" + os.sep)
    if os.path.isabs(name):
        raise FilterError(f"{member.name!r} has an absolute path")
    target = os.path.realpath(os.path.join(dest, name))
    if os.path.commonpath([target, dest]) != dest:
        raise FilterError(f"{member.name!r} would be extracted outside the destination")
    if (
        member.ischr()
        or member.isblk()
        or member.isfifo()
        or not (member.isreg() or member.isdir() or member.issym() or member.islnk())
    ):
        raise FilterError(f"{member.name!r} is a special file")
    if member.issym() or member.islnk():
        if os.path.isabs(member.linkname):
            raise FilterError(f"{member.name!r} is a link to an absolute path")
        base = os.path.dirname(target) if member.issym() else dest
        if os.path.commonpath([os.path.realpath(os.path.join(base, member.linkname)), dest]) != dest:
            raise FilterError(f"{member.name!r} links outside the destination")
    filtered = copy.copy(member)  # TarInfo.replace arrived with the filters, after Debian's 3.11.2
    filtered.name, filtered.uid, filtered.gid, filtered.uname, filtered.gname = name, 0, 0, "", ""
    if member.isreg() or member.islnk():
        mode = member.mode & 0o755
        filtered.mode = (mode if mode & 0o100 else mode & ~0o111) | 0o600
    elif member.isdir():
        filtered.mode = 0o755  # the filter leaves a folder's mode to the extraction's default
    return filtered


def extract_ground_truth(uid: int, gid: int) -> bool:
    GROUND_TRUTH.mkdir(parents=True, exist_ok=True)
    GROUND_TRUTH.chmod(0o777)
    tarball = os.environ.get("GRAND_CHALLENGE_COMPONENT_GROUND_TRUTH")
    if not tarball:
        return True
    dest = os.path.realpath(GROUND_TRUTH)
    try:
        with tarfile.open(tarball) as archive:
            for member in archive:
                archive.extract(data_filter(member, dest), dest, set_attrs=not member.issym())
    except (FilterError, tarfile.TarError, FileNotFoundError) as error:
        print(f"runtime: Could not set up ground truth: Tarfile could not be extracted ({error})", file=sys.stderr)
        return False
    for path in [GROUND_TRUTH, *GROUND_TRUTH.rglob("*")]:
        os.lchown(path, uid, gid)
    return True


# ---------------------------------------------------------------------------------------------
# 3. The input


def socket(slug: str, relative_path: str, kind: str, super_kind: str) -> dict:
    return {
        "title": slug.replace("-", " ").title(),
        "description": "",
        "slug": slug,
        "kind": kind,
        "pk": 1,
        "default_value": None,
        "super_kind": super_kind,
        "relative_path": relative_path,
        "overlay_segments": [],
        "look_up_table": None,
    }


def value(civ_socket: dict, value=None, file=None) -> dict:
    return {"pk": str(uuid.uuid4()), "interface": civ_socket, "socket": civ_socket, "value": value, "file": file, "image": None}


def safe_extract(source: Path, dest: Path) -> None:
    """``extract.py`` ``safe_extract`` with ``_filter_members``."""
    with zipfile.ZipFile(source) as archive:
        valid = [m for m in archive.infolist() if not m.is_dir() and _DROPPED.search(m.filename) is None]
        if len(valid) == 1:
            common = str(Path(valid[0].filename).parent)
            common = "" if common == "." else common
        else:
            common = os.path.commonpath([m.filename for m in valid]) if valid else ""
        for member in valid:
            relative = member.filename[len(common) + 1 :] if common else member.filename
            target = Path(os.path.normpath(dest / relative))
            if dest not in target.parents:
                raise SystemExit("runtime: Zip file contains invalid paths")
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as stream, open(target, "wb") as out:
                shutil.copyfileobj(stream, out)


def provide_input() -> None:
    linked = DATA / f"{JOB}-input"
    linked.mkdir(parents=True, mode=0o755)
    source = Path(os.environ["EMULATION_INPUT"])
    values = []
    if source.is_dir():  # an algorithm phase: predictions.json and the jobs' outputs
        shutil.copytree(source, linked, dirs_exist_ok=True, symlinks=True)
        jobs = json.loads((linked / "predictions.json").read_text())
        values.append(value(socket("predictions-json-file", "predictions.json", "Anything", "File"), value=jobs))
    else:  # a prediction-file phase: the uploaded zip
        safe_extract(source, linked)
        values.append(
            value(
                socket("predictions-zip-file", "predictions.zip", "ZIP file", "File"),
                file="https://grand-challenge.org/media/components/componentinterfacevalue/predictions.zip",
            )
        )
    for relative, given in json.loads(os.environ.get("EMULATION_ADDITIONAL_INPUTS", "{}")).items():
        (linked / relative).write_text(json.dumps(given))
        values.append(value(socket(relative.rsplit(".", 1)[0], relative, "Anything", "Value"), value=given))
    (linked / "inputs.json").write_text(json.dumps(values))
    if Path("/input").is_dir() and not Path("/input").is_symlink():
        Path("/input").rmdir()
    Path("/input").symlink_to(linked)


# ---------------------------------------------------------------------------------------------
# 4-5. The user process and its streams


def user() -> tuple[int, int, list[int], str | None]:
    spec = os.environ.get("GRAND_CHALLENGE_COMPONENT_USER", "") or "0"
    name, _, group = spec.partition(":")
    entry = next((p for p in pwd.getpwall() if name in (p.pw_name, str(p.pw_uid))), None)
    uid = entry.pw_uid if entry else int(name)
    gid = int(group) if group.isdigit() else (grp.getgrnam(group).gr_gid if group else (entry.pw_gid if entry else 0))
    groups = [g.gr_gid for g in grp.getgrall() if entry and entry.pw_name in g.gr_mem]
    return uid, gid, [gid, *[g for g in groups if g != gid]], entry.pw_dir if entry else None


def command() -> list[str]:
    load = lambda key: json.loads(base64.b64decode(os.environ.get(key, "") or "bnVsbA=="))  # noqa: E731  ("null")
    entrypoint, cmd = load("GRAND_CHALLENGE_COMPONENT_ENTRYPOINT_B64J"), load("GRAND_CHALLENGE_COMPONENT_CMD_B64J")
    wrap = lambda value: ["/bin/sh", "-c", value] if isinstance(value, str) else list(value or [])  # noqa: E731
    return wrap(entrypoint) + wrap(cmd)


class Streams:
    """The user process's stdout and stderr as the shim forwards them and Grand-Challenge keeps
    them; each line is also passed through to this process's own streams for test.sh."""

    def __init__(self, process: subprocess.Popen):
        self.kept = {"stdout": collections.deque(maxlen=LOGLINES), "stderr": collections.deque(maxlen=LOGLINES)}
        self.threads = [
            threading.Thread(target=self._read, args=(name, stream), daemon=True)
            for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))
        ]
        for thread in self.threads:
            thread.start()

    def _read(self, name: str, stream) -> None:
        echo = sys.stdout.buffer if name == "stdout" else sys.stderr.buffer
        while line := stream.readline(MAX_LINE + 1):
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while (rest := stream.readline(MAX_LINE + 1)) and not rest.endswith(b"\n"):
                    pass
                self.kept["stderr"].append("WARNING: A log line was skipped as it was too long")
                continue
            echo.write(line)
            echo.flush()
            self.kept[name].append(
                time.strftime("%Y-%m-%dT%H:%M:%S+00:00 ", time.gmtime()) + line.replace(b"\0", b"").decode().rstrip("\n")
            )

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)


def start(uid: int, gid: int, groups: list[int], home: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("grand_challenge_") and not k.startswith("EMULATION_")}
    if "LD_LIBRARY_PATH_ORIG" in env:
        env["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH_ORIG"]
    else:
        env.pop("LD_LIBRARY_PATH", None)
    env.update(LOG_LEVEL="INFO", PYTHONUNBUFFERED="1", no_proxy="amazonaws.com", **({"HOME": home} if home else {}))
    return subprocess.Popen(
        command(),
        env=env,
        user=uid,
        group=gid,
        extra_groups=groups,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
    )


def http(method: str, path: str, timeout: float) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{PORT}{path}", method=method)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_for_health(process: subprocess.Popen, total: float = 300, per_call: float = 10) -> str | None:
    """``UserProcess.health_check``: None when healthy, else the shim's reason."""
    deadline = time.monotonic() + total
    while time.monotonic() < deadline and process.poll() is None:
        try:
            status = http("GET", "/health", per_call)
        except (urllib.error.URLError, OSError):
            time.sleep(1)  # the shim sleeps per_call seconds after a refused connection
            continue
        if status == 200:
            return None
        if 300 <= status < 400:
            return "Failed to start the algorithm container's inference server"
        time.sleep(1)
    return "The algorithm container's inference server didn't pass the health check"


def stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


# ---------------------------------------------------------------------------------------------
# 6. The result


def user_error(lines) -> str:
    message = "No errors were reported in the logs."
    for line in lines:
        found = _TIMESTAMP.match(line)
        text = (found.group("error_message") if found else line).strip()
        if text:
            message = text
    return message[:1024]


def read_outputs() -> str | None:
    """Each configured evaluation output, as ``Executor.get_outputs`` reads it: the first error."""
    for relative, kind in json.loads(os.environ.get("EMULATION_OUTPUTS", '{"metrics.json": "Anything"}')).items():
        path = Path("/output") / relative
        if not path.is_file():
            return f"Output file {relative!r} was not produced"
        if kind in ("Anything", "Float", "Integer", "String", "Bool"):
            try:
                json.loads(path.read_bytes().decode("utf-8"), parse_constant=lambda x: None)
            except ValueError:
                return f"The output file {relative!r} is not valid json"
        elif kind == "ZIP file" and not zipfile.is_zipfile(path):
            return f"The output file {relative!r} is not valid. Not a ZIP file"
    return None


def main() -> int:
    megabytes = int(os.environ.get("GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB", "0"))
    if megabytes:
        resource.setrlimit(resource.RLIMIT_DATA, (megabytes << 20, megabytes << 20))
    result_file = Path(os.environ.get("EMULATION_RESULT", "/tmp/result.json"))
    uid, gid, groups, home = user()
    if not extract_ground_truth(uid, gid):
        result_file.write_text(
            json.dumps({"status": "Failed", "badge": "danger", "error": "The invocation request did not return a result"})
        )
        return NO_RESULT
    Path("/output").chmod(0o777)
    invoke = os.environ.get("GRAND_CHALLENGE_COMPONENT_API_METHOD", "exec").lower() == "invoke"
    error = None
    if invoke:
        process = start(uid, gid, groups, home)
        streams = Streams(process)
        error = wait_for_health(process)
        if error is None:
            provide_input()
            status = http("POST", "/invoke", float(os.environ.get("EMULATION_TIME_LIMIT", "3600")))
            code = 0 if status == 201 else 1
            if code:
                error = None if SHIM_0_8_3 else f"Invoke endpoint returned status {status}, expected 201"
        else:
            code = 1
        stop(process)
    else:
        provide_input()
        process = start(uid, gid, groups, home)
        streams = Streams(process)
        try:
            code = process.wait(timeout=float(os.environ.get("EMULATION_TIME_LIMIT", "3600")))
        except subprocess.TimeoutExpired:  # SageMaker's MaxRuntimeInSeconds: the job is stopped
            stop(process)
            code, error = 1, "Time limit exceeded"
    streams.join()
    if code == 0:
        error = read_outputs()
    elif error is None:
        error = (
            "The container was killed as it exceeded its memory limit"
            if code in (-9, 137)
            else user_error(streams.kept["stderr"])
        )
    status = "Failed" if code or error else "Succeeded"
    badge = "danger" if status == "Failed" else ("warning" if streams.kept["stderr"] else "success")
    result_file.write_text(
        json.dumps(
            {
                "status": status,
                "badge": badge,
                "error": error,
                "exit_status": code,
                "stdout": list(streams.kept["stdout"]),
                "stderr": list(streams.kept["stderr"]),
            }
        )
    )
    return code if code else (1 if error else 0)


if __name__ == "__main__":
    sys.exit(main())
