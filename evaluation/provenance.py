"""What made a result: the build (grader version, source commit, locked dependency set) and
the phase (``phase.yaml``, the truth files' content, the options in force).

Every ``metrics.json`` carries this as ``provenance`` (``report.metrics_document``), so that a
result says what made it and ``python -m evaluation compare`` can name why two results differ.

- The build: an image has no ``.git``; ``build.sh`` passes the commit as a build argument and
  the Dockerfile writes it, with the digest of ``requirements.lock``, into ``build.json`` beside
  this module (``python -m evaluation.provenance stamp``). A source checkout asks git and hashes
  its own lock. The versions of the locked packages are read from the install itself.
- The phase fingerprint: a listing of every file of the phase folder with its size and the
  SHA-256 of its content. Content hashes are cached, keyed by (path, size, modification time
  in whole seconds, which survive a tarball): in the phase folder when the organizer asks for
  it (``python -m evaluation fingerprint PHASE``: at image build for the baked phase, before
  making a platform's tarball), else in the user's cache folder; a grader run never writes
  into the phase. With the cache warm a listing costs its ``stat`` calls (21 k chunk files:
  0.5 s).
"""

import argparse
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

BUILD_FILE = Path(__file__).with_name("build.json")
SOURCE_ROOT = Path(__file__).resolve().parent.parent  # a source checkout: .git and requirements.lock here
LOCK_NAME = "requirements.lock"
CACHE_NAME = ".evaluation-fingerprint.json"  # the content-hash cache inside a phase folder
CACHE_FORMAT = 1
MAX_GROUPS = 256  # truth files are summarised per folder, at the deepest level with at most this many entries
_CHUNK = 1 << 20


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(document) -> str:
    """SHA-256 of a JSON document in canonical form."""
    return _sha256_bytes(json.dumps(document, sort_keys=True, separators=(",", ":")).encode())


# --------------------------------------------------------------------------------------------
# The build


def lock_pins(text: str) -> dict[str, str]:
    """{normalised name: version} of a requirements lock's ``name==version`` lines."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if match:
            found[_normalise(match[1])] = match[3]
    return found


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_GIT: dict = {}  # the git commands ``start`` launched, read by ``_git_commit``


def _git(*args: str) -> list[str]:
    """A git command on the checkout that takes no lock (``git status`` would otherwise refresh
    the index under ``index.lock``, which a run stopped meanwhile would leave behind)."""
    return ["git", "--no-optional-locks", "-C", str(SOURCE_ROOT), *args]


def start() -> None:
    """Ask git for the source checkout's commit and state now, in processes of their own, so
    that ``build`` (when the results are written, seconds later) reads their answers instead
    of waiting for them (``git status`` walks the whole checkout: 0.1 s of every run). Nothing
    is started for an installed build (its stamp says it all) or outside a checkout."""
    if _GIT or BUILD_FILE.is_file() or not (SOURCE_ROOT / ".git").exists():
        return
    try:
        for name, args in (("head", ("rev-parse", "HEAD")), ("dirty", ("status", "--porcelain"))):
            _GIT[name] = subprocess.Popen(
                _git(*args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True
            )
    except OSError:
        _GIT.clear()


def _answer(name: str, args: tuple, timeout: float) -> subprocess.CompletedProcess:
    """The git command's result: from the process ``start`` launched, else run now."""
    running = _GIT.pop(name, None)
    if running is None:
        return subprocess.run(_git(*args), capture_output=True, text=True, timeout=timeout)
    try:
        out, _ = running.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        running.kill()
        running.communicate()
        raise
    return subprocess.CompletedProcess(running.args, running.returncode, out, "")


