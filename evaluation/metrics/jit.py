"""numba for the compiled kernels, or None where it is not installed (it is a dependency; every
kernel's caller keeps a numpy or scikit-image path). Importing numba sets nothing up: where a
read-only install needs numba's cache moved, ``lee_thinning`` does it before its first compile
and numba's settings are reloaded then."""

try:
    import numba
except ImportError:  # pragma: no cover - exercised only without numba
    numba = None
