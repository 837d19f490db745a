"""Small 2-D multi-class instance maps (ids 1-49: class ``cell``, 101-149: class ``nucleus``)
for test/fixtures/segmentation/instances: the cases panoptica 2.1.7 (instance input, one label
group per class) and pycocotools 2.0.11 (COCOeval, segm) were run on.

Each case is a truth and a prediction map of instance ids, saved as .npy: disks of several
sizes, the prediction shifting some, missing some, splitting some, adding false
positives; one case has no nucleus in the truth, one no prediction at all.
"""

from pathlib import Path

import numpy as np

SHAPE = (72, 80)
CELL, NUCLEUS = range(1, 50), range(101, 150)


def _disk(array: np.ndarray, centre, radius: float, value: int) -> None:
    y, x = np.ogrid[: array.shape[0], : array.shape[1]]
    array[(y - centre[0]) ** 2 + (x - centre[1]) ** 2 <= radius**2] = value


def _case(seed: int, nuclei: bool = True, predicted: bool = True) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth, pred = np.zeros(SHAPE, np.uint16), np.zeros(SHAPE, np.uint16)
    cell, nucleus = iter(CELL), iter(NUCLEUS)
    for row in range(3):
        for column in range(4):
            centre = (12 + 22 * row, 10 + 19 * column)
            radius = float(rng.choice([1.5, 2.5, 4.0, 6.5]))
            kind = nucleus if nuclei and (row + column) % 3 == 0 else cell
            value = next(kind)
            _disk(truth, centre, radius, value)
            fate = rng.integers(0, 6)
            if not predicted or fate == 0:  # missed
                continue
            shift = (int(rng.integers(-2, 3)), int(rng.integers(-2, 3))) if fate < 4 else (0, 0)
            moved = (centre[0] + shift[0], centre[1] + shift[1])
            if fate == 5 and radius > 3:  # split in two halves
                _disk(pred, moved, radius, value)
                half = pred == value
                half[:, : moved[1]] = False
                pred[half] = value + 30
            else:
                _disk(pred, moved, radius * float(rng.uniform(0.8, 1.2)), value + 10)
    if predicted:  # a false positive of each class
        _disk(pred, (70, 4), 1.2, 140)
        _disk(pred, (4, 76), 2.0, 45)
    return truth, pred


def cases() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {
        "case_a": _case(1),
        "case_b": _case(2),
        "case_c": _case(3, nuclei=False),
        "case_d": _case(4, predicted=False),
        "case_e": _case(5),
    }


def write_cases(truth_dir: Path, pred_dir: Path) -> list[str]:
    truth_dir.mkdir(parents=True, exist_ok=True)
    pred_dir.mkdir(parents=True, exist_ok=True)
    found = cases()
    for name, (truth, pred) in found.items():
        np.save(truth_dir / f"{name}.npy", truth)
        np.save(pred_dir / f"{name}.npy", pred)
    return list(found)
