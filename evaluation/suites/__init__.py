"""Metric suites, one package each, registered by name.

A suite turns (submission folder, phase, resources) into independent tasks, scores one task in
a worker process, and summarises the outcomes into the metrics document (the types are in
``evaluation.contract``). Suites are imported only when a phase names them (a run pays only for
its own suite's libraries); the names are the ``suite`` enum of ``schemas/phase.schema.json``,
each the name of its package here. See docs/architecture.md for what a new suite adds.
"""

import importlib

from evaluation.contract import Suite
from evaluation.errors import PhaseError

_REGISTRY: dict[str, Suite] = {}


def register(cls: type[Suite]) -> type[Suite]:
    _REGISTRY[cls.name] = cls()
    return cls


def names() -> list[str]:
    """The suites a phase may name."""
    from evaluation import schemas

    return sorted(schemas.load("phase")["properties"]["suite"]["enum"])


def get(name: str) -> Suite:
    """The suite ``name``, importing its package ``evaluation.suites.<name>`` on first use."""
    if name not in _REGISTRY and name in names():
        importlib.import_module(f"evaluation.suites.{name}")
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PhaseError(f"unknown suite {name!r}; available: {', '.join(names())}") from None
