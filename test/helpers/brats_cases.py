"""Small BraTS-like cases (labels 1 NETC, 2 SNFH, 3 ET, 4 RC) written as NIfTI by nibabel, as
the BraTS data are: the conformance cases of test/fixtures/segmentation/brats, on which
BraTS_evaluation 0.0.10 (panoptica 2.1.7) and the BraTS 2023 lesion-wise code were run.

Each case is designed in (z, y, x) order, as the grader and SimpleITK read it, and written in
nibabel's (x, y, z) order with the spacing (x, y, z) in the header. ``write_cases`` makes the
truth and prediction folders; the names carry the BraTS subject ids the reference's
``brats-evaluate`` pairs files by.
"""

from pathlib import Path

import numpy as np

SHAPE = (28, 40, 44)  # z, y, x


def ball(shape, centre, radii) -> np.ndarray:
    """An ellipsoid mask around ``centre`` with semi-axes ``radii`` (z, y, x)."""
    grid = np.indices(shape, dtype=np.float64)
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grid, centre, radii)) <= 1.0


def tumour(labels: np.ndarray, centre, size: float, et_ring: bool = True) -> None:
    """A glioma-like lesion: SNFH (2) around ET (3) around NETC (1), painted into ``labels``."""
    labels[ball(labels.shape, centre, (size, size * 1.2, size * 1.1))] = 2
    labels[ball(labels.shape, centre, (size * 0.6, size * 0.7, size * 0.65))] = 3 if et_ring else 1
    labels[ball(labels.shape, centre, (size * 0.3, size * 0.35, size * 0.3))] = 1


def blob(labels: np.ndarray, centre, radius: float, label: int) -> None:
    labels[ball(labels.shape, centre, (radius, radius, radius))] = label


def cases() -> dict[str, tuple[np.ndarray, np.ndarray | None, tuple[float, float, float]]]:
    """Subject id -> (truth, prediction or None for a missing file, spacing (z, y, x))."""
    found = {}
    rng = np.random.default_rng(23)

    # 1: one large tumour, prediction shifted by a voxel and with an ET blob too many
    truth = np.zeros(SHAPE, np.uint8)
    tumour(truth, (14, 20, 22), 7)
    pred = np.roll(truth, 1, axis=2)
    blob(pred, (4, 6, 6), 1.6, 3)
    found["00001-000"] = (truth, pred, (1.0, 1.0, 1.0))

    # 2: empty truth, two false-positive lesions
    truth = np.zeros(SHAPE, np.uint8)
    pred = np.zeros(SHAPE, np.uint8)
    tumour(pred, (10, 12, 12), 4)
    blob(pred, (20, 30, 32), 2.2, 3)
    found["00002-000"] = (truth, pred, (1.0, 1.0, 1.0))

    # 3: empty prediction, truth with two lesions
    truth = np.zeros(SHAPE, np.uint8)
    tumour(truth, (9, 12, 14), 5)
    tumour(truth, (19, 28, 30), 4, et_ring=False)
    found["00003-000"] = (truth, np.zeros(SHAPE, np.uint8), (1.0, 1.0, 1.0))

    # 4: both empty
    found["00004-000"] = (np.zeros(SHAPE, np.uint8), np.zeros(SHAPE, np.uint8), (1.0, 1.0, 1.0))

    # 5: several lesions of several sizes (metastases), one missed, one split, one merged by a
    #    bridge, small satellites near a large one (the 2023 dilation joins them), a recurrence
    truth = np.zeros(SHAPE, np.uint8)
    tumour(truth, (8, 10, 10), 4.5)
    blob(truth, (8, 10, 17), 1.0, 3)  # satellite two voxels from the first lesion's edema
    tumour(truth, (20, 28, 30), 5)
    blob(truth, (6, 32, 8), 2.0, 3)  # missed in the prediction
    blob(truth, (22, 8, 34), 1.5, 3)
    blob(truth, (14, 20, 36), 0.9, 3)  # a few voxels
    blob(truth, (14, 32, 20), 2.0, 4)  # resection cavity
    pred = truth.copy()
    pred[ball(SHAPE, (6, 32, 8), (2.0, 2.0, 2.0))] = 0
    pred[20, :, :][pred[20, :, :] != 0] = 0  # the second tumour cut in two halves
    grow = ball(SHAPE, (22, 8, 34), (2.5, 2.5, 2.5)) & (pred == 0)
    pred[grow] = 3
    pred[rng.random(SHAPE) < 0.004] = 2  # speckle: single-voxel false positives
    found["00005-000"] = (truth, pred, (1.0, 1.0, 1.0))

    # 6: touching lesions (a diagonal contact joins them under 26-connectivity) on an
    #    anisotropic grid: distances depend on which spacing belongs to which axis
    truth = np.zeros(SHAPE, np.uint8)
    blob(truth, (10, 14, 14), 3.0, 3)
    blob(truth, (14, 18, 18), 2.0, 3)
    truth[13, 17, 17] = 3  # a diagonal bridge
    tumour(truth, (18, 28, 30), 5)
    pred = np.zeros(SHAPE, np.uint8)
    blob(pred, (10, 15, 14), 3.0, 3)
    blob(pred, (15, 18, 19), 2.0, 3)
    tumour(pred, (18, 27, 31), 4.5)
    found["00006-000"] = (truth, pred, (2.5, 0.8, 1.2))

    # 7: a prediction label no class has (5): the reference's evaluator raises
    truth = np.zeros(SHAPE, np.uint8)
    tumour(truth, (14, 20, 22), 6)
    pred = truth.copy()
    blob(pred, (4, 4, 4), 1.5, 5)
    found["00007-000"] = (truth, pred, (1.0, 1.0, 1.0))

    # 8: no prediction file at all
    truth = np.zeros(SHAPE, np.uint8)
    tumour(truth, (14, 20, 22), 6)
    found["00008-000"] = (truth, None, (1.0, 1.0, 1.0))
    return found


def write_nifti(labels: np.ndarray, spacing_zyx, path: Path) -> None:
    import nibabel as nib

    spacing_xyz = tuple(float(s) for s in spacing_zyx[::-1])
    image = nib.Nifti1Image(np.ascontiguousarray(labels.transpose(2, 1, 0)), np.diag([*spacing_xyz, 1.0]))
    image.header.set_data_dtype(np.uint8)
    image.header.set_zooms(spacing_xyz)
    nib.save(image, str(path))


def binary(labels: np.ndarray | None) -> np.ndarray | None:
    """Every tumour label as 1 (a single-label task such as MenRT's GTV); other labels kept."""
    if labels is None:
        return None
    return np.where(np.isin(labels, (1, 2, 3, 4)), 1, labels).astype(np.uint8)


def write_cases(truth_dir: Path, pred_dir: Path, prefix: str = "BraTS-GLI-", single_label: bool = False) -> list[str]:
    """Writes every case (with ``single_label``, every tumour label as 1); returns the subject ids."""
    truth_dir.mkdir(parents=True, exist_ok=True)
    pred_dir.mkdir(parents=True, exist_ok=True)
    found = cases()
    for subject, (truth, pred, spacing) in found.items():
        if single_label:
            truth, pred = binary(truth), binary(pred)
        write_nifti(truth, spacing, truth_dir / f"{prefix}{subject}.nii.gz")
        if pred is not None:
            write_nifti(pred, spacing, pred_dir / f"{prefix}{subject}.nii.gz")
    return list(found)
