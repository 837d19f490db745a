"""``compare``: what a re-score changed and why, from two results' provenance."""

import copy
import csv
import io
import json
import shutil
import subprocess
import sys
import zipfile

import pytest
from helpers.grading import ROOT

from evaluation.organizer import compare


def _metrics(value: float, case_value: float, **provenance) -> dict:
    base = {
        "grader": {"version": "0.1.0", "commit": "abc", "lock_sha256": "l1", "locked": True, "dependencies": {"scipy": "1.17.1"}},
        "phase": {
            "fingerprint": {"sha256": "p1", "files": 3, "bytes": 10, "groups": {"phase.yaml": "y1", "labels/a.mha": "a1"}},
            "options": {"x": 1},
        },
        "suite": {"name": "s", "ranking": "score", "higher_is_better": True, "reference": {"commit": "r1"}},
        "definitions": {"score": {"source": "suite"}},
    }
    for path, value_ in provenance.items():
        node = base
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value_
    return {
        "case": {"a": {"dice": case_value, "n": 3}, "b": {"dice": 0.5, "n": 2}},
        "aggregates": {"score": value},
        "leaderboard": {"score": value},
        "failures": [],
        "provenance": base,
    }


def test_identical_results_have_no_change_and_no_cause():
    log = compare.changelog(compare.Side({"t": _metrics(0.7, 0.9)}), compare.Side({"t": _metrics(0.7, 0.9)}))
    assert log["summary"] == {"submissions": 1, "values_moved": 0, "submissions_moved": 0, "ranks_moved": 0, "causes": []}


def test_each_cause_is_named():
    old = _metrics(0.7, 0.9)
    cases = {
        "options": _metrics(0.6, 0.8, phase__options={"x": 2}),
        "truth files": _metrics(
            0.6,
            0.8,
            phase__fingerprint={"sha256": "p2", "files": 3, "bytes": 10, "groups": {"phase.yaml": "y1", "labels/a.mha": "a2"}},
        ),
        "dependency set": _metrics(0.6, 0.8, grader__dependencies={"scipy": "1.18.0"}, grader__lock_sha256="l2"),
        "grader version": _metrics(0.6, 0.8, grader__version="0.2.0"),
        "reference": _metrics(0.6, 0.8, suite__reference={"commit": "r2"}),
    }
    details = {
        "options": "x: 1 -> 2",
        "truth files": "labels/a.mha (changed)",
        "dependency set": "scipy 1.17.1 -> 1.18.0",
        "grader version": "0.1.0 -> 0.2.0",
        "reference": "commit: r1 -> r2",
    }
    for cause, new in cases.items():
        row = compare.changelog(compare.Side({"t": old}), compare.Side({"t": new}))["submissions"][0]
        assert row["causes"] == [{"cause": cause, "detail": details[cause]}], cause
        assert row["old"]["value"] == 0.7 and row["new"]["value"] == 0.6
        assert row["moved"][0] == {
            "case": "(aggregates)",
            "values": [{"path": "score", "old": 0.7, "new": 0.6, "delta": pytest.approx(-0.1)}],
        }
        assert row["moved"][1]["case"] == "a" and row["moved"][1]["values"][0]["path"] == "dice"


def test_sealed_phase_files_are_named_as_sealed_and_missing_provenance_as_unknown():
    sealed = _metrics(0.7, 0.9, phase__fingerprint={"sha256": "p1", "files": 3, "bytes": 10})
    changed = _metrics(0.6, 0.9, phase__fingerprint={"sha256": "p2", "files": 3, "bytes": 10})
    assert compare.causes(sealed["provenance"], changed["provenance"])[0]["cause"] == "phase files"
    assert compare.causes(None, changed["provenance"])[0]["cause"] == "unknown"


def test_tolerance_and_ranks():
    old = compare.Side({"a": _metrics(0.7, 0.9), "b": _metrics(0.65, 0.9)})
    new = compare.Side({"a": _metrics(0.6, 0.9 + 1e-13), "b": _metrics(0.65, 0.9)})
    log = compare.changelog(old, new, tolerance=1e-12)
    rows = {row["submission"]: row for row in log["submissions"]}
    assert (rows["a"]["old"]["rank"], rows["a"]["new"]["rank"]) == (1, 2)
    assert (rows["b"]["old"]["rank"], rows["b"]["new"]["rank"]) == (2, 1)
    assert [m["case"] for m in rows["a"]["moved"]] == ["(aggregates)"]  # case a's 1e-13 is within tolerance
    assert rows["b"]["moved"] == [] and rows["b"]["causes"] == []
    assert log["summary"]["ranks_moved"] == 2
    table = list(csv.DictReader(io.StringIO(compare.csv_text(log))))
    assert [(r["submission"], r["path"], r["old"], r["new"]) for r in table] == [("a", "score", "0.7", "0.6"), ("b", "", "", "")]
    assert "What the re-score changed" in compare.html_page(log)


def _submissions(folder):
    """The bundled CellMap example, and the same upload without crop114's mito_mem."""
    folder.mkdir()
    example = ROOT / "examples" / "cellmap" / "submission" / "submission.zip"
    shutil.copy(example, folder / "team-a.zip")
    with zipfile.ZipFile(example) as source, zipfile.ZipFile(folder / "team-b.zip", "w") as target:
        for item in source.infolist():
            if not item.filename.startswith("crop114/mito_mem"):
                target.writestr(item, source.read(item))
    return folder


