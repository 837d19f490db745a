"""The suites' tests' malformed uploads, made from the conformance cases (``public_phases``'
builders, then one thing broken): what ``test_cli.py`` and each suite's tests reject, for the
preflight's comparison with grading. ``MALFORMED`` maps a name to ``build(root) -> (phase,
submission)``.
"""

import json
import shutil
import zipfile
from pathlib import Path

import h5py
import numpy as np
from helpers.annotators_files import arrays, write_image, write_predictions
from helpers.annotators_files import write_phase as write_annotator_phase
from helpers.public_phases import BUILDERS
from helpers.tomo import PHANTOMS, case, foam_phase, write_volume


def _then(name: str, change):
    """The conformance phase ``name`` with its submission changed by ``change(submission)``."""

    def build(root: Path):
        phase, submission = BUILDERS[name](root)
        if not submission.is_relative_to(root):  # a bundled example: changed in a copy
            submission = shutil.copytree(submission, root / "input-copy")
        change(submission)
        return phase, submission

    return build


def _emptied(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.mkdir()


def _zipped(entries: dict[str, str]):
    def change(folder: Path) -> None:
        _emptied(folder)
        with zipfile.ZipFile(folder / "submission.zip", "w") as archive:
            for name, data in entries.items():
                archive.writestr(name, data)

    return change


def _pickle_codec(folder: Path) -> None:
    meta = folder / "submission.zarr" / "crop101" / "mito" / ".zarray"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "filters": [{"id": "pickle"}]}))


def _corrupt_chunk(folder: Path) -> None:
    next((folder / "submission.zarr" / "crop102" / "mito").rglob("0/0/0")).write_bytes(b"garbage" * 10)


def _multiclass_broken_cases(folder: Path) -> None:
    from test_multiclass_parity import load_cases, write_label_map

    for path in folder.iterdir():  # one model, at the top
        if path.name == "B":
            shutil.rmtree(path)
    for path in (folder / "A").iterdir():
        path.rename(folder / path.name)
    (folder / "A").rmdir()
    predictions = load_cases()["pred_A"]
    (folder / "img1.mha").unlink()
    write_label_map(folder / "img1.nii.gz", predictions[1], spacing=(1.0, 1.0))
    (folder / "img3.mha").unlink()
    np.save(folder / "img3.npy", predictions[3] + 0.5)


def _segmentation_changes(change):
    def mutate(folder: Path) -> None:
        import SimpleITK as sitk

        path = sorted(folder.glob("*.mha"))[0]
        image = sitk.ReadImage(str(path))
        changed = change(image)
        sitk.WriteImage(changed, str(path))

    return mutate


def _other_spacing(image):
    image.SetSpacing(tuple(s * 2 for s in image.GetSpacing()))
    return image


def _label_nine(image):
    import SimpleITK as sitk

    values = sitk.GetArrayFromImage(image)
    values.flat[0] = 9
    other = sitk.GetImageFromArray(values)
    other.CopyInformation(image)
    return other


def _annotator_shape(folder: Path) -> None:
    wrong = next(folder.rglob("blob3_segPred*"))
    wrong.unlink()
    write_image(wrong.parent / "blob3_segPred.tif", np.zeros((90, 96), np.uint8))


def _annotator_twins(root: Path):
    phase = write_annotator_phase(root / "phase", "suite: annotators\neval_class: 1\nreport: false\n")
    write_predictions(root / "input" / "run1_unet")
    write_predictions(root / "input" / "run2_unet")
    return phase, root / "input"


def _annotator_double(folder: Path) -> None:
    write_image(next(folder.iterdir()) / "blob3.png", arrays("blob3")["pred"])


def _fisbe_prediction(change):
    def mutate(folder: Path) -> None:
        path = sorted(folder.glob("*.hdf"))[0]
        with h5py.File(path, "r") as f:
            data = f["volumes/labels"][...].astype(np.int32)
        with h5py.File(path, "w") as f:
            f["volumes/labels"] = change(data)

    return mutate


