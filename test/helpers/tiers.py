"""The fast tier (``pytest -m "not slow"``) runs a sample of a long parametrization: every
``every``-th value, spread over the whole range (random seeds, corpus kinds); the full suite
runs them all."""

import pytest


def sampled(values, every: int, ids=None) -> list:
    """``values`` as pytest parameters, all but every ``every``-th marked ``slow``."""
    values = list(values)
    ids = ids or [None] * len(values)
    return [
        pytest.param(value, id=name, marks=() if index % every == 0 else pytest.mark.slow)
        for index, (value, name) in enumerate(zip(values, ids, strict=True))
    ]
