"""Every bundled phase and every conformance phase, each with a submission that scores, for the
preflight's tests; and ``scramble``, which rewrites a phase's ground truth with other voxel
values (same files, shapes, data types and geometry), so a test can show that the public phase
does not depend on a single voxel of it.

``BUILDERS`` maps a name to ``build(root) -> (phase, submission)``; a builder writes into
``root`` (a bundled phase is copied, so that it can be scrambled).
"""

import shutil
from pathlib import Path

import numpy as np
from helpers.annotators_files import write_phase as write_annotator_phase
from helpers.annotators_files import write_predictions
from helpers.grading import FIXTURES, ROOT
from helpers.tomo import PHANTOMS, SUBMISSIONS, case, foam_phase, write_volume

CELLMAP_CASES = sorted(p.name for p in (FIXTURES / "cellmap" / "cases").iterdir())
FISBE_CASES = sorted(p.name for p in (FIXTURES / "fisbe" / "cases").iterdir() if p.is_dir())


def _copy(source: Path, root: Path) -> Path:
    shutil.copytree(source, root, symlinks=True)
    return root


def _bundled(phase: str, submission: str):
    return lambda root: (_copy(ROOT / phase, root / "phase"), ROOT / submission)


def _cellmap(name: str):
    def build(root: Path):
        source = FIXTURES / "cellmap" / "cases" / name
        phase = root / "phase"
        shutil.copytree(source / "truth.zarr", phase / "truth.zarr")
        shutil.copy(source / "manifest.csv", phase / "manifest.csv")
        (phase / "phase.yaml").write_text("suite: cellmap\n")
        return phase, _copy(source / "submission.zarr", root / "input" / "submission.zarr").parent

    return build


def _fisbe(name: str):
    def build(root: Path):
        from test_fisbe_parity import make_phase

        return make_phase(root, name)

    return build


def _multiclass(root: Path):
    from test_multiclass_parity import make_phase, write_model

    phase = make_phase(root / "phase", "suite: multiclass\nclasses: 5\nmax_models: 2\nbaseline: A\n")
    write_model(root / "input" / "A", "A", ".mha")
    write_model(root / "input" / "B", "B", ".nii.gz")
    return phase, root / "input"


def _segmentation(group: str):
    def build(root: Path):
        from test_segmentation_parity import INSTANCE, KIT, SEMANTIC, write_image

        for name in SEMANTIC if group == "semantic" else INSTANCE:
            data = np.load(KIT / "cases" / f"{name}.npz")
            write_image(data["gt"], data["spacing"], root / "phase" / "labels" / f"{name}.mha")
            write_image(data["pred"], data["spacing"], root / "input" / f"{name}.mha")
        head = "classes: [1, 2, 3, 4, 5]\n" if group == "semantic" else "input: instances\n"
        (root / "phase" / "phase.yaml").write_text(f"suite: segmentation\n{head}")
        return root / "phase", root / "input"

    return build


def _annotators(root: Path):
    phase = write_annotator_phase(root / "phase", "suite: annotators\neval_class: 1\nreport: false\n")
    return phase, write_predictions(root / "input" / "predictions_unet").parent


def _tomo_foam(labels_format: str | None):
    def build(root: Path):
        phase = foam_phase(root / "phase", labels_format=labels_format, copies=len(SUBMISSIONS))
        submission = root / "input"
        submission.mkdir()
        for k, name in enumerate(SUBMISSIONS):
            for phantom in PHANTOMS:
                write_volume(submission / f"{phantom}-{k}.packed.h5", case(phantom)[f"sub__{name}"].astype(np.uint8))
        return phase, submission

    return build


def _tomo_fuelcell(root: Path):
    from test_tomo_fuelcell import SUB_A, SUB_B, SUB_C, TRUTH_A, TRUTH_B, TRUTH_C, make_phase, stack

    phase = make_phase(root / "phase", {"A": TRUTH_A, "B": TRUTH_B, "C": TRUTH_C})
    submission = root / "input"
    submission.mkdir()
    for step, cells in (("A", SUB_A), ("B", SUB_B), ("C", SUB_C)):
        write_volume(submission / f"{step}.npy", stack(cells))
    return phase, submission


