"""Turn the annotators conformance cases (.npz, 96x96 uint8) into the files a phase and a
submission really hold: one folder per annotator with one image per case, predictions per
model, in TIFF, PNG and MetaImage (so every reader the suite relies on is exercised)."""

import json
from pathlib import Path

import numpy as np
import SimpleITK as sitk
import tifffile
from helpers.grading import FIXTURES

CASES = FIXTURES / "annotators" / "cases"
EXPECTED = json.loads((FIXTURES / "annotators" / "expected.json").read_text())["cases"]
FORMATS = (".tif", ".png", ".mha")


def arrays(case: str) -> dict[str, np.ndarray]:
    with np.load(CASES / f"{case}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in ("ann0", "ann1", "ann2", "pred")}


def write_image(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".tif":
        tifffile.imwrite(path, array)
    else:
        sitk.WriteImage(sitk.GetImageFromArray(array), str(path), useCompression=path.suffix == ".mha")


def write_phase(root: Path, phase_yaml: str, cases=None, folders=("annotator_A0", "annotator_A1", "annotator_A2")) -> Path:
    """annotations/<folder>/<case>.<fmt>, annotator i always in format FORMATS[i]."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "phase.yaml").write_text(phase_yaml)
    for case in cases or sorted(EXPECTED):
        data = arrays(case)
        for i, folder in enumerate(folders):
            write_image(root / "annotations" / folder / f"{case}{FORMATS[i % 3]}", data[f"ann{i}"])
    return root


def write_predictions(folder: Path, cases=None, transform=lambda a: a, suffix: str = "_segPred") -> Path:
    """<case><suffix>.<fmt> for every case, formats rotating over the cases."""
    for k, case in enumerate(cases or sorted(EXPECTED)):
        write_image(folder / f"{case}{suffix}{FORMATS[k % 3]}", transform(arrays(case)["pred"]))
    return folder
