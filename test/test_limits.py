"""The limits of reading an upload are written once (``evaluation/readers/limits.py``) and
documented as they are enforced (docs/participants.md, made by ``helpers/limits_table.py``)."""

import ast
from pathlib import Path

from helpers import limits_table

READERS = Path(__file__).resolve().parent.parent / "evaluation" / "readers"


def test_the_participants_guide_lists_every_limit_as_enforced():
    assert limits_table.documented() == limits_table.table(), "run: python test/helpers/limits_table.py"


def test_no_reader_keeps_a_limit_of_its_own():
    """A ``MAX_...`` constant anywhere else under readers/ (or in the archive unpacker) would be
    a second place for a limit."""
    files = [p for p in READERS.rglob("*.py") if p.name != "limits.py"] + [READERS.parent / "archive.py"]
    found = []
    for path in files:
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            found += [f"{path.name}: {t.id}" for t in targets if isinstance(t, ast.Name) and t.id.lstrip("_").startswith("MAX_")]
    assert not found, found
