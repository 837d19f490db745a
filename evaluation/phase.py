"""The phase: ``phase.yaml`` (which suite, with which options) plus the ground truth beside it.

Only the suite name is required; every option has the reference's default, so a config of
``suite: cellmap`` reproduces the official evaluator. The config is validated against
``schemas/phase.schema.json`` before anything is scored, so a typo in an option name fails
loudly instead of silently scoring with a default. The defaults are written once, in that
schema: ``Phase.option`` falls back to them.
"""

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evaluation import schemas
from evaluation.errors import PhaseError

PHASE_FILE = "phase.yaml"


@dataclass(frozen=True)
class Phase:
    root: Path
    suite: str
    options: dict = field(default_factory=dict)

    def option(self, name: str):
        """The option as configured, else the schema's default for this suite (None if it has none)."""
        return self.options[name] if name in self.options else defaults(self.suite).get(name)

    def keys(self, name: str) -> dict:
        """The object option ``name`` with every key it leaves out at that key's default in the
        schema (``key_defaults``): options whose keys are set one by one, such as ``archive``."""
        return {**key_defaults(name, self.suite), **(self.option(name) or {})}

    def path(self, relative: str) -> Path:
        """A file of the phase; refuses paths that leave the phase folder."""
        root = self.root.resolve()
        target = (root / relative).resolve()
        if target != root and root not in target.parents:
            raise PhaseError(f"{PHASE_FILE}: path {relative!r} leaves the phase folder")
        return target


@functools.cache
def option_schemas(suite: str) -> dict[str, dict]:
    """Each option's schema for ``suite``: the options every phase has and the suite's own."""
    schema = schemas.load("phase")
    found = {name: spec for name, spec in schema["properties"].items() if name != "suite"}
    for rule in schema.get("allOf", []):
        if rule["if"]["properties"]["suite"].get("const") == suite:
            found.update(rule["then"].get("properties", {}))
    return found


def defaults(suite: str) -> dict:
    return {name: spec["default"] for name, spec in option_schemas(suite).items() if "default" in spec}


def key_defaults(name: str, suite: str | None = None) -> dict:
    """The schema's default of each key of the object option ``name`` (``archive``: its four
    limits). Without ``suite``, only the options every phase has are looked up."""
    spec = option_schemas(suite)[name] if suite is not None else schemas.load("phase")["properties"][name]
    return {key: item["default"] for key, item in spec.get("properties", {}).items() if "default" in item}


def load(root: Path) -> Phase:
    config_path = Path(root) / PHASE_FILE
    if not Path(root).is_dir():
        raise PhaseError(f"the ground-truth folder {root} does not exist (a phase folder holds {PHASE_FILE} and the truth)")
    if not config_path.is_file():
        raise PhaseError(f"no {PHASE_FILE} in the ground-truth folder {root}")
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise PhaseError(f"{PHASE_FILE} is not valid YAML: {exc}") from None
    problems = schemas.errors("phase", config)
    if problems:
        raise PhaseError(f"{PHASE_FILE} is invalid: " + "; ".join(problems))
    options = {k: v for k, v in config.items() if k != "suite"}
    return Phase(root=Path(root), suite=config["suite"], options=options)


def with_options(phase: Phase, changes: dict) -> Phase:
    """The phase with some options replaced (the organizer's sensitivity runs re-score one
    phase under other definitions), validated like ``phase.yaml``."""
    config = {"suite": phase.suite, **phase.options, **changes}
    problems = schemas.errors("phase", config)
    if problems:
        raise PhaseError(f"{PHASE_FILE} with {changes} is invalid: " + "; ".join(problems))
    return Phase(root=phase.root, suite=phase.suite, options={k: v for k, v in config.items() if k != "suite"})
