"""The multiclass phase's options, typed and checked once, before anything is read.

The classes follow nnU-Net's ``dataset.json`` ``labels`` (MIC-DKFZ/nnUNet@0e49508,
``nnunetv2/evaluation/evaluate_predictions.py``: ``compute_metrics_on_folder`` takes the label
list and an optional ``ignore_label``); groups, missing-case and unknown-label policies and
several models are this project's additions. Every default is the phase schema's.
"""

import re
from dataclasses import dataclass

import numpy as np

from evaluation.errors import PhaseError
from evaluation.phase import Phase

_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class Options:
    class_ids: tuple[int, ...]
    class_names: tuple[str, ...]
    truth: str
    background: int | None
    ignore_index: int | None
    groups: dict[str, tuple[int, ...]]
    missing_cases: str
    unknown_labels: str
    max_models: int
    baseline: str | None

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        ids, names = parse_classes(phase.option("classes"))
        groups = phase.option("groups") or {}
        options = cls(
            class_ids=ids,
            class_names=names,
            truth=phase.option("truth"),
            background=phase.option("background"),
            ignore_index=phase.option("ignore_index"),
            groups={name: parse_members(name, members) for name, members in groups.items()},
            missing_cases=phase.option("missing_cases"),
            unknown_labels=phase.option("unknown_labels"),
            max_models=phase.option("max_models"),
            baseline=phase.option("baseline"),
        )
        options.validate()
        return options

    @property
    def foreground(self) -> np.ndarray:
        return np.array([c != self.background for c in self.class_ids], dtype=bool)

    def group_indices(self) -> dict[str, np.ndarray]:
        position = {c: i for i, c in enumerate(self.class_ids)}
        return {name: np.array([position[c] for c in members], dtype=np.intp) for name, members in self.groups.items()}

    def validate(self) -> None:
        if self.ignore_index is not None and self.ignore_index in self.class_ids:
            raise PhaseError(f"phase.yaml: ignore_index {self.ignore_index} is also a class id")
        foreground = set(self.class_ids) - {self.background}
        for name, members in self.groups.items():
            unknown = sorted(set(members) - foreground)
            if unknown:
                raise PhaseError(f"phase.yaml: group {name!r} names {unknown}, which are not foreground classes")


def parse_classes(value) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``classes``: a count K (ids 0..K-1), a list of ids, or {name: id} like nnU-Net's
    dataset.json ``labels``. Class order is ascending id."""
    if value is None:
        raise PhaseError("phase.yaml: the multiclass suite needs 'classes' (a count, a list of ids or {name: id})")
    if isinstance(value, int):
        pairs = [(str(i), i) for i in range(value)]
    elif isinstance(value, list):
        pairs = [(str(i), int(i)) for i in value]
    else:
        pairs = [(str(name), int(i)) for name, i in value.items()]
    ids = [i for _, i in pairs]
    if len(set(ids)) != len(ids):
        raise PhaseError("phase.yaml: 'classes' repeats a class id")
    pairs.sort(key=lambda pair: pair[1])
    return tuple(i for _, i in pairs), tuple(name for name, _ in pairs)


def parse_members(name: str, members) -> tuple[int, ...]:
    """Group members: ids or 'a-b' ranges (inclusive), e.g. ``[1, "24-47"]``."""
    found = []
    for member in members:
        if isinstance(member, int):
            found.append(member)
            continue
        match = _RANGE.match(str(member))
        if match is None or int(match.group(1)) > int(match.group(2)):
            raise PhaseError(f"phase.yaml: group {name!r} member {member!r} is neither an id nor a range 'a-b'")
        found.extend(range(int(match.group(1)), int(match.group(2)) + 1))
    return tuple(sorted(set(found)))
