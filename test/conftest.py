"""pytest fixtures and hooks; the shared test code is in ``test/helpers``."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers.grading import FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _fingerprint_cache_of_the_session(tmp_path_factory):
    """Grader runs (in process and on the command line) cache phase hashes in a folder of the
    session rather than in the user's ~/.cache."""
    import os

    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture
def cellmap_phase(tmp_path):
    """A copy of one CellMap conformance case as phase folder + submission folder."""

    def make(case: str, phase_yaml: str = "suite: cellmap\n") -> tuple[Path, Path]:
        source = FIXTURES / "cellmap" / "cases" / case
        phase, submission = tmp_path / "phase", tmp_path / "input"
        shutil.copytree(source / "truth.zarr", phase / "truth.zarr")
        shutil.copy(source / "manifest.csv", phase / "manifest.csv")
        (phase / "phase.yaml").write_text(phase_yaml)
        submission.mkdir()
        shutil.copytree(source / "submission.zarr", submission / "submission.zarr")
        return phase, submission

    return make


_MEASURED_ON_WORKERS: list[dict] = []  # the hostile corpus's figures, sent by pytest-xdist's workers


def _corpus_measured() -> list[dict]:
    corpus = sys.modules.get("test_hostile_corpus")
    return list(getattr(corpus, "MEASURED", []))


def pytest_sessionfinish(session):
    """On a pytest-xdist worker: hand the corpus's figures to the controller."""
    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["hostile_measured"] = json.dumps(_corpus_measured())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """On pytest-xdist's controller: collect a finished worker's corpus figures."""
    _MEASURED_ON_WORKERS.extend(json.loads(getattr(node, "workeroutput", {}).get("hostile_measured", "[]")))


def pytest_terminal_summary(terminalreporter):
    """The hostile corpus's figures: how many kinds ran, the slowest and the largest peak."""
    measured = _corpus_measured() + _MEASURED_ON_WORKERS
    if not measured:
        return
    from test_hostile_corpus import CAP_MB, TIME_LIMIT_S

    slowest = max(measured, key=lambda m: m["seconds"])
    largest = max(measured, key=lambda m: m["peak_mb"])
    terminalreporter.write_line(
        f"hostile corpus: {len(measured)} kinds under {CAP_MB} MB and {TIME_LIMIT_S} s each; "
        f"slowest {slowest['kind']!r} {slowest['seconds']:.1f} s; largest peak {largest['kind']!r} {largest['peak_mb']} MB"
    )