def _detection(root: Path):
    from helpers.detection_cases import lay_out

    return lay_out(root, "suite: detection\n", cases=["case_02", "case_04", "case_12", "case_17"])


BUILDERS = {
    "ground-truth": _bundled("ground-truth", "examples/cellmap/submission"),
    "examples/multiclass": _bundled("examples/multiclass/phase", "examples/multiclass/submission"),
    "examples/annotators": _bundled("examples/annotators/phase", "examples/annotators/submission"),
    "container/grand-challenge-jobs": _bundled(
        "container/scenarios/grand-challenge-jobs/ground-truth", "container/scenarios/grand-challenge-jobs/input"
    ),
    **{f"cellmap/{name}": _cellmap(name) for name in CELLMAP_CASES},
    **{f"fisbe/{name}": _fisbe(name) for name in FISBE_CASES},
    "multiclass": _multiclass,
    "segmentation/semantic": _segmentation("semantic"),
    "segmentation/instances": _segmentation("instances"),
    "annotators": _annotators,
    "tomo_foam/spheres": _tomo_foam(None),
    "tomo_foam/labels.npy": _tomo_foam(".npy"),
    "tomo_foam/labels.zarr": _tomo_foam(".zarr"),
    "tomo_fuelcell": _tomo_fuelcell,
    "detection": _detection,
}


# --------------------------------------------------------------------------------------------
# Other ground truth on the same grids


def scramble(phase: Path, seed: int = 7) -> int:
    """Rewrite every array of the phase's ground truth (everything but ``phase.yaml`` and a
    CSV manifest) with random values of its data type, keeping its files, shapes, chunks and
    geometry; returns how many arrays were rewritten."""
    rng = np.random.default_rng(seed)
    count, pending = 0, [phase]
    while pending:
        folder = pending.pop()
        for path in sorted(folder.iterdir()):
            if path.is_dir() and _is_zarr_array(path):
                count += _scramble_zarr(path, rng)
            elif path.is_dir():
                pending.append(path)
            elif path.name not in ("phase.yaml", "zarr.json") and not path.name.startswith(".") and path.suffix != ".csv":
                count += _scramble_file(path, rng)
    return count


def _random(rng, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "f":
        return rng.random(shape).astype(dtype)
    high = min(int(np.iinfo(dtype).max), 1000)
    return rng.integers(0, high + 1, shape).astype(dtype)


def _is_zarr_array(path: Path) -> bool:
    from evaluation.readers import zarr_store

    return zarr_store.node_kind(path) == zarr_store.ARRAY


def _scramble_zarr(path: Path, rng) -> int:
    import zarr

    array = zarr.open_array(str(path), mode="r+")
    array[...] = _random(rng, array.shape, array.dtype)
    return 1


def _scramble_file(path: Path, rng) -> int:
    name = path.name.lower()
    if name.endswith((".mha", ".nii", ".nii.gz", ".nrrd", ".png")):
        import SimpleITK as sitk

        image = sitk.ReadImage(str(path))
        other = sitk.GetImageFromArray(_random(rng, *_shape_dtype(sitk.GetArrayViewFromImage(image))))
        other.CopyInformation(image)
        sitk.WriteImage(other, str(path))
    elif name.endswith((".tif", ".tiff")):
        import tifffile

        values = tifffile.imread(path)
        tifffile.imwrite(path, _random(rng, values.shape, values.dtype))
    elif name.endswith(".npy"):
        values = np.load(path, mmap_mode="r")
        np.save(path, _random(rng, values.shape, values.dtype))
    elif name.endswith((".h5", ".hdf", ".hdf5")):
        import h5py

        with h5py.File(path, "r+") as f:
            datasets = []
            f.visititems(lambda key, item: datasets.append(item) if isinstance(item, h5py.Dataset) else None)
            for dataset in datasets:
                dataset[...] = _random(rng, dataset.shape, dataset.dtype)
    else:
        raise AssertionError(f"no scrambler for {path.name}")
    return 1


def _shape_dtype(array) -> tuple:
    return array.shape, array.dtype
