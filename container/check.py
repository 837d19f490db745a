"""Checks one container run, inside the image (no host Python needed): metrics.json is valid
against the installed schemas/metrics.schema.json and every expected file matches (JSON
numbers to 1e-9 relative, everything else exactly). metrics.json's ``provenance`` names the
build, so it is not compared; it must say that the install is exactly requirements.lock.

    python check.py OUTPUT_DIR EXPECTED_DIR
"""

import json
import math
import sys
from pathlib import Path

import jsonschema

from evaluation import schemas


def differences(got, expected, path=""):
    if isinstance(expected, dict) and isinstance(got, dict):
        found = [f"{path}: keys differ {sorted(set(got) ^ set(expected))}"] if set(got) != set(expected) else []
        return found + [d for k in set(got) & set(expected) for d in differences(got[k], expected[k], f"{path}/{k}")]
    if isinstance(expected, list) and isinstance(got, list) and len(got) == len(expected):
        return [d for i, (g, e) in enumerate(zip(got, expected)) for d in differences(g, e, f"{path}[{i}]")]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (got, expected))
    if numbers and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12):
        return []
    return [] if got == expected else [f"{path}: expected {expected!r}, got {got!r}"]


def main(output: Path, expected: Path) -> int:
    metrics = json.loads((output / "metrics.json").read_text())
    jsonschema.Draft202012Validator(schemas.load("metrics")).validate(metrics)
    problems = (
        [] if metrics["provenance"]["grader"]["locked"] else ["metrics.json: the image's packages are not requirements.lock's"]
    )
    for reference in sorted(expected.glob("*.json")):
        produced = output / reference.name
        if not produced.is_file():
            problems.append(f"{reference.name}: not written")
            continue
        document = json.loads(produced.read_text())
        if reference.name == "metrics.json":
            document.pop("provenance")
        problems += [f"{reference.name}{d}" for d in differences(document, json.loads(reference.read_text()))]
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
