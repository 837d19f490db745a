"""A phantom's ground truth: where it comes from, and its labels slab by slab.

The reference rebuilds the label volume from the challenge's void list on every call
(tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.compute_scores`` and, for
the expanding phantom, ``compute_scores_dyn``). Here a phantom's truth is either that void
list, rasterised slab by slab while scoring (``phantom.Rasterizer``), or a label volume the
organiser precomputed from it once (``python -m evaluation rasterize PHASE_DIR``): a
full-size phantom takes tens of seconds to rasterise, scoring then takes seconds.
"""

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.errors import PhaseError, Unusable, organizer_file
from evaluation.phase import Phase
from evaluation.readers.slabs import open_slabs
from evaluation.suites.tomo_foam.options import Options
from evaluation.suites.tomo_foam.phantom import Grid, Rasterizer, Spheres, expanded, void_labels

LABELS = "a phantom's label volume"


@dataclass(frozen=True)
class Expansion:
    """The expanding phantom as ``compute_scores_dyn`` scores it: at the time of projection
    ``projection`` of ``projections`` (its constants 2688 of 3072 are the defaults)."""

    projection: int = 2688
    projections: int = 3072

    @property
    def time(self) -> float:
        """``np.linspace(0, 1, projections)[projection]``, as ``compute_scores_dyn`` computes it."""
        return float(np.linspace(0, 1, self.projections)[self.projection])


@dataclass(frozen=True)
class PhantomTruth:
    """One phantom's ground truth, its files resolved: the void list (``spheres``) and/or the
    precomputed label volume (``labels``, preferred when both are given), on ``grid``."""

    name: str
    grid: Grid
    spheres: Path | None
    labels: Path | None
    expanding: Expansion | None
    large_min_r: float
    medium_min_r: float


# --------------------------------------------------------------------------------------------
# From the phase


def phantom_truths(phase: Phase, options: Options) -> list[PhantomTruth]:
    """Every phantom of the phase; its label volume, else its void list, must exist."""
    found = []
    for name, config in options.phantoms.items():
        truth = phantom_truth(phase, name, config, options)
        if truth.labels is not None and not truth.labels.exists():
            hint = " (create it with: python -m evaluation rasterize PHASE_DIR)" if truth.spheres else ""
            raise PhaseError(f"phantom {name}: its label volume does not exist{hint}")
        if truth.labels is None and (truth.spheres is None or not truth.spheres.is_file()):
            raise PhaseError(f"phantom {name}: neither its void list nor a label volume exists")
        found.append(truth)
    return found


def phantom_truth(phase: Phase, name: str, config: dict, options: Options) -> PhantomTruth:
    """One phantom's ground truth with its files resolved inside the phase folder. Without a
    ``grid``, a phantom given by its label volume alone takes the volume's shape."""
    spheres = phase.path(config["spheres"]) if config.get("spheres") else None
    labels = phase.path(config["labels"]) if config.get("labels") else None
    grid = {**asdict(Grid()), **config.get("grid", {})}
    if "grid" not in config and labels is not None and spheres is None and labels.exists():
        grid.update(zip(("nz", "ny", "nx"), _label_volume_shape(name, labels)))
    grid["voxel_size"] = float(grid["voxel_size"])
    return PhantomTruth(
        name, Grid(**grid), spheres, labels, _expansion(name, config.get("expanding")), options.large_min_r, options.medium_min_r
    )


def _label_volume_shape(name: str, path: Path) -> tuple[int, ...]:
    """The label volume's shape from its header (a public phase's header)."""
    if public.is_header(path):
        shape = public.read_header(path).shape
    else:
        with organizer_file(), open_slabs(path, display=LABELS) as volume:  # its header only
            shape = volume.shape
    if len(shape) != 3:
        raise PhaseError(f"phantom {name}: its label volume is not 3-D")
    return tuple(shape)


