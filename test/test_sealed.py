"""Sealed private scores (phase option ``private_cases``): the public leaderboard covers the
public cases only, the private result goes into one file the platform keeps from
participants, and no private value reaches anything a participant sees on either platform."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.grading import ROOT, run_cli, validate_metrics
from test_segmentation_suite import case_folders  # noqa: F401 - the fixture

from evaluation.errors import PhaseError
from evaluation.sealed import PRIVATE_RESULTS_FILE, private_cases

GRAND_CHALLENGE = ROOT / "container" / "scenarios" / "grand-challenge-jobs"


def test_listed_private_cases_must_exist_and_leave_some_public():
    assert private_cases({"cases": ["b"]}, ["a", "b", "c"]) == ["b"]
    assert private_cases(None, ["a", "b"]) == []
    with pytest.raises(PhaseError, match="does not hold: x"):
        private_cases({"cases": ["x"]}, ["a", "b"])
    with pytest.raises(PhaseError, match="every case"):
        private_cases({"cases": ["a", "b"]}, ["a", "b"])


def test_a_seeded_fraction_is_the_same_draw_whatever_the_order_of_the_cases():
    cases = [f"case{i:02d}" for i in range(40)]
    drawn = private_cases({"fraction": 0.25, "seed": 7}, cases)
    assert len(drawn) == 10 and drawn == sorted(drawn)
    assert private_cases({"fraction": 0.25, "seed": 7}, list(reversed(cases))) == drawn
    assert private_cases({"fraction": 0.25, "seed": 8}, cases) != drawn


def _private_numbers(private: dict) -> set[float]:
    """The private result's distinctive values (not 0, 1 or whole numbers, which any file has)."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, float) and not node.is_integer():
            found.add(node)

    walk({k: private[k] for k in ("case", "aggregates", "leaderboard", "case_scores")})
    return found


def _forms(value: float) -> list[str]:
    """How a number can be written: repr (JSON, CSV), 6 and 4 significant digits (HTML pages, logs)."""
    return [repr(value), f"{value:.6g}", f"{value:.4g}", f"{value:.6f}"]


def _leaks(texts: dict[str, str], numbers: set[float], names: list[str]) -> list[str]:
    found = []
    for where, text in texts.items():
        tokens = set(re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text))
        found += [f"{where}: {form}" for value in numbers for form in _forms(value) if form in tokens]
        if where not in ("stdout", "stderr"):  # the log names every task (never a value)
            found += [f"{where}: names private case {name}" for name in names if name in text]
    return found


def _visible(output: Path, run, skip=(PRIVATE_RESULTS_FILE,)) -> dict[str, str]:
    """Everything a participant may see: every file of the output folder (CodaBench zips it
    whole; Grand-Challenge shows metrics.json), the logs and the last line."""
    texts = {p.name: p.read_text(errors="replace") for p in output.rglob("*") if p.is_file() and p.name not in skip}
    return {**texts, "stdout": run.stdout, "stderr": run.stderr}


def _phase_with_private(source: Path, target: Path, option: str) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".evaluation-fingerprint.json"))
    with open(target / "phase.yaml", "a") as f:
        f.write(f"\nprivate_cases: {option}\n")
    return target