def _rescore(phase, submissions, output, *extra):
    command = [sys.executable, "-m", "evaluation", "rescore", "--ground-truth", str(phase), "--submissions", str(submissions)]
    done = subprocess.run([*command, "--output", str(output), "--workers", "1", *extra], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _compare(old, new, output):
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "compare", str(old), str(new), "--output", str(output)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((output / "changelog.json").read_text())


def _rank(results, output, *extra):
    command = [sys.executable, "-m", "evaluation", "rank", str(results), *extra, "--output", str(output), "--resamples", "50"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((output / "ranking.json").read_text())


@pytest.mark.slow
def test_rescores_of_the_bundled_example_name_each_cause(tmp_path):
    """Three re-scores of the bundled example: as shipped, with an option changed
    (``version: head``), and with one truth array's chunk changed. ``compare`` names the
    option and the truth folder; ``rescore --compare`` writes the same changelog."""
    submissions = _submissions(tmp_path / "submissions")
    phase = tmp_path / "phase"
    shutil.copytree(ROOT / "ground-truth", phase, ignore=shutil.ignore_patterns(".evaluation-fingerprint.json"))
    _rescore(phase, submissions, tmp_path / "first")

    option = tmp_path / "option-phase"
    shutil.copytree(phase, option)
    (option / "phase.yaml").write_text((phase / "phase.yaml").read_text() + "version: head\n")
    _rescore(option, submissions, tmp_path / "option")
    log = _compare(tmp_path / "first", tmp_path / "option", tmp_path / "changelog-option")
    causes = log["submissions"][0]["causes"]
    assert {"cause": "phase.yaml", "detail": "phase.yaml changed"} in causes
    assert {"cause": "options", "detail": "version: 'v2' -> 'head'"} in causes
    assert all(row["moved"] for row in log["submissions"])

    truth = tmp_path / "truth-phase"
    shutil.copytree(phase, truth)
    import zarr

    mito = zarr.open_array(truth / "truth.zarr" / "crop102" / "mito", mode="r+")
    import numpy as np

    z, y, x = np.argwhere(mito[:] > 0)[0]
    mito[z : z + 3, y : y + 3, x : x + 3] = 0  # a corner of one object
    summary = _rescore(truth, submissions, tmp_path / "truth", "--compare", str(tmp_path / "first"))
    assert summary["changelog"]["causes"] == ["truth files: truth.zarr/crop102/mito (changed)"]
    log = json.loads((tmp_path / "truth" / "changelog.json").read_text())
    moved_cases = {case["case"] for row in log["submissions"] for case in row["moved"]}
    assert "crop102" in moved_cases and "crop114" not in moved_cases
    for suffix in ("csv", "html"):
        assert (tmp_path / "truth" / f"changelog.{suffix}").stat().st_size > 0

    # rank carries the provenance of what it ranks
    ranking = _rank(tmp_path / "first", tmp_path / "ranking")
    first = json.loads((tmp_path / "first" / "leaderboard.json").read_text())["provenance"]
    assert ranking["provenance"]["phase"]["fingerprint"]["sha256"] == first["phase"]["fingerprint"]["sha256"]


@pytest.mark.slow
def test_rescore_makes_the_private_leaderboard(tmp_path):
    submissions = _submissions(tmp_path / "submissions")
    phase = tmp_path / "phase"
    shutil.copytree(ROOT / "ground-truth", phase, ignore=shutil.ignore_patterns(".evaluation-fingerprint.json"))
    (phase / "phase.yaml").write_text((phase / "phase.yaml").read_text() + "private_cases: {cases: [crop114]}\n")
    _rescore(phase, submissions, tmp_path / "out")
    public = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    private = json.loads((tmp_path / "out" / "private-leaderboard.json").read_text())
    assert public["cases"] == "public" and private["cases"] == "private"
    rows = {row["submission"]: row for row in private["rows"]}
    for name in ("team-a", "team-b"):
        sealed = json.loads((tmp_path / "out" / name / "private-results.json").read_text())
        assert rows[name]["overall_score"] == sealed["leaderboard"]["overall_score"]
    # team-b lacks crop114's mito_mem: equal on the public crop, behind on the private one
    assert [r["submission"] for r in private["rows"]] == ["team-a", "team-b"]
    board = {row["submission"]: row["overall_score"] for row in public["rows"]}
    assert board["team-a"] == board["team-b"]
    ranking = _rank(tmp_path / "out", tmp_path / "ranking", "--private")
    assert ranking["subset"] == "private" and ranking["provenance"]["phase"]["options"]["private_cases"] == {"cases": ["crop114"]}


def test_a_moved_case_lists_every_moved_value():
    a = _metrics(0.7, 0.9)
    b = copy.deepcopy(a)
    b["case"]["a"]["n"] = 4
    b["case"]["c"] = {"dice": 0.1}
    moved = compare.moved_values(a, b, 0.0)
    assert moved == [
        {"case": "a", "values": [{"path": "n", "old": 3, "new": 4, "delta": 1}]},
        {"case": "c", "values": [{"path": "dice", "old": None, "new": 0.1, "delta": None}]},
    ]
