"""The metrics writer: sanitised, schema-valid, atomic."""

import json
import math

import numpy as np
import pytest

from evaluation import report
from evaluation.errors import GraderError


def _document(**aggregates):
    return {"grader": {"name": "evaluation", "version": "0"}, "suite": "cellmap", "case": {}, "aggregates": aggregates, "failures": []}


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
