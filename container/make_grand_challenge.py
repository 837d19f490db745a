"""Writes container/scenarios/grand-challenge-jobs/: a Grand-Challenge evaluation input with two algorithm
jobs (UUID-named .mha outputs, jobs listed in reverse order of their cases) and a multiclass
phase whose label maps carry a real geometry. Rerun to regenerate; the expected metrics.json
is what `python -m evaluation` writes for it (checked by test_platforms.py)."""

import json
import shutil
import uuid
from pathlib import Path

import numpy as np
import SimpleITK as sitk

HERE = Path(__file__).parent / "scenarios" / "grand-challenge-jobs"
SPACING, ORIGIN = (0.8, 0.8, 2.5), (-100.0, 20.0, 5.0)


def image(array: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    itk = sitk.GetImageFromArray(array)
    itk.SetSpacing(SPACING)
    itk.SetOrigin(ORIGIN)
    sitk.WriteImage(itk, str(path), useCompression=True)


def socket(slug: str, relative_path: str, pk: int) -> dict:
    """A socket as rse-grand-challenge's ComponentInterfaceSerializer writes it."""
    return {
        "title": slug.replace("-", " ").title(),
        "description": "",
        "slug": slug,
        "kind": "Segmentation",
        "pk": pk,
        "default_value": None,
        "super_kind": "Image",
        "relative_path": relative_path,
        "overlay_segments": [],
        "look_up_table": None,
    }


def value(socket: dict, name: str) -> dict:
    """An image value as ComponentInterfaceValueSerializer writes it: the socket under both
    ``interface`` and ``socket`` (rse-grand-challenge c49ef8bcb)."""
    return {
        "pk": 1,
        "interface": socket,
        "socket": socket,
        "value": None,
        "file": None,
        "image": {"pk": str(uuid.uuid4()), "name": name},
    }


def job(pk: str, case: str) -> dict:
    """One algorithm job as JobSerializer writes it (algorithms/serializers.py)."""
    return {
        "pk": pk,
        "url": f"https://grand-challenge.org/algorithms/example/jobs/{pk}/",
        "api_url": f"https://grand-challenge.org/api/v1/algorithms/jobs/{pk}/",
        "algorithm_image": "https://grand-challenge.org/api/v1/algorithms/images/00000000-0000-0000-0000-000000000001/",
        "inputs": [value(socket("ct-image", "images/ct", 1), f"{case}.mha")],
        "outputs": [value(socket("liver-segmentation", "images/liver-segmentation", 2), "out.mha")],
        "status": "Succeeded",
        "hanging_protocol": None,
        "optional_hanging_protocols": [],
        "view_content": {},
        "exec_duration": "00:00:12.500000",
        "invoke_duration": None,
    }


def main() -> None:
    shutil.rmtree(HERE, ignore_errors=True)
    rng = np.random.default_rng(3)
    truth_dir, jobs = HERE / "ground-truth", []
    (truth_dir / "labels").mkdir(parents=True)
    (truth_dir / "phase.yaml").write_text("suite: multiclass\nclasses: {background: 0, liver: 1, tumour: 2}\n")
    for number, case in enumerate(["case_b", "case_a"]):
        truth = np.zeros((8, 32, 32), np.uint8)
        truth[1:7, 4:28, 4:28] = 1
        truth[3:5, 10:16, 10 : 16 + 4 * number] = 2
        prediction = truth.copy()
        prediction[rng.random(truth.shape) < 0.05] = 0
        prediction[2:4, 12:14, 20:24] = 2
        image(truth, truth_dir / "labels" / f"{case}.mha")
        pk = str(uuid.UUID(int=int(rng.integers(1 << 62))))
        image(prediction, HERE / "input" / pk / "output" / "images" / "liver-segmentation" / f"{uuid.uuid4()}.mha")
        jobs.append(job(pk, case))
    (HERE / "input" / "predictions.json").write_text(json.dumps(jobs, indent=1))


if __name__ == "__main__":
    main()
