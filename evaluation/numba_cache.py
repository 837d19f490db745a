"""numba's cache in a read-only install (the container).

numba caches compiled kernels beside their source (``__pycache__``), but uses that folder
only if it can write to it; otherwise every process compiles every kernel again (seconds each).
The image compiles its kernels when it is built, so ``use_install_cache`` points numba at a
folder in the temporary directory seeded with those files: numba's ``NUMBA_CACHE_DIR`` layout
is ``<folder name>_<sha1 of the folder's path>`` per source folder (numba ``core/caching.py``
``_CacheLocator.get_suitable_cache_subpath``). If that layout ever changes, the kernels are
simply compiled again. Called when a process starts grading (``cli.main``; ``rescore``'s
``score_unit`` on a Dask worker; ``lee_thinning`` before it compiles), never at import.
"""

import functools
import hashlib
import os
import shutil
import sys
import tempfile

PACKAGE = os.path.dirname(os.path.abspath(__file__))


@functools.cache
def compiled_folders() -> list[str]:
    """The package's folders whose ``__pycache__`` holds numba index files (looked up once: the
    install does not change while a process runs)."""
    found = []
    for folder, _, files in os.walk(PACKAGE):
        if os.path.basename(folder) == "__pycache__" and any(name.endswith(".nbi") for name in files):
            found.append(os.path.dirname(folder))
    return sorted(found)


def use_install_cache(folders) -> bool:
    """Move numba's cache to the temporary folder, seeded with the cache files of ``folders``,
    unless it was set already or the first folder's cache is writable. True if it moved it."""
    folders = [os.path.abspath(f) for f in folders]
    if "NUMBA_CACHE_DIR" in os.environ or not folders:
        return False
    cache = os.path.join(folders[0], "__pycache__")
    if os.access(cache if os.path.isdir(cache) else folders[0], os.W_OK):
        return False
    root = os.path.join(tempfile.gettempdir(), "evaluation-numba-cache")
    for here in folders:
        cache, seeded = os.path.join(here, "__pycache__"), os.path.join(root, subpath(here))
        if os.path.isdir(cache) and not os.path.isdir(seeded):
            try:
                shutil.copytree(cache, seeded, ignore=lambda _, names: [n for n in names if not n.endswith((".nbi", ".nbc"))])
            except OSError:
                pass
    os.environ["NUMBA_CACHE_DIR"] = root
    if "numba" in sys.modules:  # numba reads its settings when it is imported
        sys.modules["numba"].core.config.reload_config()
    return True


def subpath(folder: str) -> str:
    return f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"
