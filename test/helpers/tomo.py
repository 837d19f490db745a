"""Conformance cases of the TomoChallenge kit, written in the formats the tomo suites read.

The kit ships its phantoms as ``.npz`` (void list, label volume, 14 submissions each); the
grader reads HDF5 void lists, label volumes and submissions as bit-packed HDF5, TIFF, HDF5,
``.npy``, zarr or MetaImage. These helpers convert, so the tests exercise the native readers.
"""

import json
from pathlib import Path

import h5py
import numpy as np

from evaluation.readers.bitpack import pack

TOMO = Path(__file__).resolve().parent.parent / "fixtures" / "tomo"
MANIFEST = json.loads((TOMO / "manifest.json").read_text())
EXPECTED = json.loads((TOMO / "expected-foam.json").read_text())
PHANTOMS = [p["name"] for p in MANIFEST["phantoms"]]
SUBMISSIONS = MANIFEST["phantoms"][0]["submissions"]


def case(name: str) -> dict:
    with np.load(TOMO / f"{name}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def geometry(name: str) -> dict:
    p = next(p for p in MANIFEST["phantoms"] if p["name"] == name)
    return {"nx": p["nx"], "ny": p["ny"], "nz": p["nz"], "voxel_size": p["voxsize"], "cx": p["cx"], "cy": p["cy"]}


def write_spheres(path: Path, records: np.ndarray, sizes: np.ndarray | None = None) -> None:
    with h5py.File(path, "w") as f:
        f["spheres"] = np.asarray(records, np.float32)
        if sizes is not None:
            f["sizes"] = np.asarray(sizes, np.float32)


def write_volume(path: Path, volume: np.ndarray) -> Path:
    """``volume`` in the format of ``path``'s suffix; ``.packed.h5`` = the challenge's bit-packed
    file (dataset ``vol``, gzip 1, ``description`` attribute), written as ``<stem>.h5``."""
    name = path.name
    if name.endswith(".packed.h5"):
        path = path.with_name(name[: -len(".packed.h5")] + ".h5")
        with h5py.File(path, "w") as f:
            dataset = f.create_dataset("vol", data=pack(volume), compression="gzip", compression_opts=1)
            dataset.attrs["description"] = "conformance case"
    elif name.endswith(".h5"):
        with h5py.File(path, "w") as f:
            f.create_dataset("volume", data=volume, compression="gzip", chunks=True)
    elif name.endswith(".npy"):
        np.save(path, volume)
    elif name.endswith((".tif", ".tiff")):
        import tifffile

        tifffile.imwrite(path, volume)
    elif name.endswith(".zarr"):
        import zarr

        array = zarr.create_array(store=str(path), shape=volume.shape, dtype=volume.dtype, chunks=(8, *volume.shape[1:]))
        array[...] = volume
    elif name.endswith(".mha"):
        import SimpleITK as sitk

        sitk.WriteImage(sitk.GetImageFromArray(volume), str(path))
    else:
        raise ValueError(name)
    return path


def foam_phase(folder: Path, labels_format: str | None = None, extra: str = "", copies: int | None = None) -> Path:
    """A tomo_foam phase holding the three conformance phantoms: void lists plus grids, or
    (``labels_format`` = '.npy', '.zarr', ...) precomputed label volumes in that format.
    ``copies`` = k lists each phantom k times, as cases ``<phantom>-0`` ... ``<phantom>-<k-1>``
    sharing one truth file, so that one run can score several submissions of a phantom."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["suite: tomo_foam", "phantoms:"]
    for name in PHANTOMS:
        data = case(name)
        g = geometry(name)
        if labels_format:
            truth = "labels: " + write_volume(folder / f"{name}_labels{labels_format}", data["gt"]).name
        else:
            write_spheres(folder / f"{name}.h5", data["spheres"])
            truth = f"spheres: {name}.h5"
        grid = f"grid: {{nx: {g['nx']}, ny: {g['ny']}, nz: {g['nz']}, voxel_size: {g['voxel_size']!r}, cx: {g['cx']!r}, cy: {g['cy']!r}}}"
        for case_name in [name] if copies is None else [f"{name}-{k}" for k in range(copies)]:
            lines += [f"  {case_name}:", f"    {truth}", f"    {grid}"]
    (folder / "phase.yaml").write_text("\n".join(lines) + "\n" + extra)
    return folder
