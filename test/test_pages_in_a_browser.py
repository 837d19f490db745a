"""Every HTML page the grader writes, opened in a real headless browser (Debian's Chromium): the
suites' reports (segmentation, multiclass, annotators), detection's curves, CodaBench's
detailed results, the organizer's changelog, rankings and sensitivity page. Each renders (a
title, text, its tables and charts drawn with a size), loads nothing but itself (no network, no
sibling file: a participant may download the page alone), logs nothing to the console and
throws nothing, and fits the width of a laptop screen.

Without Chromium these tests skip, unless ``EVALUATION_REQUIRE_BROWSER`` is set (CI sets it
and installs Chromium). With ``EVALUATION_SCREENSHOTS=FOLDER`` each page's full-height
screenshot is kept there, for a person to look at.
"""

import os
import shutil
from pathlib import Path

import pytest
from helpers import browser as browsers
from helpers.detection_cases import lay_out as detection_phase
from helpers.grading import ROOT, run_cli, run_on_a_platform
from test_detection import BASE as DETECTION_BASE
from test_detection_parity import POINTS as DETECTION_POINTS
from test_ranking import run_rank, write_rescore_output
from test_ranking_sensitivity import run_where_the_empty_mask_rule_decides
from test_segmentation_suite import case_folders  # noqa: F401 (a fixture)

from evaluation.organizer import commands

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    if browsers.executable() is None:
        if os.environ.get(browsers.REQUIRED):
            pytest.fail(f"{browsers.REQUIRED} is set and no Chromium is on PATH")
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium)")
    with browsers.Browser() as opened:
        yield opened


def assert_renders(browser, page: Path, *, svgs: int = 0, tables: int = 0, images: int = 0) -> dict:
    """Open ``page`` alone in a folder of its own (a sibling file it needs is then missing) and
    check what a reader would see; returns the page's measurements."""
    alone = page.parent / f"alone-{page.stem}" / page.name
    alone.parent.mkdir()
    shutil.copy(page, alone)
    seen = browser.open(alone)
    keep = os.environ.get("EVALUATION_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"{page.parents[1].name}-{page.stem}.png").write_bytes(seen.screenshot)
    facts = seen.facts
    assert seen.problems(alone) == [], page
    assert facts["title"] and facts["text"] > 50, (page, facts)
    assert facts["svgs"] >= svgs and facts["empty_svgs"] == 0, (page, facts)
    assert facts["tables"] >= tables and facts["images"] >= images and facts["broken_images"] == 0, (page, facts)
    assert facts["width"] <= facts["viewport"], (page, "wider than the screen", facts)
    assert seen.screenshot[:8] == b"\x89PNG\r\n\x1a\n"
    return facts


def test_segmentation_report_codabench_details_and_changelog(browser, case_folders, tmp_path):  # noqa: F811
    """The segmentation report (a box per class and metric), the same run as CodaBench shows it
    (detailed_results.html), and the changelog between two definitions' runs."""
    phase, submission, _ = case_folders(
        "classes: [1, 2, 3]\nmetrics: [dice, hd, nsd]\nnsd_tolerances: [1.0]\ninstance_metrics: [detection]\n"
    )
    local = run_cli(submission, phase, tmp_path / "local")
    assert local.code == 0, local.stderr[-1500:]
    assert_renders(browser, local.output / "report.html", svgs=3, tables=1)
    platform = run_on_a_platform(submission, phase, tmp_path / "codabench")
    assert platform.code == 0, platform.stderr[-1500:]
    assert_renders(browser, platform.output / "detailed_results.html", tables=1)

    other = tmp_path / "phase-monai"
    shutil.copytree(phase, other)
    (other / "phase.yaml").write_text((phase / "phase.yaml").read_text() + "definition: monai\n")
    changed = run_cli(submission, other, tmp_path / "monai")
    assert changed.code == 0, changed.stderr[-1500:]
    old, new = (run.output / "metrics.json" for run in (local, changed))
    assert commands.main(["compare", str(old), str(new), "--output", str(tmp_path / "changelog")]) == 0
    assert_renders(browser, tmp_path / "changelog" / "changelog.html", tables=1)


def test_multiclass_report(browser, tmp_path):
    example = ROOT / "examples" / "multiclass"
    run = run_cli(example / "submission", example / "phase", tmp_path / "out")
    assert run.code == 0, run.stderr[-1500:]
    assert_renders(browser, run.output / "report.html")


def test_annotators_report(browser, tmp_path):
    example = ROOT / "examples" / "annotators"
    run = run_cli(example / "submission", example / "phase", tmp_path / "out")
    assert run.code == 0, run.stderr[-1500:]
    assert_renders(browser, run.output / "report.html", svgs=10, tables=2)


def test_detection_curves(browser, tmp_path):
    phase, submission = detection_phase(tmp_path, DETECTION_BASE + DETECTION_POINTS)
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr[-1500:]
    assert_renders(browser, run.output / "curves.html", svgs=3)


def test_rankings(browser, tmp_path):
    """``rank``: ranking.html (the bootstrap's figures) and final_ranking.html (challengeR's)."""
    matrix = [[0.9, 0.8, 0.95, 0.7], [0.6, 0.7, 0.5, 0.65], [0.55, 0.75, 0.5, 0.6], [0.1, 0.0, 0.2, 0.3]]
    write_rescore_output(tmp_path / "scored", matrix, ["best", "second", "third", "last"])
    done = run_rank(tmp_path / "scored", "--output", tmp_path / "ranking", "--resamples", "200")
    assert done.returncode == 0, done.stderr[-1500:]
    assert_renders(browser, tmp_path / "ranking" / "ranking.html", images=2)
    assert_renders(browser, tmp_path / "ranking" / "final_ranking.html", images=4, tables=1)


def test_sensitivity(browser, tmp_path):
    output = run_where_the_empty_mask_rule_decides(tmp_path)
    assert_renders(browser, output / "sensitivity.html", images=1, tables=1)
