"""Access to the JSON schemas that define the phase config and the metrics file.

The canonical files are the top-level ``schemas/`` folder of the repository; the wheel carries
a copy inside the package (see pyproject), so both an installed grader and a source checkout
validate against the same documents.
"""

import functools
import json
from pathlib import Path

import fastjsonschema
import jsonschema

_PACKAGED = Path(__file__).parent / "schemas"
_SOURCE_TREE = Path(__file__).resolve().parent.parent / "schemas"


def schema_dir() -> Path:
    return _PACKAGED if _PACKAGED.is_dir() else _SOURCE_TREE


@functools.cache
def load(name: str) -> dict:
    with open(schema_dir() / f"{name}.schema.json", encoding="utf-8") as f:
        return json.load(f)


def errors(name: str, document) -> list[str]:
    """All violations of schema ``name`` by ``document``, as 'path: message' lines."""
    validator = jsonschema.Draft202012Validator(load(name))
    found = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}" for e in found]


@functools.cache
def _compiled(name: str):
    return fastjsonschema.compile(load(name))


def first_error(name: str, document) -> str | None:
    """The first violation of schema ``name``, or None. Compiled validation: metrics documents
    with tens of thousands of values are checked in a fraction of a second (``errors`` takes
    ~100 us per value). The schema must not need draft 2020-12 keywords beyond draft 7."""
    try:
        _compiled(name)(document)
    except fastjsonschema.JsonSchemaException as exc:
        return exc.message
    return None
