"""Run the public entry point exactly as the platforms do, and compare results with the
references' numbers under the conformance kits' rules."""

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "test" / "fixtures"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    output: Path

    @property
    def last_line(self) -> str:
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    @property
    def metrics(self) -> dict:
        return json.loads((self.output / "metrics.json").read_text())


def run_cli(submission: Path, phase: Path, output: Path, *extra: str, env: dict | None = None, cold: bool = False) -> Run:
    """``python -m evaluation --input SUBMISSION --ground-truth PHASE --output OUTPUT EXTRA...``
    in the repository's folder: forked from the warm grader (``helpers/capped.py``), or, with
    ``cold`` or ``EVALUATION_TEST_COLD=1`` in the environment, in a fresh interpreter."""
    from helpers import capped

    args = ["--input", str(submission), "--ground-truth", str(phase), "--output", str(output), *extra]
    done = capped.run(args, ROOT, None, 900, env=env, cold=cold)
    _keep_for_conformance(output)
    return Run(done.code, done.stdout, done.stderr, output)


def run_on_a_platform(submission: Path, phase: Path, output: Path, *extra: str) -> Run:
    """``run_cli`` as CodaBench runs it (the submission copied to ``input/res``): the last line a
    participant reads there. A local run is the organizer's, whose last line names a broken
    phase's cause."""
    import shutil

    folder = output.with_name(f"{output.name}-platform-input")
    shutil.copytree(submission, folder / "res", symlinks=True) if submission.is_dir() else None
    return run_cli(folder, phase, output, "--platform", "codabench", *extra)


_KEPT: dict[str, int] = {}


def _keep_for_conformance(output: Path) -> None:
    """With EVALUATION_CONFORMANCE_DUMP set (conformance.sh, lock.sh: the kits run inside the
    image), each run's metrics.json is kept as DUMP/<test>@<output folder>/metrics.json, so that
    two images' runs can be compared value by value (``python -m evaluation compare``). The
    output folder (below pytest's numbered base folder) names the run whatever order a test's
    threads ran it in."""
    dump = os.environ.get("EVALUATION_CONFORMANCE_DUMP")
    if not dump or not (output / "metrics.json").is_file():
        return
    module, _, test = os.environ.get("PYTEST_CURRENT_TEST", "run").rsplit(" ", 1)[0].partition("::")
    parts = Path(output).resolve().parts
    below = next((i for i, part in enumerate(parts) if part.startswith("pytest-") and part[7:].isdigit()), len(parts) - 2)
    where = "/".join(parts[below + 1 :])
    name = "".join(c if c.isalnum() or c in "-_.[]@" else "_" for c in f"{Path(module).stem}.{test}@{where}")
    _KEPT[name] = _KEPT.get(name, 0) + 1
    target = Path(dump) / (name if _KEPT[name] == 1 else f"{name}#{_KEPT[name]}")
    target.mkdir(parents=True, exist_ok=True)
    (target / "metrics.json").write_bytes((output / "metrics.json").read_bytes())


def validate_metrics(document: dict) -> None:
    schema = json.loads((ROOT / "schemas" / "metrics.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


def close(got, expected, rel=1e-9, floor=1e-12) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return got is expected
    if isinstance(expected, int) and isinstance(got, int):
        return got == expected
    if not isinstance(got, (int, float)):
        return False
    return got == expected or abs(got - expected) <= max(floor, rel * max(abs(got), abs(expected)))


def differences(got, expected, path="", integer_keys=()) -> list[str]:
    """Every difference between two result trees under the conformance rules: equal key sets,
    strings/bools/nulls exact, integer counts exact, floats to 1e-9 relative (1e-12 absolute)."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected an object, got {got!r}"]
        found = []
        if set(got) != set(expected):
            found.append(
                f"{path}: keys differ: missing {sorted(set(expected) - set(got))}, extra {sorted(set(got) - set(expected))}"
            )
        for key in set(got) & set(expected):
            found += differences(got[key], expected[key], f"{path}/{key}", integer_keys)
        return found
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return [f"{path}: expected {expected!r}, got {got!r}"]
        return [d for i, (g, e) in enumerate(zip(got, expected)) for d in differences(g, e, f"{path}[{i}]", integer_keys)]
    if expected is None or isinstance(expected, (str, bool)):
        return [] if got == expected and type(got) is type(expected) else [f"{path}: expected {expected!r}, got {got!r}"]
    if path.rsplit("/", 1)[-1] in integer_keys:
        return [] if isinstance(got, int) and got == expected else [f"{path}: expected count {expected!r}, got {got!r}"]
    return [] if close(got, expected) else [f"{path}: expected {expected!r}, got {got!r}"]


def finite(value) -> bool:
    return not isinstance(value, float) or math.isfinite(value)
