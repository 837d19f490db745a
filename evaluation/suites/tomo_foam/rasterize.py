"""Build-time rasterisation: ``python -m evaluation rasterize PHASE_DIR``.

Rasterising the challenge's 1080 x 1280 x 1280 phantom from its void list takes tens of
seconds, as the reference does on every call (tomochallenge/tomochallenge_utils@fab535f
``foam_phantom_utils.compute_scores``, through foam_ct_phantom ``genvol``). Done once when the
image is built, it leaves a label volume that scoring reads in seconds.
"""

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np

from evaluation import log
from evaluation import phase as phases
from evaluation.errors import PhaseError
from evaluation.readers.slabs import SLAB_VOXELS, map_slabs, slab_bounds, slices_per_slab
from evaluation.suites.tomo_foam.options import NAME, Options
from evaluation.suites.tomo_foam.phantom import Rasterizer
from evaluation.suites.tomo_foam.truth import phantom_truth, rasterizer

_log = log.get(__name__)


def rasterize_phase(phase_dir: Path, only: list[str] | None = None, threads: int = 1, force: bool = False) -> list[Path]:
    """Write the label volume named by ``labels`` of every phantom that has a void list."""
    phase = phases.load(phase_dir)
    if phase.suite != NAME:
        raise PhaseError(f"{phase_dir} is a {phase.suite} phase, not {NAME}")
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


def write_labels(path: Path, source: Rasterizer, threads: int = 1) -> None:
    """Rasterise a phantom into ``path`` slab by slab: ``.npy`` (fastest to score, written
    sequentially, never whole in memory), ``.h5`` (dataset ``labels``, gzip) or ``.zarr``.
    Written under a temporary name and renamed into place, so no partial file is left."""
    shape = source.grid.shape
    bounds = slab_bounds(shape[0], slices_per_slab(shape[1] * shape[2], SLAB_VOXELS))
    kind = path.suffix.lower()
    writer = {".npy": _write_npy, ".h5": _write_hdf5, ".hdf5": _write_hdf5, ".zarr": _write_zarr}.get(kind)
    if writer is None:
        raise PhaseError(f"label volumes are written as .npy, .h5 or .zarr, not {kind!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    writer(partial, source, bounds, threads)
    if path.is_dir():
        shutil.rmtree(path)
    partial.replace(path)


def _write_npy(partial: Path, source: Rasterizer, bounds: list[tuple[int, int]], threads: int) -> None:
    step = max(1, threads)
    with open(partial, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": source.grid.shape})
        for start in range(0, len(bounds), step):  # a batch of slabs in parallel, written in order
            for slab in map_slabs(source.slab, bounds[start : start + step], threads):
                f.write(slab.tobytes())


def _write_hdf5(partial: Path, source: Rasterizer, bounds: list[tuple[int, int]], threads: int) -> None:
    import h5py

    shape = source.grid.shape
    with h5py.File(partial, "w") as f:  # one slice per chunk: scoring reads slabs with halos
        dataset = f.create_dataset(
            "labels", shape=shape, dtype="u1", chunks=(1, *shape[1:]), compression="gzip", compression_opts=1
        )
        for z0, z1 in bounds:
            dataset[z0:z1] = source.slab(z0, z1)


def _write_zarr(partial: Path, source: Rasterizer, bounds: list[tuple[int, int]], threads: int) -> None:
    import zarr

    shape = source.grid.shape
    shutil.rmtree(partial, ignore_errors=True)
    array = zarr.create_array(store=str(partial), shape=shape, dtype="uint8", chunks=(1, *shape[1:]), zarr_format=3)
    for z0, z1 in bounds:
        array[z0:z1] = source.slab(z0, z1)
