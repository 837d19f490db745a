"""numba's cache in a read-only install: seeded from the install's own cache files, so that a
container does not compile its kernels again in every process."""

import hashlib
import os
import tempfile

from evaluation import numba_cache


def _install(tmp_path, name):
    folder = tmp_path / "install" / name
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "__pycache__" / f"{name}._kernel-1.py311.nbi").write_bytes(b"index")
    (folder / "__pycache__" / f"{name}._kernel-1.py311.1.nbc").write_bytes(b"code")
    (folder / "__pycache__" / f"{name}.cpython-311.pyc").write_bytes(b"bytecode")
    return folder


def test_a_read_only_install_seeds_a_cache_in_the_temporary_folder(tmp_path, monkeypatch):
    folders = [_install(tmp_path, "metrics"), _install(tmp_path, "cellmap")]
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if str(path).startswith(str(tmp_path / "install")) else real_access(path, mode)
    )
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    assert numba_cache.use_install_cache(folders)
    root = tmp_path / "tmp" / "evaluation-numba-cache"
    assert os.environ["NUMBA_CACHE_DIR"] == str(root)
    for folder in folders:  # numba's layout: <folder name>_<sha1 of its path>, cache files only
        seeded = root / f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()}"
        assert sorted(p.name for p in seeded.iterdir()) == [
            f"{folder.name}._kernel-1.py311.1.nbc",
            f"{folder.name}._kernel-1.py311.nbi",
        ]
    assert not numba_cache.use_install_cache(folders)  # set once


def test_a_writable_install_keeps_numbas_own_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert not numba_cache.use_install_cache([_install(tmp_path, "metrics")])
    assert "NUMBA_CACHE_DIR" not in os.environ


def test_a_rescore_unit_seeds_the_cache_on_its_dask_worker(tmp_path, monkeypatch):
    """A Dask worker never runs the command line: scoring a unit seeds the cache itself."""
    from evaluation.organizer import rescore

    seeded = []
    monkeypatch.setattr(numba_cache, "use_install_cache", lambda folders: seeded.append(list(folders)) or False)
    record = rescore.score_unit("no-such-suite", "case", {}, str(tmp_path / "record.json"))
    assert seeded == [numba_cache.compiled_folders()]
    assert record["key"] == "case"
