"""numba for the compiled kernels, or None where it is not installed (it is a dependency; every
kernel's caller keeps a numpy or scikit-image path). Importing numba sets nothing up: where a
read-only install needs numba's cache moved, ``lee_thinning`` does it before its first compile
and numba's settings are reloaded then.

``run`` calls a kernel, or its numpy equivalent once any kernel has failed to compile or run
(a broken toolchain must not stop grading; the equivalents give the same results, slower)."""

try:
    import numba
except ImportError:  # pragma: no cover - exercised only without numba
    numba = None

broken = False  # set by ``disable``: the numpy equivalents from then on


def compiled() -> bool:
    return numba is not None and not broken


def disable(exc: Exception) -> None:
    """Log why the kernels cannot be used and use the numpy equivalents from now on."""
    global broken
    from evaluation import log

    log.get(__name__).warning("numba_unavailable", error=f"{type(exc).__name__}: {exc}")
    broken = True


def run(kernel, fallback, *args):
    """``kernel(*args)``, or ``fallback(*args)`` without a working numba."""
    if compiled():
        try:
            return kernel(*args)
        except Exception as exc:
            disable(exc)
    return fallback(*args)
