"""The multiclass phase's options, typed and checked once, before anything is read.

The classes follow nnU-Net's ``dataset.json`` ``labels`` and the ``regions_or_labels`` of
``compute_metrics_on_folder`` (MIC-DKFZ/nnUNet@0e49508, ``nnunetv2/evaluation/
evaluate_predictions.py``, with an optional ``ignore_label``): an entry is a label id, or a
region, a tuple of label ids scored as their union (``region_or_label_to_mask``). Groups,
missing-case and unknown-label policies and several models are this project's additions.
Every default is the phase schema's.
"""

import re
from dataclasses import dataclass

import numpy as np

from evaluation.errors import PhaseError
from evaluation.phase import Phase

_RANGE = re.compile(r"^\s*(-?\d+)\s*-\s*(-?\d+)\s*$")


Entry = int | tuple[int, ...]  # a label id, or a region (nnU-Net's tuple)


def entry_key(entry: Entry) -> str:
    """nnU-Net's key of a label or region (``label_or_region_to_key``: ``str``): '3',
    '(1, 2, 3)', '(3,)'."""
    return str(entry)


@dataclass(frozen=True)
class Options:
    class_ids: tuple[Entry, ...]  # the scored entries, in nnU-Net's order
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
        """The entries of the foreground means: all but the background label (nnU-Net skips the
        key 0 in ``compute_metrics_on_folder``; a region is never the background)."""
        return np.array([c != self.background for c in self.class_ids], dtype=bool)

    @property
    def has_regions(self) -> bool:
        return any(isinstance(c, tuple) for c in self.class_ids)

    @property
    def labels(self) -> tuple[int, ...]:
        """Every label value the phase declares: the entries' members and the background."""
        found = {m for c in self.class_ids for m in members(c)}
        return tuple(sorted(found | ({self.background} if self.background is not None else set())))

    def columns(self) -> tuple[str, ...]:
        """Each entry's leaderboard column stem: ``class_<id>`` for a label, ``region_<name>`` for
        a region (its name in ``classes``, or its ids), in characters a column key can hold."""
        return tuple(
            f"region_{re.sub(r'[^0-9A-Za-z]+', '_', name).strip('_')}" if isinstance(c, tuple) else f"class_{c}"
            for c, name in zip(self.class_ids, self.class_names)
        )

    def entry_members(self) -> tuple[tuple[int, ...], ...]:
        """Per entry, the positions of its labels in ``labels``."""
        position = {label: i for i, label in enumerate(self.labels)}
        return tuple(tuple(position[m] for m in members(c)) for c in self.class_ids)

    def group_indices(self) -> dict[str, np.ndarray]:
        position = {c: i for i, c in enumerate(self.class_ids)}
        return {name: np.array([position[c] for c in members], dtype=np.intp) for name, members in self.groups.items()}

    def validate(self) -> None:
        if self.ignore_index is not None and self.ignore_index in self.labels:
            raise PhaseError(f"phase.yaml: ignore_index {self.ignore_index} is also a class id")
        if len(set(self.columns())) != len(self.class_ids):
            raise PhaseError("phase.yaml: two regions have names that differ only in punctuation; rename one")
        if self.groups and self.has_regions:
            raise PhaseError("phase.yaml: 'groups' average labels; with regions in 'classes', define a region instead")
        foreground = set(self.class_ids) - {self.background}
        for name, members in self.groups.items():
            unknown = sorted(set(members) - foreground)
            if unknown:
                raise PhaseError(f"phase.yaml: group {name!r} names {unknown}, which are not foreground classes")


def members(entry: Entry) -> tuple[int, ...]:
    return entry if isinstance(entry, tuple) else (entry,)


def _entry(value) -> Entry:
    """A list is a region, kept as nnU-Net keeps it (a tuple, members in the given order: its
    key is ``str`` of the tuple); an id is a label."""
    return tuple(int(v) for v in value) if isinstance(value, list) else int(value)


def parse_classes(value) -> tuple[tuple[Entry, ...], tuple[str, ...]]:
    """``classes``: a count K (ids 0..K-1), a list of ids and regions (nnU-Net's
    ``regions_or_labels``), or {name: id or [ids]} like nnU-Net's dataset.json ``labels``.
    Labels alone are ordered by id (nnU-Net sorts its labels); with a region, the given order
    is kept (nnU-Net's region order, which its ``foreground_mean`` sums in)."""
    if value is None:
        raise PhaseError("phase.yaml: the multiclass suite needs 'classes' (a count, a list of ids or {name: id})")
    if isinstance(value, int):
        pairs = [(str(i), i) for i in range(value)]
    elif isinstance(value, list):
        pairs = [(entry_key(_entry(v)), _entry(v)) for v in value]
    else:
        pairs = [(str(name), _entry(v)) for name, v in value.items()]
    ids = [i for _, i in pairs]
    if len(set(ids)) != len(ids):
        raise PhaseError("phase.yaml: 'classes' repeats a class id or region")
    if not any(isinstance(i, tuple) for i in ids):
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
