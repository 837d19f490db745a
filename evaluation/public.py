"""The public phase: what a participant may hold of a phase, for the preflight.

``python -m evaluation publish`` writes it and ``python -m evaluation check`` runs on it: the
intake, planning and reading code of grading, without the ground truth. It holds
``phase.yaml`` (its options, ``public: true``, no comments) and what each suite's ``plan``
needs (``Suite.publish``): the CellMap manifest and its truth zarr's metadata without a chunk,
and for every other ground-truth file a *header* of the same name: a small JSON document with
the array's shape, data type and geometry (spacing, origin, direction) as the suite reads
them. Nothing of a voxel's value, nor anything computed from one (no instance counts, sizes,
file sizes or checksums), is written: the suites' discovery (case names, folders) runs on the
public phase unchanged, and where grading reads a ground-truth file's header for planning or
geometry checks, the preflight reads its header here.

Grading against a public phase is refused (``refuse_grading``): it is the organizer's mistake,
an internal error (exit 1), never a set of scores.
"""

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from evaluation import phase as phases
from evaluation.errors import PhaseError, Unusable, organizer_file
from evaluation.phase import Phase
from evaluation.readers import images, untrusted
from evaluation.readers.volume import Volume

OPTION = "public"  # phase.yaml: true in a public phase
HEADER_FORMAT = "evaluation public header"
_MAGIC = b'{"format": "' + HEADER_FORMAT.encode() + b'"'
MAX_HEADER_BYTES = 64 << 10


@dataclass(frozen=True)
class Header:
    """What the public phase holds of one ground-truth array: its shape (None for a file that
    is no array, e.g. a void list), data type and geometry in array axis order (None when the
    format has none)."""

    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    spacing: tuple[float, ...] | None = None
    origin: tuple[float, ...] | None = None
    direction: tuple[float, ...] | None = None

    @classmethod
    def of(cls, volume: Volume) -> "Header":
        """The header of a volume as a reader returned it."""
        vector = lambda v: None if v is None else tuple(float(x) for x in v)  # noqa: E731
        return cls(
            tuple(int(n) for n in volume.array.shape),
            np.dtype(volume.array.dtype).name,
            vector(volume.spacing),
            vector(volume.origin),
            vector(volume.direction),
        )

    @property
    def voxels(self) -> int:
        return math.prod(self.shape or ())

    def volume(self) -> Volume:
        """A ``Volume`` with this shape, dtype and geometry whose array holds no memory (every
        voxel the same zero): for the geometry checks that compare a prediction with it."""
        dtype = np.dtype(self.dtype or np.uint8).newbyteorder("=")
        return Volume(np.broadcast_to(np.zeros((), dtype), self.shape or ()), self.spacing, self.origin, self.direction)

    def to_json(self) -> dict:
        return {"format": HEADER_FORMAT, **{k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}}


def is_public(phase: Phase) -> bool:
    return bool(phase.option(OPTION))


def refuse_grading(phase: Phase) -> None:
    """A public phase holds no ground truth: scoring against it is the organizer's mistake."""
    if is_public(phase):
        raise PhaseError(
            f"{phases.PHASE_FILE} says 'public: true': this is a public phase (written by 'python -m evaluation publish'), "
            "which holds no ground truth; it can only be used by 'python -m evaluation check'. Grade against the full phase."
        )


# --------------------------------------------------------------------------------------------
# Headers


def write_header(path: Path, header: Header) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(header.to_json()))


def is_header(path: Path) -> bool:
    """Whether ``path`` is a header written by ``write_header`` (a regular file that starts
    so), rather than the ground-truth file itself."""
    try:
        if not Path(path).is_file() or Path(path).is_symlink():
            return False
        with open(path, "rb") as f:
            return f.read(len(_MAGIC)) == _MAGIC
    except OSError:
        return False


def read_header(path: Path) -> Header:
    """The header that stands for a ground-truth file of a public phase."""
    if not is_header(path):
        raise PhaseError("a ground-truth file of the public phase is not a header written by 'python -m evaluation publish'")
    with organizer_file():
        document = untrusted.load_json(Path(path), "a public header", limit=MAX_HEADER_BYTES)
    vector = lambda key: None if document.get(key) is None else tuple(document[key])  # noqa: E731
    return Header(vector("shape"), document.get("dtype"), vector("spacing"), vector("origin"), vector("direction"))


def voxel_count(path: Path, display: str, key: str | None = None) -> int:
    """Voxels of a ground-truth file from its header: the public phase's header, else the
    file's own (``images.voxel_count``), for the plan's memory estimates."""
    if is_header(path):
        return read_header(path).voxels
    return images.voxel_count(path, display=display, key=key)


def estimated_voxels(path: Path) -> int:
    """Voxels of a ground-truth label map for a plan's memory estimate (``voxel_count``); its
    file size when the header cannot be read, as an estimate only: the worker that reads the
    file reports what is wrong with it."""
    try:
        return voxel_count(path, "a ground-truth label map")
    except Unusable:
        return path.stat().st_size if path.is_file() else 1 << 20


# --------------------------------------------------------------------------------------------
# Writing the public phase


def target(phase: Phase, path: Path, output: Path) -> Path:
    """Where the public phase holds what stands for ``path``, a file of the phase."""
    relative = os.path.relpath(Path(path).resolve(), phase.root.resolve())
    if relative.startswith(".."):
        raise PhaseError("a ground-truth file lies outside the phase folder")
    return Path(output) / relative


SECRET_OPTIONS = ("private_cases",)  # the organizer's: which cases rank the final leaderboard


def write_phase_file(phase: Phase, output: Path) -> Path:
    """``phase.yaml`` of the public phase: the same options and ``public: true``, written from
    the parsed options (an organizer's comments may describe the ground truth), without
    ``SECRET_OPTIONS`` (the preflight needs no private case: one fails as any other does)."""
    options = {name: value for name, value in phase.options.items() if name not in SECRET_OPTIONS}
    config = {"suite": phase.suite, **options, OPTION: True}
    path = Path(output) / phases.PHASE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    return path


def header_of(phase: Phase, path: Path, output: Path, header: Header) -> None:
    """Write ``header`` where the public phase holds ``path``."""
    write_header(target(phase, path, output), header)