def publish(phase: Phase, options: Options, output: Path) -> None:
    """Per phantom, a header of its label volume (shape, data type) and an empty header for its
    void list (the voids are the ground truth)."""
    for truth in phantom_truths(phase, options):
        if truth.labels is not None:
            with organizer_file(), open_slabs(truth.labels, display=LABELS) as volume:
                header = public.Header(shape=tuple(volume.shape), dtype=np.dtype(volume.dtype).name)
            public.header_of(phase, truth.labels, output, header)
        if truth.spheres is not None and truth.spheres.exists():
            public.header_of(phase, truth.spheres, output, public.Header())


def _expansion(name: str, value) -> Expansion | None:
    """``expanding: true`` (the reference's projection) or ``{projection, projections}``."""
    if value is True:
        return Expansion()
    if not isinstance(value, dict):
        return None
    expansion = Expansion(**value)
    if not 0 <= expansion.projection < expansion.projections:
        raise PhaseError(f"phantom {name}: expanding.projection must lie in 0..projections-1")
    return expansion


# --------------------------------------------------------------------------------------------
# Labels slab by slab


def read_void_list(path: Path, with_sizes: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``spheres`` records (and the expanding phantom's ``sizes`` curve) of a truth file,
    the datasets ``compute_scores`` and ``compute_scores_dyn`` read."""
    from evaluation.readers import hdf5

    try:
        records = np.asarray(hdf5.read(path, "spheres", path.name)[0], dtype=np.float32)
        sizes = np.asarray(hdf5.read(path, "sizes", path.name)[0], dtype=np.float32) if with_sizes else None
    except Unusable as exc:  # the organizer's file
        needed = "'spheres' and 'sizes'" if with_sizes else "'spheres'"
        raise PhaseError(
            f"a phantom's void list cannot be read (an HDF5 file with dataset {needed} is expected): {exc}"
        ) from None
    return records, sizes


def rasterizer(truth: PhantomTruth) -> Rasterizer:
    """The label rasteriser of a phantom given by its void list (static or expanding)."""
    records, sizes = read_void_list(truth.spheres, truth.expanding is not None)
    try:
        spheres = Spheres.from_records(records)
    except ValueError as exc:
        raise PhaseError(f"phantom {truth.name}: {exc}") from None
    spheres = Spheres(spheres.x, spheres.y, spheres.z, spheres.r, void_labels(spheres.r, truth.large_min_r, truth.medium_min_r))
    if truth.expanding is None:
        return Rasterizer(spheres, truth.grid)
    return Rasterizer(*expanded(spheres, sizes, truth.expanding.time, truth.grid))


class _LabelFile:
    """A precomputed label volume read slab by slab (the organiser's file)."""

    def __init__(self, path: Path, shape):
        with organizer_file():
            self._slabs = open_slabs(path, display=LABELS)
        if self._slabs.shape != tuple(shape):
            raise PhaseError(f"a phantom's label volume has shape {self._slabs.shape}, its grid says {tuple(shape)}")
        if self._slabs.dtype.kind not in "ui":
            raise PhaseError(f"a phantom's label volume has data type {self._slabs.dtype}; expected integers 0-4")

    def slab(self, z0: int, z1: int) -> np.ndarray:
        with organizer_file():
            labels = self._slabs.read(z0, z1)
        if labels.dtype == np.uint8:
            return labels  # values above 4 are caught by slab_counts
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) > 4):
            raise PhaseError("a phantom's label volume holds values outside 0 (background) to 4 (small void)")
        return labels.astype(np.uint8)

    def close(self) -> None:
        self._slabs.close()


class _Rasterized:
    """The void list rasterised slab by slab, on demand."""

    def __init__(self, truth: PhantomTruth):
        self._rasterizer = rasterizer(truth)

    def slab(self, z0: int, z1: int) -> np.ndarray:
        return self._rasterizer.slab(z0, z1)

    def close(self) -> None:
        pass


def open_truth(truth: PhantomTruth):
    """The phantom's labels as an object with ``slab(z0, z1)`` and ``close()``."""
    return _LabelFile(truth.labels, truth.grid.shape) if truth.labels else _Rasterized(truth)