def _git_commit() -> str | None:
    if not (SOURCE_ROOT / ".git").exists():
        return None
    try:
        head = _answer("head", ("rev-parse", "HEAD"), 10)
        dirty = _answer("dirty", ("status", "--porcelain"), 30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


@functools.cache
def build() -> dict:
    """The grader's build: version, source commit, the lock's digest, whether the installed
    packages are exactly the lock's, and their versions (the lock's packages, or the direct
    dependencies when there is no lock)."""
    from evaluation import __version__

    if BUILD_FILE.is_file():
        stamp = json.loads(BUILD_FILE.read_text())
        commit, lock_sha, pins = stamp.get("commit"), stamp.get("lock_sha256"), stamp.get("pins", {})
    else:
        lock = SOURCE_ROOT / LOCK_NAME
        text = lock.read_text() if lock.is_file() else None
        commit, lock_sha, pins = _git_commit(), _sha256_bytes(text.encode()) if text else None, lock_pins(text or "")
    names = sorted(pins) or sorted(_direct_dependencies())
    installed = {name: _installed(name) for name in names}
    return {
        "version": __version__,
        "commit": commit,
        "lock_sha256": lock_sha,
        "locked": bool(pins) and installed == pins,
        "dependencies": installed,
    }


def _direct_dependencies() -> set[str]:
    try:
        return {
            _normalise(re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0])
            for r in metadata.requires("evaluation") or []
            if "extra ==" not in r
        }
    except metadata.PackageNotFoundError:
        return set()


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def stamp(commit: str, lock: Path) -> Path:
    """Write ``build.json`` (image build time): the commit and the lock the install came from."""
    text = lock.read_text()
    BUILD_FILE.write_text(
        json.dumps(
            {
                "commit": None if commit in ("", "unknown") else commit,
                "lock_sha256": _sha256_bytes(text.encode()),
                "pins": lock_pins(text),
            },
            indent=1,
        )
        + "\n"
    )
    return BUILD_FILE


# --------------------------------------------------------------------------------------------
# The phase


def files(folder: Path) -> list[tuple[str, os.stat_result]]:
    """Every regular file under ``folder`` (links not followed), sorted by relative path; the
    fingerprint cache itself is not part of the phase. ``scandir`` with relative names built
    as strings: 21 k chunk files in 0.3 s."""
    if not Path(folder).is_dir():
        return []
    found, pending = [], [("", str(folder))]
    while pending:
        prefix, path = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                relative = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append((relative + "/", entry.path))
                elif entry.is_file(follow_symlinks=False) and relative != CACHE_NAME:
                    found.append((relative, entry.stat(follow_symlinks=False)))
    found.sort(key=lambda item: item[0])
    return found


