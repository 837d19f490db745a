"""``report: false`` (an option of every phase): no rendered report (report.html, report.txt,
SVG plots) is made, whatever the suite; metrics.json, the CSV tables and the reference's own
result files are the same as with the report."""

import json
import shutil

import pytest
from helpers.grading import ROOT, run_cli
from test_fisbe_parity import make_phase as fisbe_phase
from test_segmentation_brats import KIT as BRATS
from test_segmentation_brats import phase as brats_phase
from test_segmentation_suite import case_folders  # noqa: F401 (a fixture)

MULTICLASS = ROOT / "examples" / "multiclass"
ANNOTATORS = ROOT / "examples" / "annotators"
RENDERED = {"report.html", "report.txt", "plots"}


def without_report(phase, tmp_path):
    """A copy of ``phase`` with ``report: false`` added."""
    copy = tmp_path / "phase_off"
    shutil.copytree(phase, copy)
    (copy / "phase.yaml").write_text((copy / "phase.yaml").read_text() + "\nreport: false\n")
    return copy


def assert_only_the_rendered_files_go(submission, phase, tmp_path, rendered: set[str], code: int = 0) -> None:
    """Graded with the default and with ``report: false``: the second writes every file of the
    first but ``rendered``, each with the same content, and the same metrics.json."""
    on = run_cli(submission, phase, tmp_path / "on")
    off = run_cli(submission, without_report(phase, tmp_path), tmp_path / "off")
    assert on.code == code and off.code == code, (on.stderr[-1500:], off.stderr[-1500:])
    files_on, files_off = ({p.name for p in run.output.iterdir()} for run in (on, off))
    assert rendered <= files_on and files_off == files_on - rendered
    for name in sorted(files_off - {"plots", "metrics.json"}):
        first, second = ((run.output / name).read_text() for run in (on, off))
        assert (json.loads(first) == json.loads(second)) if name.endswith(".json") else first == second, name
    assert (on.metrics["aggregates"], on.metrics.get("case")) == (off.metrics["aggregates"], off.metrics.get("case"))


def test_multiclass(tmp_path):
    assert_only_the_rendered_files_go(MULTICLASS / "submission", MULTICLASS / "phase", tmp_path, {"report.txt", "report.html"})


def test_segmentation(case_folders, tmp_path):  # noqa: F811
    phase, submission, _ = case_folders("classes: [1, 2, 3]\nmetrics: [dice, hd]\ninstance_metrics: [detection]\n")
    assert_only_the_rendered_files_go(submission, phase, tmp_path, {"report.html"})


def test_segmentation_preset(tmp_path):
    """A whole evaluation's preset (BraTS 2025, glioma) too, without the reference test case's
    upload that holds a label no group defines (missing instead)."""
    phase = brats_phase(tmp_path, "suite: segmentation\npreset: brats-gli\n")
    submission = tmp_path / "upload"
    shutil.copytree(BRATS / "cases" / "pred", submission)
    (submission / "BraTS-GLI-00007-000.nii.gz").unlink()
    assert_only_the_rendered_files_go(submission, phase, tmp_path, {"report.html"})


def test_a_refused_upload_gets_a_report_only_when_the_organizer_asks(tmp_path):
    """One case holds a label no group defines, as the reference's own test case does: the upload
    is refused (exit 2), and renders no report unless ``report: always``; the rest is the same."""
    phase = brats_phase(tmp_path, "suite: segmentation\npreset: brats-menrt\n", "truth1")
    always = tmp_path / "phase_always"
    shutil.copytree(phase, always)
    (always / "phase.yaml").write_text((always / "phase.yaml").read_text() + "\nreport: always\n")
    default, asked = (run_cli(BRATS / "cases" / "pred1", p, tmp_path / p.name) for p in (phase, always))
    assert default.code == asked.code == 2, (default.stderr[-1500:], asked.stderr[-1500:])
    files = {run.output: {p.name for p in run.output.iterdir()} for run in (default, asked)}
    assert files[asked.output] - files[default.output] == {"report.html"}
    assert default.metrics["aggregates"] == asked.metrics["aggregates"]


@pytest.mark.slow
def test_annotators(tmp_path):
    assert_only_the_rendered_files_go(ANNOTATORS / "submission", ANNOTATORS / "phase", tmp_path, {"report.html", "plots"})


@pytest.mark.slow
def test_suites_without_a_rendered_report_accept_it(cellmap_phase, tmp_path):
    phase, submission = cellmap_phase("a_perfect_instance")
    assert_only_the_rendered_files_go(submission, phase, tmp_path / "cellmap", set())
    phase, submission = fisbe_phase(tmp_path / "fisbe", "h_perturbed")
    assert_only_the_rendered_files_go(submission, phase, tmp_path / "fisbe", set())
