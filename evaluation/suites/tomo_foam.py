"""TomoChallenge foam phantoms: foam Dice, void recall per size class, boundary Dice.

Reference: tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.py``
(``compute_scores``, ``compute_scores_dyn``, ``metrics``, ``load_submission``), with the ground
truth voxelised as dmpelt/foam_ct_phantom@5aaaf7e ``genvol`` does. Definitions and quirks
follow the conformance kit's SPEC.md (section numbers below refer to it).

The phase names one or more phantoms (cases). Each has its ground truth as the challenge's
void list (HDF5 ``spheres``) plus the grid, rasterised while scoring, or as a label volume
precomputed once with ``evaluation-tomo-foam rasterize PHASE_DIR`` (the fast
path: a full-size phantom takes tens of seconds to rasterise, scoring then takes seconds).
The expanding phantom is scored at projection 2688 of 3072 (``compute_scores_dyn``).

The submission holds one file per phantom, named after it (a single-phantom phase takes any
single file): the reference's bit-packed HDF5 or a plain volume (TIFF, HDF5, ``.npy``, zarr,
MHA/NIfTI/NRRD), binarised with ``> 0.5``. Everything is counted slab by slab (SPEC 3-4).

Reference quirks (SPEC 7): the in-place mutation of the truth, the hard-coded 1080-slice edge
loop and the summing of raw values instead of counting foam voxels are fixed (identical
results for 0/1 submissions of the challenge's size); the harmonic mean's NaN for a phantom
without one void class is kept unless ``harm_mean_of: defined``.
"""

import argparse
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from evaluation import log
from evaluation import phase as phases
from evaluation.errors import GraderError, PhaseError, SubmissionError
from evaluation.metrics.foam_phantom import LARGE_MIN_R, MEDIUM_MIN_R, Grid, Rasterizer, Spheres, expanded, void_labels
from evaluation.metrics.foam_scores import BINS, SCORE_KEYS, FoamCounts, foam_scores, slab_counts
from evaluation.phase import Phase
from evaluation.readers.slabs import map_slabs, open_slabs, slab_bounds, slices_per_slab
from evaluation.readers.tomo_volumes import open_binary
from evaluation.submission import Submission
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register

_log = log.get(__name__)

REFERENCE = {
    "repository": "tomochallenge/tomochallenge_utils",
    "commit": "fab535fd79844c23f6f0660453d83e1f1b9fff46",
    "phantom_generator": "dmpelt/foam_ct_phantom@5aaaf7e",
}
DEFAULT_PHANTOM = "foam_phantom_1"
DEFAULT_SPHERES = "foam_phantom_1_ground_truth.h5"
SLAB_VOXELS = 1 << 24  # voxels per slab: ~16 M, a few hundred MB of temporaries per thread
EXPANSION_DEFAULTS = {"projection": 2688, "projections": 3072}


# --------------------------------------------------------------------------------------------
# Ground truth


@dataclass(frozen=True)
class PhantomTruth:
    """Where one phantom's ground truth comes from (resolved paths, JSON-able)."""

    name: str
    grid: dict
    spheres: str | None = None
    labels: str | None = None
    expanding: dict | None = None
    large_min_r: float = LARGE_MIN_R
    medium_min_r: float = MEDIUM_MIN_R


def expansion_time(expanding: dict) -> float:
    """``np.linspace(0, 1, projections)[projection]`` (``compute_scores_dyn``)."""
    return float(np.linspace(0, 1, expanding["projections"])[expanding["projection"]])


