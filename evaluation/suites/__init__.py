"""Metric suites, one module each, registered by name.

A suite turns (submission folder, phase) into independent tasks, scores one task in a worker
process, and summarises the outcomes into the metrics document. Importing this package
imports every suite module, so adding a suite is adding a module.
"""

import importlib
import pkgutil

from evaluation.suites.base import Outcome, Plan, Report, Suite, Task, get, names, register

__all__ = ["Outcome", "Plan", "Report", "Suite", "Task", "get", "names", "register"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")
