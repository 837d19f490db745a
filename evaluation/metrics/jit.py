"""numba for every compiled kernel of the package: one policy, one switch.

numba is a dependency, imported here for every kernel module (``from evaluation.metrics.jit
import numba``); there is no "not installed" branch. The policy:

- A kernel that has a numpy (or library) equivalent is called through ``run(kernel, fallback,
  *args)``: while the switch is on it runs compiled; if any kernel fails to compile or run,
  ``disable`` logs why and turns the switch off for the whole process, and every such call
  takes its equivalent from then on (same results, slower). A broken toolchain must not stop
  grading where a slower path exists.
- A kernel without an equivalent is called directly: its failure is an internal error, with
  its traceback in the log.
- ``compiled()`` is the switch; ``EVALUATION_JIT=0`` turns it off from the start (the
  equivalents' own tests, or a machine where numba misbehaves).

Kernels are compiled with ``cache=True``: the first grading after an install compiles them
(a minute or more for a suite's kernels on a loaded machine), later runs load them from
numba's cache in milliseconds (``numba_cache`` finds the cache in a read-only install). Each
suite compiles what it needs once in the parent before forking its workers, through
``warm_up``, which says on stderr that it is compiling (once per install) and how long it
took, so that a first run never sits silent.
"""

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numba

from evaluation import log

__all__ = ["compiled", "disable", "numba", "run", "warm_up"]

broken = os.environ.get("EVALUATION_JIT", "1") == "0"  # the one switch: set by ``disable``


def compiled() -> bool:
    return not broken


def disable(exc: Exception) -> None:
    """Log why the kernels cannot be used and use the numpy equivalents from now on."""
    global broken
    log.get(__name__).warning("numba_unavailable", error=f"{type(exc).__name__}: {exc}")
    broken = True


Value = TypeVar("Value")


def run(kernel: Callable[..., Value], fallback: Callable[..., Value], *args: Any) -> Value:
    """``kernel(*args)``, or ``fallback(*args)`` once the switch is off."""
    if compiled():
        try:
            return kernel(*args)
        except Exception as exc:  # numba raises its own errors (typing, lowering) and the toolchain's
            disable(exc)
    return fallback(*args)


def warm_up(what: str, compile_all, modules=(), equivalents: bool = True) -> None:
    """Compile (or load from numba's cache) a group of kernels once, e.g. in a parent process
    before it forks its workers: ``compile_all()`` calls each on tiny inputs. When a module
    of ``modules`` (their ``__file__``) has nothing in numba's cache yet, says so first: the
    first run after an install compiles, and should not look hung. With ``equivalents`` (the
    kernels are called through ``run``), a failure turns the switch off; without, it is an
    internal error like any other failure of those kernels."""
    if equivalents and not compiled():
        return
    fresh = [m for m in modules if not _cached(m)]
    logger = log.get(__name__)
    if fresh:
        logger.info("compiling_kernels", kernels=what, note="once per install; later runs load them from numba's cache")
    started = time.perf_counter()
    if not equivalents:
        compile_all()
    else:
        try:
            compile_all()
        except Exception as exc:  # numba raises its own errors (typing, lowering) and the toolchain's
            disable(exc)
            return
    if fresh:
        logger.info("kernels_compiled", kernels=what, seconds=round(time.perf_counter() - started, 1))


def _cached(module_file: str) -> bool:
    """Whether numba's cache holds an index file of ``module_file``'s kernels (beside it, or in
    ``NUMBA_CACHE_DIR`` as ``numba_cache`` lays it out)."""
    from evaluation import numba_cache

    folder, name = os.path.split(os.path.abspath(module_file))
    stem = os.path.splitext(name)[0] + "."
    places = [os.path.join(folder, "__pycache__")]
    if os.environ.get("NUMBA_CACHE_DIR"):
        places.append(os.path.join(os.environ["NUMBA_CACHE_DIR"], numba_cache.subpath(folder)))
    for place in places:
        try:
            if any(entry.startswith(stem) and entry.endswith(".nbi") for entry in os.listdir(place)):
                return True
        except OSError:
            continue
    return False