def read_void_list(path: Path, with_sizes: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``spheres`` records (and the expanding phantom's ``sizes`` curve) of a truth file."""
    from evaluation.readers import hdf5

    try:
        records = np.asarray(hdf5.read(path, "spheres", path.name, trusted=True)[0], dtype=np.float32)
        sizes = np.asarray(hdf5.read(path, "sizes", path.name, trusted=True)[0], dtype=np.float32) if with_sizes else None
    except PhaseError as exc:
        needed = "'spheres' and 'sizes'" if with_sizes else "'spheres'"
        raise PhaseError(f"a phantom's void list cannot be read (an HDF5 file with dataset {needed} is expected): {exc}") from None
    return records, sizes


def rasterizer(truth: PhantomTruth) -> Rasterizer:
    """The label rasteriser of a phantom given by its void list (static or expanding)."""
    records, sizes = read_void_list(Path(truth.spheres), truth.expanding is not None)
    try:
        spheres = Spheres.from_records(records)
    except ValueError as exc:
        raise PhaseError(f"phantom {truth.name}: {exc}") from None
    spheres = Spheres(spheres.x, spheres.y, spheres.z, spheres.r, void_labels(spheres.r, truth.large_min_r, truth.medium_min_r))
    grid = Grid(**truth.grid)
    if truth.expanding is not None:
        spheres, grid = expanded(spheres, sizes, expansion_time(truth.expanding), grid)
    return Rasterizer(spheres, grid)


class _LabelFile:
    """A precomputed label volume read slab by slab (``trusted``: organiser's file)."""

    def __init__(self, path: Path, shape):
        self._slabs = open_slabs(path, display="a phantom's label volume", trusted=True)
        if self._slabs.shape != tuple(shape):
            raise PhaseError(f"a phantom's label volume has shape {self._slabs.shape}, its grid says {tuple(shape)}")
        if self._slabs.dtype.kind not in "ui":
            raise PhaseError(f"a phantom's label volume has data type {self._slabs.dtype}; expected integers 0-4")

    def slab(self, z0: int, z1: int) -> np.ndarray:
        labels = self._slabs.read(z0, z1)
        if labels.dtype == np.uint8:
            return labels  # values above 4 are caught by slab_counts
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) > 4):
            raise PhaseError("a phantom's label volume holds values outside 0 (background) to 4 (small void)")
        return labels.astype(np.uint8)

    def close(self) -> None:
        self._slabs.close()


class _Rasterized:
    def __init__(self, truth: PhantomTruth):
        self._rasterizer = rasterizer(truth)

    def slab(self, z0: int, z1: int) -> np.ndarray:
        return self._rasterizer.slab(z0, z1)

    def close(self) -> None:
        pass


def open_truth(truth: PhantomTruth):
    grid = Grid(**truth.grid)
    return _LabelFile(Path(truth.labels), grid.shape) if truth.labels else _Rasterized(truth)


# --------------------------------------------------------------------------------------------
# Scoring one phantom


def count_phantom(truth_source, predicted, shape, threads: int) -> FoamCounts:
    """The (label, boundary, predicted) histogram over the whole volume, slab by slab: each
    slab reads its truth with one extra slice on each side to decide its boundary."""
    nz, ny, nx = shape

    def count(z0: int, z1: int) -> np.ndarray:
        lo, hi = max(z0 - 1, 0), min(z1 + 1, nz)
        labels = truth_source.slab(lo, hi)
        try:
            return slab_counts(labels, predicted.slab(z0, z1), below=lo < z0, above=hi > z1)
        except ValueError as exc:
            raise PhaseError(f"a phantom's label volume is invalid: {exc}") from None

    bounds = slab_bounds(nz, slices_per_slab(ny * nx, SLAB_VOXELS), align=2)
    histogram = np.zeros(BINS, dtype=np.int64)
    for part in map_slabs(count, bounds, threads):
        histogram += part
    return FoamCounts.from_histogram(histogram)


def score_phantom(payload: dict) -> dict:
    truth = PhantomTruth(**payload["truth"])
    shape = Grid(**truth.grid).shape
    predicted = open_binary(Path(payload["file"]), shape, payload["display"])
    source = open_truth(truth)
    try:
        counts = count_phantom(source, predicted, shape, payload["threads"])
    finally:
        predicted.close()
        source.close()
    scores = foam_scores(counts, defined_only=payload["harm_mean_of"] == "defined")
    result = {**scores, "counts": counts.spec_counts(), "format": "bit-packed" if predicted.packed else "plain"}
    if predicted.description is not None:
        result["description"] = predicted.description
    return result


# --------------------------------------------------------------------------------------------
# Phase


@dataclass(frozen=True)
class Options:
    phantoms: dict
    large_min_r: float = LARGE_MIN_R
    medium_min_r: float = MEDIUM_MIN_R
    harm_mean_of: str = "all"

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        phantoms = o.get("phantoms") or {DEFAULT_PHANTOM: {"spheres": DEFAULT_SPHERES}}
        return cls(phantoms, o.get("large_min_r", LARGE_MIN_R), o.get("medium_min_r", MEDIUM_MIN_R), o.get("harm_mean_of", "all"))


