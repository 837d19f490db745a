"""Provenance: the phase fingerprint and its cache, the build, and the lock's checks."""

import hashlib
import json
import os
import shutil
import sys

from helpers.grading import ROOT

from evaluation import provenance

sys.path.insert(0, str(ROOT / "container"))
import lock  # noqa: E402 - container/lock.py, standard library only


def _phase(tmp_path):
    phase = tmp_path / "phase"
    (phase / "labels").mkdir(parents=True)
    (phase / "phase.yaml").write_text("suite: segmentation\n")
    (phase / "labels" / "a.bin").write_bytes(b"a" * 1000)
    (phase / "labels" / "b.bin").write_bytes(b"b" * 10)
    return phase


def test_fingerprint_hashes_every_file_with_its_path_and_size(tmp_path):
    phase = _phase(tmp_path)
    found = provenance.phase_fingerprint(phase, into_phase=True)
    rows = [
        ["labels/a.bin", 1000, hashlib.sha256(b"a" * 1000).hexdigest()],
        ["labels/b.bin", 10, hashlib.sha256(b"b" * 10).hexdigest()],
        ["phase.yaml", 20, hashlib.sha256(b"suite: segmentation\n").hexdigest()],
    ]
    assert found["sha256"] == provenance.digest(rows)
    assert (found["files"], found["bytes"]) == (3, 1030)
    assert set(found["groups"]) == {"labels/a.bin", "labels/b.bin", "phase.yaml"}
    assert (phase / provenance.CACHE_NAME).is_file()  # not part of the phase: same fingerprint next time
    assert provenance.phase_fingerprint(phase) == found


def test_a_grader_run_leaves_the_phase_untouched(tmp_path, monkeypatch):
    """Hashes a run computes go to the user cache, and the next run reads them from there."""
    phase = _phase(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    before = sorted(p.name for p in phase.rglob("*"))
    first = provenance.phase_fingerprint(phase)
    assert sorted(p.name for p in phase.rglob("*")) == before
    hashed, real = [], provenance.content_hash
    monkeypatch.setattr(provenance, "content_hash", lambda path: hashed.append(path.name) or real(path))
    assert provenance.phase_fingerprint(phase) == first and hashed == ["phase.yaml"]  # the data from the cache


def test_the_cache_is_trusted_while_size_and_mtime_hold_and_refreshed_when_they_change(tmp_path, monkeypatch):
    phase = _phase(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = provenance.phase_fingerprint(phase, into_phase=True)
    hashed, real = [], provenance.content_hash
    monkeypatch.setattr(provenance, "content_hash", lambda path: hashed.append(path.name) or real(path))
    assert provenance.phase_fingerprint(phase) == first and hashed == ["phase.yaml"]  # no data read
    target = phase / "labels" / "b.bin"
    target.write_bytes(b"c" * 10)
    os.utime(target, (1_000_000_000, 1_000_000_000))
    hashed.clear()
    changed = provenance.phase_fingerprint(phase)
    assert sorted(hashed) == ["b.bin", "phase.yaml"] and changed["sha256"] != first["sha256"]
    assert changed["groups"]["labels/b.bin"] != first["groups"]["labels/b.bin"]
    assert changed["groups"]["labels/a.bin"] == first["groups"]["labels/a.bin"]


def test_a_same_size_edit_of_a_definition_file_with_its_time_restored_is_seen(tmp_path, monkeypatch):
    """phase.yaml, a manifest, zarr metadata: hashed every time, whatever the cache says."""
    phase = _phase(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (phase / "manifest.csv").write_text("crop,label\n101,mito\n")
    first = provenance.phase_fingerprint(phase, into_phase=True)
    stat = (phase / "manifest.csv").stat()
    (phase / "manifest.csv").write_text("crop,label\n102,mito\n")
    os.utime(phase / "manifest.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert provenance.phase_fingerprint(phase)["sha256"] != first["sha256"]


def test_the_cache_falls_back_to_the_user_cache_when_the_phase_refuses_it(tmp_path, monkeypatch):
    phase = _phase(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (phase / provenance.CACHE_NAME).mkdir()  # a folder where the cache file would go: cannot be written
    found = provenance.phase_fingerprint(phase, into_phase=True)
    cached = list((tmp_path / "cache" / "evaluation" / "fingerprints").glob("*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["format"] == provenance.CACHE_FORMAT
    assert found == provenance.phase_fingerprint(phase)


def test_the_cache_does_not_change_rescores_phase_key(tmp_path):
    """rescore keys its units by the phase's content fingerprint: writing the fingerprint cache
    into the phase must not make a resumed run recompute everything."""
    from evaluation.organizer import rescore

    phase = _phase(tmp_path)
    before = rescore.phase_fingerprint(provenance.phase_fingerprint(phase))
    provenance.phase_fingerprint(phase, into_phase=True)
    assert (phase / provenance.CACHE_NAME).is_file()
    assert rescore.phase_fingerprint(provenance.phase_fingerprint(phase)) == before


def test_a_checkout_names_its_commit_and_lock():
    build = provenance.build()
    assert build["lock_sha256"] == hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
    assert set(build["dependencies"]) == set(lock.pins(ROOT / "requirements.lock"))
    if (ROOT / ".git").exists():
        assert build["commit"] and len(build["commit"].split("+")[0]) == 40


def test_the_build_stamp_is_what_an_image_reports(tmp_path, monkeypatch):
    stamp = tmp_path / "build.json"
    monkeypatch.setattr(provenance, "BUILD_FILE", stamp)
    provenance.stamp("0123abc", ROOT / "requirements.lock")
    provenance.build.cache_clear()
    try:
        build = provenance.build()
    finally:
        provenance.build.cache_clear()
    assert (
        build["commit"] == "0123abc"
        and build["lock_sha256"] == hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()
    )


def test_the_lock_matches_pyproject_and_refuses_a_changed_dependency(tmp_path):
    assert lock.check() is None
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()
    pyproject.write_text(text.replace('"scipy>=1.11,<1.18"', '"scipy>=1.11,<1.19"'))
    assert "changed since" in lock.check(ROOT / "requirements.lock", pyproject)
    unstamped = tmp_path / "requirements.lock"
    shutil.copy(ROOT / "requirements.lock", unstamped)
    unstamped.write_text("\n".join(unstamped.read_text().splitlines()[1:]) + "\n")
    assert "no '# made from" in lock.check(unstamped)
