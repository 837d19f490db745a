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
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numba

from evaluation import log


def _load_array_support() -> None:
    """numba's array functions (``numba.np.arraymath``), loaded now with scipy.linalg kept from
    being imported. numba loads them before its first kernel runs (compiled or from the cache),
    and then imports scipy.linalg (0.2-0.4 s) only to ask whether BLAS is there, which decides
    how np.correlate and np.convolve multiply inside kernels: no kernel of this package uses
    either, and ``np.dot`` still finds BLAS when it is compiled. Nothing is done when either
    is imported already."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:
        return
    blocked = "scipy" if "scipy" not in sys.modules else "scipy.linalg"
    sys.modules[blocked] = None  # type: ignore[assignment]  # an import of it raises ImportError at once
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if blocked in sys.modules and sys.modules[blocked] is None:
            del sys.modules[blocked]


_load_array_support()

__all__ = ["compiled", "disable", "numba", "run", "settle", "warm_up"]

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


# (what, compile_all, equivalents, started, child pid) of ``warm_up(background=True)``
_BACKGROUND: list[tuple[str, Callable[[], object], bool, float, int]] = []


def warm_up(
    what: str, compile_all: Callable[[], object], modules: Iterable[str] = (), equivalents: bool = True, background: bool = False
) -> None:
    """Compile (or load from numba's cache) a group of kernels once, e.g. in a parent process
    before it forks its workers: ``compile_all()`` calls each on tiny inputs. When a module
    of ``modules`` (their ``__file__``) has nothing fresh in numba's cache, says so first: the
    first run after an install compiles, and should not look hung. With ``equivalents`` (the
    kernels are called through ``run``), a failure turns the switch off; without, it is an
    internal error like any other failure of those kernels.

    ``background``: a group that has to be compiled is compiled by a forked child process
    (numba compiles on one core; the machines have two), which writes numba's cache while
    this process goes on, e.g. compiling another group; ``settle`` waits for it and loads the
    group from the cache (or compiles it here if the child could not)."""
    if equivalents and not compiled():
        return
    fresh = [m for m in modules if not _cached(m)]
    logger = log.get(__name__)
    if fresh:
        logger.info("compiling_kernels", kernels=what, note="once per install; later runs load them from numba's cache")
    started = time.perf_counter()
    if fresh and background:
        try:
            pid = os.fork()
        except OSError:
            pid = None
        if pid == 0:  # the child: compile into the cache, then leave at once
            code = 1
            try:
                compile_all()
                code = 0
            finally:
                os._exit(code)
        if pid is not None:
            _BACKGROUND.append((what, compile_all, equivalents, started, pid))
            return
    _compile(compile_all, equivalents)
    if fresh:
        logger.info("kernels_compiled", kernels=what, seconds=round(time.perf_counter() - started, 1))


def settle() -> None:
    """Wait for the groups ``warm_up`` compiles in the background and load them here."""
    while _BACKGROUND:
        what, compile_all, equivalents, started, pid = _BACKGROUND.pop(0)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        _compile(compile_all, equivalents)  # from the cache the child wrote, else compiled now
        log.get(__name__).info("kernels_compiled", kernels=what, seconds=round(time.perf_counter() - started, 1))


def _compile(compile_all: Callable[[], object], equivalents: bool) -> None:
    if not equivalents:
        compile_all()
        return
    try:
        compile_all()
    except Exception as exc:  # numba raises its own errors (typing, lowering) and the toolchain's
        disable(exc)


def _cached(module_file: str) -> bool:
    """Whether numba's cache holds an index of ``module_file``'s kernels written after the file
    was (an older index is stale: numba compiles again), where numba looks for it: in
    ``NUMBA_CACHE_DIR`` as ``numba_cache`` lays it out when that is set, else beside the file."""
    from evaluation import numba_cache

    folder, name = os.path.split(os.path.abspath(module_file))
    stem = os.path.splitext(name)[0] + "."
    if os.environ.get("NUMBA_CACHE_DIR"):
        place = os.path.join(os.environ["NUMBA_CACHE_DIR"], numba_cache.subpath(folder))
    else:
        place = os.path.join(folder, "__pycache__")
    try:
        source = os.stat(module_file).st_mtime
        with os.scandir(place) as entries:
            return any(e.name.startswith(stem) and e.name.endswith(".nbi") and e.stat().st_mtime >= source for e in entries)
    except OSError:
        return False