def phantom_truth(phase: Phase, name: str, config: dict, options: Options) -> PhantomTruth:
    """One phantom's ground truth with its files resolved inside the phase folder."""
    spheres = phase.path(config["spheres"]) if config.get("spheres") else None
    labels = phase.path(config["labels"]) if config.get("labels") else None
    expanding = _expansion(config.get("expanding"))
    if expanding is not None and not 0 <= expanding["projection"] < expanding["projections"]:
        raise PhaseError(f"phantom {name}: expanding.projection must lie in 0..projections-1")
    grid = {**asdict(Grid()), **config.get("grid", {})}
    if "grid" not in config and labels is not None and spheres is None and labels.exists():
        with open_slabs(labels, display="a phantom's label volume", trusted=True) as volume:  # labels only: their shape
            if len(volume.shape) != 3:
                raise PhaseError(f"phantom {name}: its label volume is not 3-D")
            grid.update(nz=volume.shape[0], ny=volume.shape[1], nx=volume.shape[2])
    grid["voxel_size"] = float(grid["voxel_size"])
    return PhantomTruth(name, grid, str(spheres) if spheres else None, str(labels) if labels else None,
                        expanding, options.large_min_r, options.medium_min_r)


def _expansion(value) -> dict | None:
    """``expanding: true`` or ``{projection, projections}`` with the challenge's defaults."""
    if value is True:
        return dict(EXPANSION_DEFAULTS)
    if isinstance(value, dict):
        return {**EXPANSION_DEFAULTS, **value}
    return None


def phantom_truths(phase: Phase, options: Options) -> list[PhantomTruth]:
    """Every phantom of the phase; its label volume, else its void list, must exist."""
    found = []
    for name, config in options.phantoms.items():
        truth = phantom_truth(phase, name, config, options)
        if truth.labels is not None and not Path(truth.labels).exists():
            hint = " (create it with: evaluation-tomo-foam rasterize PHASE_DIR)" if truth.spheres else ""
            raise PhaseError(f"phantom {name}: its label volume does not exist{hint}")
        if truth.labels is None and (truth.spheres is None or not Path(truth.spheres).is_file()):
            raise PhaseError(f"phantom {name}: neither its void list nor a label volume exists")
        found.append(truth)
    return found


def match_files(submission: Submission, names: list[str]) -> dict[str, Path]:
    """Phantom -> submitted file: by file name (stem); a single-phantom phase takes the
    submission's only file whatever its name, as the reference scores one file per phantom."""
    files = submission.case_files()
    if len(names) == 1 and len(files) == 1:
        return {names[0]: next(iter(files.values()))}
    missing = [name for name in names if name not in files]
    if missing:
        if not files:
            raise SubmissionError("the submission holds no volume file: upload the segmentation as a bit-packed .h5 "
                                  "(the challenge's prepare_submission) or a .tif/.h5/.npy/.zarr volume")
        raise SubmissionError(f"no file for phantom(s) {', '.join(missing)}: name each file after its phantom "
                              f"(e.g. {missing[0]}.h5); found {', '.join(sorted(files)[:5])}")
    extra = sorted(set(files) - set(names))
    if extra:
        _log.warning("unused_files", files=extra[:10])
    return {name: files[name] for name in names}


def mean_scores(entries: list[dict]) -> dict[str, float]:
    """Each score's arithmetic mean over the phantoms (NaN if one is NaN)."""
    return {key: float(np.mean([entry[key] for entry in entries])) for key in SCORE_KEYS}


