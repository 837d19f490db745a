"""Grand-Challenge's evaluation runtime, played for test.sh (never part of the grader image).

What it does, and where each step comes from (DIAGNijmegen/rse-sagemaker-shim v0.6.1, the
version comic/grand-challenge.org @9957bfc pins; Grand-Challenge's side in that repository):

1. Memory: ``RLIMIT_DATA`` = ``GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB`` MiB, soft and hard
   (shim ``cli.py`` ``set_memory_limits``); Grand-Challenge sets it to the instance's memory
   less 1 GiB (``amazon_sagemaker_base.py`` ``_max_memory_mb``): 7168 on the default 8 GB
   evaluation instance. Inherited by the grader and its forked workers.
2. Ground truth: /opt/ml/input/data/ground_truth made 0777, the phase's tarball extracted into
   it as it is (no top-level folder stripped) with the ``data`` filter, every member chowned to
   the image's user (``AuxiliaryData.setup``, ``ensure_directories_are_writable``,
   ``ProcUserTarfile``). Here the tarball is the mounted file named by
   ``GRAND_CHALLENGE_COMPONENT_GROUND_TRUTH``.
3. Input: /input replaced by a root-owned symlink to /opt/ml/input/data/<job>-input (0755)
   (``InferenceTask.reset_linked_input``), which receives the inputs and ``inputs.json``
   (grand-challenge ``backends/base.py`` ``_with_inputs_json``). A prediction upload (a zip) is
   extracted by the shim into /input: directory entries and __MACOSX, .DS_Store and
   desktop.ini dropped, the common path prefix of the rest stripped (``extract.py``
   ``safe_extract``/``_filter_members``). Here: ``EMULATION_INPUT`` is a mounted folder to
   copy (an algorithm phase's predictions.json and job outputs) or a mounted zip to extract.
4. The process: the image's original ENTRYPOINT + CMD (``GRAND_CHALLENGE_COMPONENT_*_B64J``,
   Docker's rules) as the image's user looked up in /etc/passwd and /etc/group, with its
   supplementary groups, in a new session; every variable starting with ``grand_challenge_``
   (any case) removed, ``HOME`` from passwd (``ProcUserMixin``, ``proc_env``); Grand-Challenge
   adds ``LOG_LEVEL=INFO``, ``PYTHONUNBUFFERED=1``, ``no_proxy=amazonaws.com``.
5. The exit status is passed on (the shim uploads /output only when it is 0; test.sh reads
   metrics.json only then).
"""

import base64
import grp
import json
import os
import pwd
import resource
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

JOB = "evaluation-evaluation-00000000-0000-0000-0000-000000000000-00"
DATA = Path("/opt/ml/input/data")
GROUND_TRUTH = DATA / "ground_truth"
DROPPED = {"__MACOSX", ".DS_Store", "desktop.ini"}


def user() -> tuple[int, int, list[int], str | None]:
    spec = os.environ.get("GRAND_CHALLENGE_COMPONENT_USER", "") or "0"
    name, _, group = spec.partition(":")
    entry = next((p for p in pwd.getpwall() if name in (p.pw_name, str(p.pw_uid))), None)
    uid = entry.pw_uid if entry else int(name)
    gid = int(group) if group.isdigit() else (grp.getgrnam(group).gr_gid if group else (entry.pw_gid if entry else 0))
    groups = [g.gr_gid for g in grp.getgrall() if entry and entry.pw_name in g.gr_mem]
    return uid, gid, groups, entry.pw_dir if entry else None


def command() -> list[str]:
    load = lambda key: json.loads(base64.b64decode(os.environ.get(key, "") or "bnVsbA=="))  # noqa: E731  ("null")
    entrypoint, cmd = load("GRAND_CHALLENGE_COMPONENT_ENTRYPOINT_B64J"), load("GRAND_CHALLENGE_COMPONENT_CMD_B64J")
    wrap = lambda value: ["/bin/sh", "-c", value] if isinstance(value, str) else list(value or [])  # noqa: E731
    return wrap(entrypoint) + wrap(cmd)


def extract_ground_truth(uid: int, gid: int) -> None:
    GROUND_TRUTH.mkdir(parents=True, exist_ok=True)
    GROUND_TRUTH.chmod(0o777)
    tarball = os.environ.get("GRAND_CHALLENGE_COMPONENT_GROUND_TRUTH")
    if not tarball:
        return
    with tarfile.open(tarball) as archive:  # Debian's 3.11.2 predates tarfile's extraction filters
        archive.extractall(GROUND_TRUTH, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    for path in [GROUND_TRUTH, *GROUND_TRUTH.rglob("*")]:
        os.lchown(path, uid, gid)


def provide_input() -> None:
    linked = DATA / f"{JOB}-input"
    linked.mkdir(parents=True, mode=0o755)
    source = Path(os.environ["EMULATION_INPUT"])
    if source.is_dir():
        shutil.copytree(source, linked, dirs_exist_ok=True, symlinks=True)
    else:
        with zipfile.ZipFile(source) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not DROPPED & set(PurePosixPath(m.filename).parts)]
            prefix = (
                os.path.commonpath([m.filename for m in members])
                if len(members) > 1
                else str(PurePosixPath(members[0].filename).parent)
            )
            for member in members:
                relative = (
                    PurePosixPath(member.filename).relative_to(prefix)
                    if prefix not in ("", ".")
                    else PurePosixPath(member.filename)
                )
                target = linked / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    (linked / "inputs.json").write_text(json.dumps([]))
    if Path("/input").is_dir() and not Path("/input").is_symlink():
        Path("/input").rmdir()
    Path("/input").symlink_to(linked)


def main() -> int:
    megabytes = int(os.environ.get("GRAND_CHALLENGE_COMPONENT_MAX_MEMORY_MB", "0"))
    if megabytes:
        resource.setrlimit(resource.RLIMIT_DATA, (megabytes << 20, megabytes << 20))
    uid, gid, groups, home = user()
    extract_ground_truth(uid, gid)
    provide_input()
    Path("/output").chmod(0o777)
    env = {k: v for k, v in os.environ.items() if not k.lower().startswith("grand_challenge_") and not k.startswith("EMULATION_")}
    env.update(LOG_LEVEL="INFO", PYTHONUNBUFFERED="1", no_proxy="amazonaws.com", **({"HOME": home} if home else {}))
    return subprocess.run(command(), env=env, user=uid, group=gid, extra_groups=groups, start_new_session=True).returncode


if __name__ == "__main__":
    sys.exit(main())
