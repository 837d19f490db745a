"""Metric suites, one module each, registered by name.

A suite turns (submission folder, phase) into independent tasks, scores one task in a worker
process, and summarises the outcomes into the metrics document. Suites are imported only when
a phase names them (a run pays only for its own suite's libraries); the names are the
``suite`` enum of ``schemas/phase.schema.json``, each the name of its module here. Adding a
suite is adding a module and its name (with its options block) to that schema.
"""

from evaluation.suites.base import Outcome, Plan, Report, Suite, Task, get, names, register

__all__ = ["Outcome", "Plan", "Report", "Suite", "Task", "get", "names", "register"]