def content_hash(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def _cache_paths(folder: Path) -> list[Path]:
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return [
        folder / CACHE_NAME,
        home / "evaluation" / "fingerprints" / f"{_sha256_bytes(str(folder.resolve()).encode())[:32]}.json",
    ]


def _read_cache(folder: Path) -> dict:
    """The cached hashes: the phase folder's (written by ``python -m evaluation fingerprint``),
    updated by the user cache's (written by grader runs)."""
    found = {}
    for path in _cache_paths(folder):
        try:
            cache = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(cache, dict) and cache.get("format") == CACHE_FORMAT and isinstance(cache.get("files"), dict):
            found.update(cache["files"])
    return found


def _write_cache(folder: Path, files: dict, into_phase: bool) -> Path | None:
    """Into the phase folder only when asked (``python -m evaluation fingerprint``: a grader
    run never changes the phase), else, or when the phase folder refuses, the user cache."""
    content = json.dumps({"format": CACHE_FORMAT, "files": files}, separators=(",", ":")).encode()
    for path in _cache_paths(folder)[0 if into_phase else 1 :]:
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(content)
            os.replace(temporary, path)
            return path
        except OSError:
            temporary.unlink(missing_ok=True)
    return None


# Files that define the phase rather than hold its voxels (phase.yaml, a manifest, zarr
# metadata): small, few, and hashed every time.
DEFINITION_SUFFIXES = (".yaml", ".yml", ".json", ".csv", ".txt", ".zarray", ".zattrs", ".zgroup")


def listing(folder: Path, into_phase: bool = False) -> list[list]:
    """[relative path, size, SHA-256] of every file of the phase folder, content hashes taken
    from the cache when a file's size and modification time (whole seconds) are unchanged,
    except for the files that define the phase (``DEFINITION_SUFFIXES``): an edit that keeps
    such a file's size and restores its time (a manifest's cell) is still seen. New hashes are
    cached (in the phase folder itself with ``into_phase``)."""
    cached, fresh, rows, changed = _read_cache(folder), {}, [], False
    for relative, info in files(folder):
        key = [info.st_size, int(info.st_mtime)]
        entry = cached.get(relative)
        trusted = not relative.lower().endswith(DEFINITION_SUFFIXES)
        if trusted and isinstance(entry, list) and len(entry) == 3 and entry[:2] == key:
            sha = entry[2]
        else:
            sha, changed = content_hash(folder / relative), True
        fresh[relative] = [*key, sha]
        rows.append([relative, info.st_size, sha])
    if changed or into_phase and not (folder / CACHE_NAME).is_file():
        _write_cache(folder, fresh, into_phase)
    return rows


def _groups(rows: list[list]) -> dict[str, str]:
    """The files summarised per folder: a digest of everything under each entry, at the deepest
    level (at most 3) that has at most MAX_GROUPS entries. ``compare`` names these."""
    for depth in (3, 2, 1):
        keys = {"/".join(row[0].split("/")[:depth]) for row in rows}
        if len(keys) <= MAX_GROUPS or depth == 1:
            break
    grouped: dict[str, list] = {}
    for row in rows:
        grouped.setdefault("/".join(row[0].split("/")[:depth]), []).append(row)
    return {key: digest(value)[:16] for key, value in sorted(grouped.items())}


def phase_fingerprint(folder: Path, into_phase: bool = False) -> dict:
    """The phase's fingerprint: ``sha256`` over every file's path, size and content hash
    (phase.yaml included), the number of files and bytes, and per-folder digests (``groups``).
    ``into_phase``: cache the hashes in the phase folder (``python -m evaluation fingerprint``)."""
    rows = listing(Path(folder), into_phase)
    return {"sha256": digest(rows), "files": len(rows), "bytes": sum(row[1] for row in rows), "groups": _groups(rows)}


def options_in_force(phase) -> dict:
    """Every option of the phase's suite with the value it has in this run (phase.yaml's, else
    the schema's default; options without either are left out)."""
    from evaluation import phase as phases

    return {name: phase.option(name) for name in sorted(phases.option_schemas(phase.suite)) if phase.option(name) is not None}


def document(phase, suite, definitions: dict, reference: dict | None, fingerprint: dict, for_participants: bool = True) -> dict:
    """The ``provenance`` node, from the phase's fingerprint (computed once per run).
    ``for_participants`` (metrics.json, which a platform may show): the phase's digest alone
    (its per-folder digests name the truth's files, its file count and byte total follow the
    voxels), and the private cases and options naming truth files as digests keyed with the
    per-folder digests, which participants never see: a few case names and a seed cannot be
    tried against them. The organizer's files (rescore's case_scores.json,
    private-results.json) have everything."""
    options = options_in_force(phase)
    if for_participants:
        key = digest(fingerprint.get("groups"))
        fingerprint = {"sha256": fingerprint["sha256"]}
        options = {
            name: {"sha256": digest({"key": key, "value": value})} if _sealed_option(phase, name, value) else value
            for name, value in options.items()
        }
    return {
        "grader": build(),
        "phase": {"fingerprint": fingerprint, "options": options},
        "suite": {
            "name": suite.name,
            "ranking": suite.ranking,
            "higher_is_better": suite.higher_is_better,
            "reference": reference,
        },
        "definitions": definitions,
    }


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _sealed_option(phase, name: str, value) -> bool:
    """An option participants see only as a digest: the private cases (which cases are private
    is the organizer's to know) and any option naming the truth's files (a path in the phase
    folder, or a path template)."""
    if name == "private_cases":
        return True
    for text in _strings(value):
        if "{" in text or "/" in text:
            return True
        try:
            if text and (Path(phase.root) / text).exists():
                return True
        except (OSError, ValueError):
            return True
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.provenance", description="image build: write build.json")
    commands = parser.add_subparsers(dest="command", required=True)
    stamping = commands.add_parser("stamp", help="record the source commit and the lock the install was made from")
    stamping.add_argument("--commit", default="unknown")
    stamping.add_argument("--lock", type=Path, required=True)
    args = parser.parse_args(argv)
    print(stamp(args.commit, args.lock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
