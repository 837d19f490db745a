"""The fisbe phase's options, read once from ``phase.yaml`` (defaults: the phase schema's,
which are the reference's FlyLight preset)."""

from dataclasses import dataclass
from pathlib import Path

from evaluation.phase import Phase


@dataclass(frozen=True)
class Options:
    truth: str  # folder of the ground-truth files, inside the phase folder
    truth_key: tuple[str, ...]  # arrays tried in a ground-truth zarr / HDF5 file, in order
    prediction_key: tuple[str, ...]  # the same for a submitted file
    partly: tuple[str, ...]  # partly labelled samples named by the phase (list and split file)
    all_partly: bool  # ``partly: true``: every sample is partly labelled
    remove_small_components: int  # predicted ids of at most this many voxels are removed

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        partly = phase.option("partly")
        names = set(partly) if isinstance(partly, list) else set()
        split_file = phase.option("split_file")
        if split_file:
            names |= read_split_file(phase.path(split_file))
        return cls(
            truth=phase.option("truth"),
            truth_key=_keys(phase.option("truth_key")),
            prediction_key=_keys(phase.option("prediction_key")),
            partly=tuple(sorted(names)),
            all_partly=partly is True,
            remove_small_components=int(phase.option("remove_small_components")),
        )


def _keys(value) -> tuple[str, ...]:
    """One key or a list of keys, as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


def read_split_file(path: Path) -> set[str]:
    """The samples listed under ``(2) samples for FlyLight partly:`` in the reference's
    ``sample_list_per_split.txt``, parsed as its ``util.load_partly_config`` does: section
    headers switch between the complete and the partly list, blank lines and the split
    headers ``train:``, ``val:``, ``test:`` are skipped."""
    partly, in_partly = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        if "(1) samples for FlyLight completely:" in line:
            in_partly = False
        elif "(2) samples for FlyLight partly:" in line:
            in_partly = True
        elif line.endswith(":") and line[:-1] in ("train", "val", "test"):
            continue
        elif in_partly:
            partly.add(line)
    return partly
