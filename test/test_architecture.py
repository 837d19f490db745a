"""The package's shape: layers import only downward, nothing imports in a cycle, importing
has no side effect, and the option defaults are written once (in the phase schema).

The layers, lowest first (docs/architecture.md explains them):
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "evaluation"

# Lowest first; a module may import modules of its own layer or of a lower one. Matched by
# the longest prefix of the dotted name.
LAYERS = [
    (
        "evaluation.errors",
        "evaluation.log",
        "evaluation.machine",
        "evaluation.names",
        "evaluation.numba_cache",
        "evaluation.progress",
        "evaluation.schemas",
    ),
    ("evaluation.phase", "evaluation.contract", "evaluation.provenance"),
    ("evaluation.readers", "evaluation.metrics", "evaluation.archive"),
    (
        "evaluation.submission",
        "evaluation.batches",
        "evaluation.report",
        "evaluation.figures",
        "evaluation.charts",
        "evaluation.public",
        "evaluation.sealed",
    ),
    ("evaluation.runner", "evaluation.platforms"),
    ("evaluation.suites",),
    ("evaluation.grading",),
    ("evaluation.organizer", "evaluation.preflight", "evaluation.cli", "evaluation.__main__"),
]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules ``name`` imports, at any depth of its code (lazy imports count)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:`` (annotations only, never imported)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def layer(name: str) -> int:
    if name == "evaluation":
        return 0
    best = max(
        (
            (len(prefix), index)
            for index, group in enumerate(LAYERS)
            for prefix in group
            if name == prefix or name.startswith(prefix + ".")
        ),
        default=None,
    )
    assert best is not None, f"{name} is in no layer of test_architecture.LAYERS"
    return best[1]


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def suite_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "suites" else None


def test_every_import_points_down_or_sideways():
    upward = [f"{a} -> {b}" for a, targets in graph().items() for b in targets if layer(b) > layer(a)]
    assert not upward, "imports that point up a layer:\n" + "\n".join(sorted(upward))


def test_no_suite_imports_another():
    crossing = [
        f"{a} -> {b}"
        for a, targets in graph().items()
        for b in targets
        if suite_of(a) and suite_of(b) and suite_of(a) != suite_of(b)
    ]
    assert not crossing, "shared code belongs in a shared layer:\n" + "\n".join(sorted(crossing))


def test_no_import_cycles():
    edges = graph()
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(stack[stack.index(target) :] + [target]))
            elif target not in state:
                visit(target, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_importing_any_module_has_no_side_effect(tmp_path):
    """Every module imported one after another in a fresh interpreter: the environment, the
    working directory and the temporary folder are as they were."""
    probe = r"""
import importlib, json, os, sys, tempfile
names = json.loads(sys.argv[1])
changed = []
for name in names:
    env, cwd, tmp = dict(os.environ), os.getcwd(), sorted(os.listdir(tempfile.gettempdir()))
    importlib.import_module(name)
    if dict(os.environ) != env or os.getcwd() != cwd or sorted(os.listdir(tempfile.gettempdir())) != tmp:
        changed.append(name)
print(json.dumps(changed))
"""
    names = [name for name in modules() if name != "evaluation.__main__"]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(names)],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
        cwd=tmp_path,
        check=True,
    )
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    "suite", sorted(json.loads((PACKAGE.parent / "schemas" / "phase.schema.json").read_text())["properties"]["suite"]["enum"])
)
def test_option_defaults_come_from_the_schema_alone(suite, tmp_path):
    """A phase naming only the suite: every option the suite reads equals the schema's default."""
    from evaluation import phase as phases
    from evaluation import suites

    minimal = phases.Phase(root=tmp_path, suite=suite)
    defaults = phases.defaults(suite)
    options_type = getattr(sys.modules[type(suites.get(suite)).__module__], "Options", None)
    if options_type is None or not hasattr(options_type, "from_phase"):
        pytest.skip(f"{suite} has no Options.from_phase")
    try:
        options = options_type.from_phase(minimal)
    except Exception:  # a suite with required options (e.g. classes) cannot be built from nothing
        pytest.skip(f"{suite} has required options")
    for name, value in vars(options).items():
        if name in defaults and isinstance(value, (str, int, float, bool, type(None))):
            assert value == defaults[name], f"{suite}.{name}: {value!r} != schema default {defaults[name]!r}"
