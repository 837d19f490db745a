"""The conformance kits' values, kept to the bit across rebuilds of the image.

``conformance.sh`` (and ``lock.sh``) run the kits (test/test_*_parity.py) inside the image with
EVALUATION_CONFORMANCE_DUMP set, which keeps every grader run's metrics.json as
DUMP/<test>#<n>/metrics.json. This script reduces each to a digest of its numbers (every number
and null under ``case`` and ``aggregates``, with its key path; strings such as temporary paths
are left out) and compares them with container/conformance-digests.json, the digests the
locked image gave when the lock was last renewed. Standard library only (runs on the host).

    python3 container/conformance.py digests DUMP              print {run: digest} as JSON
    python3 container/conformance.py check DUMP DIGESTS_FILE   exit 1 unless every run has its recorded digest
"""

import hashlib
import json
import sys
from pathlib import Path


def numbers(node, path=()):
    if isinstance(node, dict):
        for key in sorted(node):
            yield from numbers(node[key], (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from numbers(value, (*path, str(index)))
    elif node is None or (isinstance(node, (int, float)) and not isinstance(node, bool)):
        yield "/".join(path), node


def digest(metrics: dict) -> str:
    rows = list(numbers({"case": metrics.get("case", {}), "aggregates": metrics.get("aggregates", {})}))
    return hashlib.sha256(json.dumps(rows, allow_nan=True).encode()).hexdigest()


def digests(dump: Path) -> dict[str, str]:
    return {
        path.parent.name: digest(json.loads(path.read_text()))
        for path in sorted(dump.glob("*/metrics.json"), key=lambda p: p.parent.name)
    }


def check(dump: Path, recorded_file: Path) -> list[str]:
    found, recorded = digests(dump), json.loads(recorded_file.read_text())
    problems = [f"{name}: not run" for name in sorted(set(recorded) - set(found))]
    problems += [f"{name}: not in {recorded_file.name}" for name in sorted(set(found) - set(recorded))]
    problems += [
        f"{name}: values differ from the locked image's"
        for name in sorted(set(found) & set(recorded))
        if found[name] != recorded[name]
    ]
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["digests"] and len(argv) == 2:
        print(json.dumps(digests(Path(argv[1])), indent=1, sort_keys=True))
        return 0
    if argv[:1] == ["check"] and len(argv) == 3:
        problems = check(Path(argv[1]), Path(argv[2]))
        for line in problems:
            print(f"FAIL conformance {line}", file=sys.stderr)
        print(f"conformance: {len(digests(Path(argv[1])))} runs, {len(problems)} differing from {Path(argv[2]).name}")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