def _tomo_foam(problem: str):
    def build(root: Path):
        phase = foam_phase(root / "phase")
        submission = root / "input"
        submission.mkdir()
        for name in PHANTOMS:
            write_volume(submission / f"{name}.npy", case(name)["sub__perfect"])
        if problem == "shape":
            write_volume(submission / "foamA.npy", case("foamA")["sub__perfect"][:, :, :95])
        elif problem == "pickle":
            with open(submission / "foamA.npy", "wb") as f:
                np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        elif problem == "missing":
            (submission / "foamB_zoom.npy").unlink()
        else:
            (submission / "foamA.npy").unlink()
            with h5py.File(submission / "foamA.h5", "w") as f:
                f["a"] = np.zeros((48, 96, 96), np.uint8)
                f["b"] = np.zeros((48, 96, 96), np.uint8)
        return phase, submission

    return build


def _fuelcell_slices(folder: Path) -> None:
    values = np.load(folder / "A.npy")
    np.save(folder / "A.npy", values[:9])


MALFORMED = {
    # test_cli.py
    "cellmap: empty folder": _then("cellmap/a_perfect_instance", _emptied),
    "cellmap: zip with a path traversal": _then(
        "cellmap/a_perfect_instance", _zipped({"crop101/.zgroup": "{}", "../../escaped.txt": "x"})
    ),
    "cellmap: zip without a zarr": _then("cellmap/a_perfect_instance", _zipped({"readme.txt": "my predictions"})),
    "cellmap: groups that name no test crop": _then(
        "cellmap/a_perfect_instance", lambda f: (f / "submission.zarr" / "crop101").rename(f / "submission.zarr" / "volume_a")
    ),
    "cellmap: pickle codec": _then("cellmap/a_perfect_instance", _pickle_codec),
    "cellmap: one corrupt chunk": _then("cellmap/b_split_merge_jitter", _corrupt_chunk),
    "cellmap: the example's upload without its crops": _then("ground-truth", lambda f: _zipped({"crop999/.zgroup": "{}"})(f)),
    # test_multiclass.py
    "multiclass: a missing case": _then("multiclass", lambda f: (shutil.rmtree(f / "B"), (f / "A" / "img2.mha").unlink())),
    "multiclass: two broken cases": _then("multiclass", _multiclass_broken_cases),
    "multiclass: a file that matches no case": _then(
        "examples/multiclass",
        lambda f: shutil.copy(next(f.rglob("*.nii.gz")), next(f.rglob("*.nii.gz")).with_name("img9.nii.gz")),
    ),
    "multiclass: too many models": _then("multiclass", lambda f: shutil.copytree(f / "A", f / "C")),
    # test_segmentation_suite.py
    "segmentation: a prediction on another grid": _then("segmentation/semantic", _segmentation_changes(_other_spacing)),
    "segmentation: a label that is no class": _then("segmentation/semantic", _segmentation_changes(_label_nine)),
    # test_annotators_suite.py
    "annotators: a prediction of another shape": _then("annotators", _annotator_shape),
    "annotators: two folders give one model id": _annotator_twins,
    "annotators: two predictions of one image": _then("annotators", _annotator_double),
    # test_fisbe_cli.py
    "fisbe: no prediction matches a sample": _then(
        "fisbe/a_perfect", lambda f: [p.rename(p.with_name("sample-7.hdf")) for p in sorted(f.glob("*.hdf"))[:1]]
    ),
    "fisbe: negative ids": _then("fisbe/a_perfect", _fisbe_prediction(lambda d: d - 5)),
    "fisbe: larger and smaller than the image": _then(
        "fisbe/a_perfect", _fisbe_prediction(lambda d: np.pad(d, ((0, 2), (0, 0), (0, 0)))[:, :-3])
    ),
    "fisbe: a 2-D prediction": _then("fisbe/a_perfect", _fisbe_prediction(lambda d: d[0])),
    # test_tomo_foam.py, test_tomo_fuelcell.py
    **{f"tomo_foam: {problem}": _tomo_foam(problem) for problem in ("shape", "pickle", "missing", "two_datasets")},
    "tomo_fuelcell: a wrong slice count": _then("tomo_fuelcell", _fuelcell_slices),
}
