"""The metrics writer: sanitised, schema-valid, atomic."""

import json
import math
import re

import numpy as np
import pytest

from evaluation import report
from evaluation.errors import GraderError


def _document(**aggregates):
    return {
        "grader": {"name": "evaluation", "version": "0"},
        "suite": "cellmap",
        "case": {},
        "aggregates": aggregates,
        "failures": [],
    }


def test_undefined_values_become_null_and_numpy_becomes_python(tmp_path):
    written = report.write(tmp_path, _document(a=np.float32(0.5), b=math.nan, c=-math.inf, d=np.int64(3), e=(1.0, np.nan)))
    assert written["aggregates"] == {"a": 0.5, "b": None, "c": None, "d": 3, "e": [1.0, None]}
    assert json.loads((tmp_path / "metrics.json").read_text()) == written


def test_dotted_keys_are_rejected_before_writing(tmp_path):
    with pytest.raises(GraderError, match="schema"):
        report.write(tmp_path, _document(**{"dice.mean": 1.0}))
    assert not (tmp_path / "metrics.json").exists()


def test_write_is_atomic(tmp_path, monkeypatch):
    (tmp_path / "metrics.json").write_text('{"old": true}')

    def explode(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report.os, "replace", explode)
    with pytest.raises(KeyboardInterrupt):
        report.write(tmp_path, _document(a=1.0))
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_the_ranking_interval_is_the_bootstrap_of_rank():
    """aggregates.ranking_ci is the interval `rank` gives the same submission (same statistic,
    draws and seed), and collapses onto the mean when every case scores alike."""
    import numpy as np

    from evaluation.organizer import ranking
    from evaluation.report import ranking_interval

    cases = {f"c{i}": float(v) for i, v in enumerate(np.random.default_rng(1).random(17))}
    other = {k: v / 2 for k, v in cases.items()}
    scores = ranking.Scores(
        ["a", "b"],
        sorted(cases),
        np.array([[cases[c] for c in sorted(cases)], [other[c] for c in sorted(cases)]]),
        np.array([np.nan, np.nan]),
        "score",
        True,
    )
    expected = next(s for s in ranking.bootstrap(scores)["submissions"] if s["submission"] == "a")["case_mean_ci"]
    interval = ranking_interval(dict(sorted(cases.items())))
    assert [interval["low"], interval["high"]] == expected
    assert interval["low"] <= interval["mean"] <= interval["high"] and interval["half_width"] > 0
    flat = ranking_interval({"a": 0.5, "b": 0.5, "c": None})
    assert flat["low"] == flat["high"] == 0.5 and flat["cases"] == 2
    assert ranking_interval({"a": 1.0}) is None


def test_cases_can_be_withheld(cellmap_phase, tmp_path):
    """publish_cases: false (hidden test sets): aggregates only, failures numbered, no per-case
    files beside metrics.json."""
    import json

    from helpers.grading import run_cli, validate_metrics

    phase, submission = cellmap_phase("b_split_merge_jitter")
    (phase / "phase.yaml").write_text((phase / "phase.yaml").read_text() + "publish_cases: false\n")
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    validate_metrics(metrics)
    assert "case" not in metrics and metrics["cases_withheld"] is True and metrics["aggregates"]["overall_score"] is not None
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["metrics.json"]


@pytest.mark.parametrize("seed", range(20))
def test_svg_box_plots_draw_matplotlibs_box_statistics(seed):
    """The quartiles, whiskers and fliers of the SVG box plots are matplotlib's own
    (``cbook.boxplot_stats``, whis=1.5), on samples with outliers and ties."""
    from matplotlib import cbook

    from evaluation import charts

    rng = np.random.default_rng(seed)
    values = np.concatenate(
        [rng.normal(size=int(rng.integers(1, 40))), rng.choice([0.0, 1.0, 25.0], size=int(rng.integers(0, 4)))]
    )
    ours = charts.box_statistics(values.tolist())
    (theirs,) = cbook.boxplot_stats(values, whis=1.5)
    assert ours["median"] == pytest.approx(theirs["med"]) and ours["q1"] == pytest.approx(theirs["q1"])
    assert ours["q3"] == pytest.approx(theirs["q3"])
    assert (ours["low"], ours["high"]) == pytest.approx((theirs["whislo"], theirs["whishi"]))
    assert sorted(ours["fliers"]) == pytest.approx(sorted(theirs["fliers"].tolist()))
    svg = charts.row([charts.boxes("dice <1>", ["a&b", "c"], [values.tolist(), [float("nan")]])], "boxes")
    assert svg.count("<rect") == 1 and "a&amp;b" in svg and "dice &lt;1&gt;" in svg


def test_infinities_are_listed_apart_from_undefined_values(tmp_path):
    """metrics.json writes NaN and infinity as null in place (a platform reads numbers) and
    lists every infinity under ``infinities`` at its path, so the two read apart; reading it
    back restores them."""
    document = {
        "suite": "segmentation",
        "case": {"a": {"hd95": math.inf, "dice": math.nan, "sizes": [1.0, -math.inf]}},
        "aggregates": {"hd95_mean": math.inf, "dice_mean": 0.5},
    }
    listed = report.with_infinities(document)["infinities"]
    assert listed == {"case": {"a": {"hd95": "+inf", "sizes": {"1": "-inf"}}}, "aggregates": {"hd95_mean": "+inf"}}
    written = json.loads(report.json_bytes(document, listing_infinities=True))
    assert written["case"]["a"] == {"hd95": None, "dice": None, "sizes": [1.0, None]}
    restored = report.restore_infinities(written)
    assert restored["case"]["a"]["hd95"] == math.inf and restored["case"]["a"]["dice"] is None
    assert restored["case"]["a"]["sizes"] == [1.0, -math.inf] and "infinities" not in restored
    assert "infinities" not in json.loads(report.json_bytes({"a": math.nan}, listing_infinities=True))


def test_violin_densities_are_matplotlibs():
    """The violins' shape is matplotlib's violinplot density (``mlab.GaussianKDE``, Scott)."""
    from matplotlib import mlab

    from evaluation import charts

    rng = np.random.default_rng(4)
    values = rng.normal(size=25)
    points = np.linspace(values.min(), values.max(), 50)
    assert charts.density(values, points) == pytest.approx(mlab.GaussianKDE(values, "scott").evaluate(points), rel=1e-12)


def test_lines_leave_out_points_with_an_infinite_coordinate():
    """A point with one coordinate not finite (the FROC's last point: infinitely many false
    positives) is left out, not drawn at NaN; with ``log_x``, so is x = 0."""
    from evaluation import charts

    svg = charts.lines("t", [("s", [0.0, 0.1, 1.0, math.inf], [0.0, 0.5, 0.8, 0.9])], "x", "y", log_x=True, step=True)
    (path,) = re.findall(r'<path d="([^"]*)"', svg)
    assert "nan" not in svg.lower() and path.count("M") + path.count("L") == 2
    svg = charts.lines("t", [("s", [0.0, 0.5, math.nan], [0.0, math.inf, 1.0])], "x", "y")
    assert "nan" not in svg.lower() and "<circle" in svg and svg.count("<circle") == 1
