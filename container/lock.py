"""requirements.lock: every runtime dependency of the image pinned with its hashes.

The lock is made from ``pyproject.toml``'s ``[project] dependencies`` by pip-tools'
``pip-compile --generate-hashes`` inside the image's own base (``./lock.sh``), and carries on its
first line the digest of the dependency list it was made from. The image installs it with
``pip install --require-hashes`` (Dockerfile); ``build.sh`` refuses to build when pyproject's
dependencies changed since the lock was made. Standard library only: it runs on the host
before anything is installed.

    python3 container/lock.py requirements        the dependency list, one per line (pip-compile's input)
    python3 container/lock.py stamp LOCK          write the digest line at the top of LOCK
    python3 container/lock.py check [LOCK]        exit 1 unless LOCK was made from pyproject's dependencies
    python container/lock.py installed [LOCK]     exit 1 unless this interpreter has every locked package at its
                                                  locked version (CI's test environment, after installing the lock)
"""

import hashlib
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK = ROOT / "requirements.lock"
STAMP = "# made from pyproject.toml's dependencies with sha256 "
RENEW = "./lock.sh"


def declared(pyproject: Path = PYPROJECT) -> list[str]:
    """pyproject's runtime dependencies, as written (comments are TOML's, not part of them)."""
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def digest(requirements: list[str]) -> str:
    """Order and spacing do not count; every other change does."""
    normalised = sorted(re.sub(r"\s+", "", r).lower() for r in requirements)
    return hashlib.sha256("\n".join(normalised).encode()).hexdigest()


def recorded(lock: Path) -> str | None:
    for line in lock.read_text(encoding="utf-8").splitlines()[:5]:
        if line.startswith(STAMP):
            return line[len(STAMP) :].strip()
    return None


def pins(lock: Path) -> dict[str, str]:
    """{normalised name: version} of every ``name==version`` line of the lock."""
    found = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)", line)
        if match:
            found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[3]
    return found


def stamp(lock: Path) -> None:
    lines = [line for line in lock.read_text(encoding="utf-8").splitlines() if not line.startswith(STAMP)]
    lock.write_text("\n".join([STAMP + digest(declared()), *lines]) + "\n", encoding="utf-8")


def check(lock: Path = LOCK, pyproject: Path = PYPROJECT) -> str | None:
    """None when ``lock`` was made from pyproject's current dependencies, else what is wrong."""
    if not lock.is_file():
        return f"{lock.name} is missing; make it with {RENEW}"
    made_from = recorded(lock)
    if made_from is None:
        return f"{lock.name} has no '{STAMP.strip()}' line; renew it with {RENEW}"
    if made_from != digest(declared(pyproject)):
        return f"pyproject.toml's dependencies changed since {lock.name} was made; renew the lock with {RENEW}"
    if "--hash=" not in lock.read_text(encoding="utf-8"):
        return f"{lock.name} has no hashes; renew it with {RENEW}"
    return None


def unlocked(lock: Path = LOCK) -> list[str]:
    """The locked packages this interpreter has at another version (or not at all)."""
    from importlib import metadata

    found = []
    for name, version in sorted(pins(lock).items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            found.append(f"{name} {installed or 'missing'} (locked {version})")
    return found


def main(argv: list[str]) -> int:
    command, *rest = argv or ["check"]
    if command == "requirements":
        print("\n".join(declared()))
        return 0
    if command == "stamp":
        stamp(Path(rest[0]))
        return 0
    if command == "check":
        problem = check(Path(rest[0]) if rest else LOCK)
        if problem:
            print(f"lock: {problem}", file=sys.stderr)
            return 1
        return 0
    if command == "installed":
        moved = unlocked(Path(rest[0]) if rest else LOCK)
        for line in moved:
            print(f"lock: not the locked version: {line}", file=sys.stderr)
        return 1 if moved else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
