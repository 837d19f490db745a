"""How a codec entry of the metadata is read and its settings checked, before any codec is
made: each setting against a predicate with a description the refusal quotes, so that a
participant reads what the setting must be (``the setting 'clevel' of the codec blosc must
be an integer from 0 to 9``)."""

import math
from collections.abc import Callable, Iterable
from typing import Any

from evaluation.readers.zarr_store.base import ACCEPTED, V2_DTYPE, VALID_SIZES, Invalid, is_int

# setting -> (predicate, what it must be)
Settings = dict[str, tuple[Callable[[object], bool], str]]


def check(config: object, name: str, allowed: Settings) -> dict[str, Any]:
    """``config`` checked against ``allowed``; every setting is optional here (``required``)."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise Invalid(f"the settings of the codec {name} must be a JSON object")
    for key, value in config.items():
        if key not in allowed:
            raise Invalid(f"the codec {name} has an unknown setting {str(key)[:40]!r}")
        predicate, description = allowed[key]
        if not predicate(value):
            raise Invalid(f"the setting '{key}' of the codec {name} must be {description}")
    return config


def required(settings: dict[str, Any], keys: tuple[str, ...], noun: str, name: str) -> None:
    """Refuse ``settings`` without one of ``keys`` (the first one missing is named)."""
    missing = [key for key in keys if key not in settings]
    if missing:
        raise Invalid(f"the {noun} {name} needs its '{missing[0]}'")


def int_in(low: int, high: int) -> tuple[Callable[[object], bool], str]:
    return lambda v: is_int(v) and low <= v <= high, f"an integer from {low} to {high}"


def _is_dtype_string(value: object) -> bool:
    match = V2_DTYPE.fullmatch(value) if isinstance(value, str) else None
    return match is not None and int(match.group(3)) in VALID_SIZES[match.group(2)]


ANY_INT = (lambda v: is_int(v) and abs(v) < 2**31, "an integer")
BOOL = (lambda v: isinstance(v, bool), "true or false")
NUMBER = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number")
DTYPE = (_is_dtype_string, "a numeric data type string such as '<i4'")
LOCATION = (lambda v: v in ("start", "end"), "'start' or 'end'")
ENDIAN = (lambda v: v in ("little", "big"), "'little' or 'big'")


def named(entry: object, what: str) -> tuple[str, dict[str, Any]]:
    """A format 3 ``{"name": ..., "configuration": {...}}`` (or a bare name)."""
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise Invalid(f"every entry of '{what}' must be an object with a 'name'")
    extra = set(entry) - {"name", "configuration", "must_understand"}
    if extra:
        raise Invalid(f"an entry of '{what}' has the unknown field {sorted(extra)[0][:40]!r}")
    configuration = entry.get("configuration", {})
    if not isinstance(configuration, dict):
        raise Invalid(f"the configuration of '{entry['name'][:40]}' must be a JSON object")
    return entry["name"], configuration


def unaccepted(codecs: Iterable[object]) -> Invalid:
    """The one refusal of every codec not in the registry, naming them all."""
    names = sorted({str(n)[:40] for n in codecs})
    which = "codec " + names[0] if len(names) == 1 else "codecs " + ", ".join(names)
    verb = "is" if len(names) == 1 else "are"
    return Invalid(f"uses the {which}, which {verb} not accepted; {ACCEPTED}", readable=False)