def test_local_run_seals_the_private_crop(tmp_path):
    """The bundled CellMap example with crop114 private: the leaderboard is crop102's alone
    (what a phase holding only crop102 gives), crop114's values are only in private-results.json."""
    phase = _phase_with_private(ROOT / "ground-truth", tmp_path / "phase", "{cases: [crop114]}")
    run = run_cli(ROOT / "examples" / "cellmap" / "submission", phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = run.metrics
    validate_metrics(metrics)
    private = json.loads((tmp_path / "out" / PRIVATE_RESULTS_FILE).read_text())
    assert private["private_cases"] == ["crop114"] and set(private["case"]) == {"crop114"}
    assert set(metrics["case"]) == {"crop102"}

    only_public = tmp_path / "public-only"
    shutil.copytree(ROOT / "ground-truth", only_public, ignore=shutil.ignore_patterns("crop114", ".evaluation-fingerprint.json"))
    alone = run_cli(ROOT / "examples" / "cellmap" / "submission", only_public, tmp_path / "alone")
    assert metrics["leaderboard"] == alone.metrics["leaderboard"]
    assert metrics["aggregates"]["overall_score"] == alone.metrics["aggregates"]["overall_score"]

    provenance = metrics["provenance"]
    assert "groups" not in provenance["phase"]["fingerprint"]  # they name the truth's folders
    assert set(provenance["phase"]["options"]["private_cases"]) == {"sha256"}
    assert _leaks(_visible(tmp_path / "out", run), _private_numbers(private), ["crop114"]) == []


def test_grand_challenge_writes_no_private_file_and_leaks_nothing(tmp_path):
    """Grand-Challenge's algorithm-phase layout: metrics.json (shown to participants) holds
    case_a only, and no private file is written (every output beyond metrics.json is shown to
    the participant); case_b's values, from the same upload scored locally, appear nowhere."""
    phase = _phase_with_private(GRAND_CHALLENGE / "ground-truth", tmp_path / "phase", "{cases: [case_b]}")
    shutil.copytree(GRAND_CHALLENGE / "input", tmp_path / "input")
    run = run_cli(tmp_path / "input", phase, tmp_path / "out", "--platform", "grand-challenge")
    assert run.code == 0, run.stderr
    assert not (tmp_path / "out" / PRIVATE_RESULTS_FILE).exists() and set(run.metrics["case"]) == {"case_a"}
    everything = run_cli(tmp_path / "input", GRAND_CHALLENGE / "ground-truth", tmp_path / "all", "--platform", "grand-challenge")
    private = {"case": {"case_b": everything.metrics["case"]["case_b"]}, "aggregates": {}, "leaderboard": {}, "case_scores": {}}
    numbers = _private_numbers(private) - _private_numbers(
        {"case": run.metrics["case"], "aggregates": {}, "leaderboard": {}, "case_scores": {}}
    )
    assert numbers, "the fixture must give the private case values of its own"
    assert _leaks(_visible(tmp_path / "out", run), numbers, ["case_b"]) == []


def test_codabench_writes_no_private_file_and_leaks_nothing(cellmap_phase, tmp_path):
    """CodaBench zips the whole output folder for the submission's owner: no private file
    there, and scores.json, detailed_results.html, metrics.json hold no private value."""
    phase, submission = cellmap_phase("b_split_merge_jitter", "suite: cellmap\nprivate_cases: {cases: [crop114]}\n")
    app = tmp_path / "app"
    shutil.copytree(phase, app / "input" / "ref")
    shutil.copytree(submission, app / "input" / "res")
    command = [
        sys.executable,
        "-m",
        "evaluation",
        "--platform",
        "codabench",
        "--input",
        str(app / "input"),
        "--output",
        str(app / "output"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert not (app / "output" / PRIVATE_RESULTS_FILE).exists()
    assert sorted(p.name for p in (app / "output").iterdir()) == [
        "detailed_results.html",
        "metrics.json",
        "results.json",
        "results_submitted_only.json",
        "scores.json",
    ]

    # The private values, from the same upload scored locally (where the file is written).
    local = run_cli(app / "input" / "res", app / "input" / "ref", tmp_path / "local")
    private = json.loads((tmp_path / "local" / PRIVATE_RESULTS_FILE).read_text())
    texts = {p.name: p.read_text() for p in (app / "output").iterdir()}
    texts.update(stdout=done.stdout, stderr=done.stderr)
    assert local.metrics["leaderboard"] == json.loads(texts["metrics.json"])["leaderboard"]
    assert _leaks(texts, _private_numbers(private), ["crop114"]) == []


def test_a_failed_case_reads_the_same_whether_it_is_private_or_public(tmp_path):
    """A crop that cannot be scored fails the run with the same last line, log line and
    metrics.json failure whether it is private or not, so breaking one case at a time tells
    nothing of which cases are private; private-results.json lists it for the organizer."""
    submission = tmp_path / "submission"
    shutil.unpack_archive(ROOT / "examples" / "cellmap" / "submission" / "submission.zip", submission / "submission.zarr")
    mito = submission / "submission.zarr" / "crop114" / "mito"
    for chunk in (p for p in mito.rglob("*") if p.is_file() and not p.name.startswith(".")):
        chunk.write_bytes(b"not a chunk")
    ends = {}
    for private in ("crop114", "crop102"):
        phase = _phase_with_private(ROOT / "ground-truth", tmp_path / f"phase-{private}", f"{{cases: [{private}]}}")
        run = run_cli(submission, phase, tmp_path / f"out-{private}")
        failed = [json.loads(line) for line in run.stdout.splitlines() if '"case_failed"' in line]
        ends[private] = (run.code, run.last_line, run.metrics["failures"], [(f["case"], f["message"]) for f in failed])
    assert ends["crop114"] == ends["crop102"]
    code, last, failures, _ = ends["crop114"]
    assert code == 2 and "crop114/mito" in last and [f["case"] for f in failures] == ["crop114/mito"]
    private = json.loads((tmp_path / "out-crop114" / PRIVATE_RESULTS_FILE).read_text())
    assert private["failures"][0]["case"] == "crop114/mito"


def test_the_public_phase_and_metrics_json_do_not_tell_which_cases_are_private(tmp_path):
    """The public phase holds no private_cases; metrics.json's digest of it is keyed with the
    truth's per-folder digests, so trying case names, fractions and seeds against it fails; nor
    does it give the truth's file count and size."""
    from evaluation.provenance import digest

    phase = _phase_with_private(ROOT / "ground-truth", tmp_path / "phase", "{fraction: 0.5, seed: 3}")
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "publish", str(phase), "--output", str(tmp_path / "public")],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "private" not in (tmp_path / "public" / "phase.yaml").read_text()
    run = run_cli(ROOT / "examples" / "cellmap" / "submission", phase, tmp_path / "out")
    provenance = run.metrics["provenance"]["phase"]
    assert set(provenance["fingerprint"]) == {"sha256"}
    sealed = provenance["options"]["private_cases"]["sha256"]
    tried = [{"fraction": f, "seed": s} for f in (0.1, 0.2, 0.25, 0.3, 0.5) for s in range(10)]
    tried += [{"cases": [c]} for c in ("crop102", "crop114")]
    assert sealed not in {digest(option) for option in tried}


def test_segmentation_public_and_private_results_are_those_of_each_subset_alone(case_folders, tmp_path):  # noqa: F811
    """The property behind the split, on a suite whose context lists its cases: the public
    result is what a phase of the public cases alone gives, the private one what a phase of
    the private cases alone gives (values and census alike)."""
    phase, submission, output = case_folders("classes: [1, 2, 3]\nmetrics: [dice, hd]\nprivate_cases: {cases: [case_2]}\n")
    run = run_cli(submission, phase, output)
    assert run.code == 0, run.stderr
    private = json.loads((output / PRIVATE_RESULTS_FILE).read_text())
    for kept, expected in (("case_1", run.metrics), ("case_2", private)):
        alone_phase, alone_input = tmp_path / f"phase-{kept}", tmp_path / f"input-{kept}"
        shutil.copytree(phase, alone_phase, ignore=shutil.ignore_patterns(".evaluation-fingerprint.json"))
        shutil.copytree(submission, alone_input)
        (alone_phase / "phase.yaml").write_text("suite: segmentation\nclasses: [1, 2, 3]\nmetrics: [dice, hd]\n")
        for folder in (alone_phase / "labels", alone_input):
            for other in folder.glob("case_*"):
                if not other.name.startswith(kept):
                    other.unlink()
        alone = run_cli(alone_input, alone_phase, tmp_path / f"out-{kept}").metrics
        assert expected["leaderboard"] == alone["leaderboard"], kept
        assert expected["census"] == alone["census"], kept
        assert set(expected["case"]) == {kept}