@register
class TomoFoam(Suite):
    name = "tomo_foam"
    ranking = "harm_mean"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        truths = phantom_truths(phase, options)
        files = match_files(submission, [t.name for t in truths])
        threads = resources.threads_per_task(len(truths))
        tasks = []
        for truth in truths:
            voxels = int(np.prod(Grid(**truth.grid).shape, dtype=np.int64))
            slab = min(voxels, SLAB_VOXELS)
            payload = {"truth": asdict(truth), "file": str(files[truth.name]), "display": files[truth.name].name,
                       "threads": threads, "harm_mean_of": options.harm_mean_of}
            tasks.append(Task(key=truth.name, payload=payload, memory_bytes=voxels // 8 + threads * slab * 24))
        _log.info("tomo_foam_plan", phantoms=len(truths), threads=threads)
        return Plan(tasks=tasks, context={"names": [t.name for t in truths]})

    def score(self, payload: dict) -> dict:
        return score_phantom(payload)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        cases, ranked = {}, []
        for name in plan.context["names"]:
            outcome = outcomes[name]
            if outcome.ok:
                cases[name] = {**outcome.value, "status": "scored"}
                ranked.append(outcome.value)
            else:  # a failed phantom scores 0, as an empty submission would rank
                cases[name] = {**dict.fromkeys(SCORE_KEYS, 0.0), "status": "failed", "error": outcome.message}
                ranked.append(cases[name])
        aggregates = mean_scores(ranked)
        metrics = {"case": cases, "aggregates": aggregates, "reference": REFERENCE}
        return Result(metrics=metrics, leaderboard=dict(aggregates),
                      case_scores={name: cases[name]["harm_mean"] for name in cases})


# --------------------------------------------------------------------------------------------
# Build-time rasterisation: evaluation-tomo-foam rasterize PHASE_DIR (or python -m evaluation.suites.tomo_foam ...)


def write_labels(path: Path, source: Rasterizer, threads: int = 1) -> None:
    """Rasterise a phantom into ``path`` slab by slab: ``.npy`` (fastest to score, written
    sequentially, never whole in memory), ``.h5`` (dataset ``labels``, gzip) or ``.zarr``."""
    shape = source.grid.shape
    bounds = slab_bounds(shape[0], slices_per_slab(shape[1] * shape[2], SLAB_VOXELS))
    kind = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    if kind == ".npy":
        with open(partial, "wb") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
            for start in range(0, len(bounds), max(1, threads)):
                batch = bounds[start:start + max(1, threads)]
                for slab in map_slabs(source.slab, batch, threads):
                    f.write(slab.tobytes())
    elif kind in (".h5", ".hdf5"):
        import h5py

        with h5py.File(partial, "w") as f:  # one slice per chunk: scoring reads slabs with halos
            dataset = f.create_dataset("labels", shape=shape, dtype="u1", chunks=(1, *shape[1:]), compression="gzip", compression_opts=1)
            for z0, z1 in bounds:
                dataset[z0:z1] = source.slab(z0, z1)
    elif kind == ".zarr":
        import shutil

        import zarr

        shutil.rmtree(partial, ignore_errors=True)
        array = zarr.create_array(store=str(partial), shape=shape, dtype="uint8", chunks=(1, *shape[1:]), zarr_format=3)
        for z0, z1 in bounds:
            array[z0:z1] = source.slab(z0, z1)
    else:
        raise PhaseError(f"label volumes are written as .npy, .h5 or .zarr, not {kind!r}")
    if path.is_dir():
        import shutil

        shutil.rmtree(path)
    partial.replace(path)


def rasterize_phase(phase_dir: Path, only: list[str] | None = None, threads: int = 1, force: bool = False) -> list[Path]:
    """Write the label volume named by ``labels`` of every phantom that has a void list."""
    phase = phases.load(phase_dir)
    if phase.suite != TomoFoam.name:
        raise PhaseError(f"{phase_dir} is a {phase.suite} phase, not {TomoFoam.name}")
    options = Options.from_phase(phase)
    written = []
    for name, config in options.phantoms.items():
        if only and name not in only:
            continue
        if not config.get("spheres") or not config.get("labels"):
            _log.info("rasterize_skipped", phantom=name, reason="needs both 'spheres' and 'labels' in phase.yaml")
            continue
        target = phase.path(config["labels"])
        if target.exists() and not force:
            _log.info("rasterize_skipped", phantom=name, reason="label volume exists (use --force)")
            continue
        truth = replace(phantom_truth(phase, name, config, options), labels=None)
        write_labels(target, rasterizer(truth), threads)
        _log.info("rasterized", phantom=name, path=str(target))
        written.append(target)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="evaluation-tomo-foam",
                                     description="Precompute foam-phantom label volumes for a tomo_foam phase (image build time).")
    commands = parser.add_subparsers(dest="command", required=True)
    raster = commands.add_parser("rasterize", help="write each phantom's 'labels' file from its 'spheres' void list")
    raster.add_argument("phase_dir", type=Path)
    raster.add_argument("--phantom", action="append", help="only this phantom (repeatable)")
    raster.add_argument("--threads", type=int, default=1)
    raster.add_argument("--force", action="store_true", help="overwrite existing label volumes")
    args = parser.parse_args(argv)
    log.configure()
    try:
        written = rasterize_phase(args.phase_dir, args.phantom, args.threads, args.force)
    except GraderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
