"""The detection suite's conformance cases: how they were made, and how a test lays them out.

``test/fixtures/detection/`` holds 25 detection-map cases (``cases/case_XX_detection_map`` and
``case_XX_label``, 20x64x64, NIfTI; ``case_17`` as MetaImage; ``case_05`` and ``case_17`` with
3.0 x 0.5 x 0.5 mm spacing), 8 softmax cases (``softmax/pred/sm_XX``, ``softmax/labels/
sm_XX_label``), tiny inline edge cases (``edge.npz``) and ``expected.json``, what picai_eval 1.4.13
and report_guided_annotation 0.3.4, run unmodified, computed on them (the fixture folder's
README). The arrays are made by ``det_cases``, ``softmax_cases`` and ``edge_arrays`` below
(seeded; ``write_fixtures`` writes them as the fixture files were written); ``lay_out`` copies
them into a phase and a submission as the suite reads them (``labels/<case>.<ext>`` and
``<case>.<ext>``).
"""

import json
import shutil
from pathlib import Path

import numpy as np
import SimpleITK as sitk
from helpers.grading import FIXTURES

FIXTURE = FIXTURES / "detection"
SHAPE = (20, 64, 64)
SM_SHAPE = (20, 64, 64)
FPR_POINTS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 5.0]  # where expected.json samples the FROC
SUBSET = [
    "case_02",
    "case_03",
    "case_04",
    "case_06",
    "case_07",
    "case_09",
    "case_11",
    "case_12",
    "case_14",
    "case_18",
    "case_23",
    "case_24",
]  # expected.json's subject_list_subset


def box(a, z0, z1, y0, y1, x0, x1, v):
    a[z0:z1, y0:y1, x0:x1] = v


def det_cases():
    """Return dict id -> (det float32, label uint8, spacing zyx, note)."""
    rng = np.random.default_rng(20240607)
    out = {}

    def new():
        return np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.uint8)

    # 00 benign, empty detection map
    d, l = new()
    out["case_00"] = (d, l, "benign, empty detection map")

    # 01 benign, two FP blobs
    d, l = new()
    box(d, 2, 4, 5, 9, 5, 9, 0.3)
    box(d, 10, 13, 40, 45, 40, 45, 0.8)
    out["case_01"] = (d, l, "benign, two false-positive blobs 0.3 / 0.8")

    # 02 one lesion, one good candidate
    d, l = new()
    box(l, 8, 12, 20, 28, 20, 28, 1)
    box(d, 8, 12, 21, 29, 20, 28, 0.9)
    out["case_02"] = (d, l, "one lesion, one candidate IoU 224/288")

    # 03 one lesion, empty map (FN)
    d, l = new()
    box(l, 5, 8, 30, 36, 30, 36, 1)
    out["case_03"] = (d, l, "one lesion, empty detection map")

    # 04 two lesions, several constant blobs, FP far away, FP with same conf as a TP
    d, l = new()
    box(l, 3, 6, 5, 12, 5, 12, 1)
    box(l, 12, 16, 40, 50, 40, 50, 1)
    box(d, 3, 6, 6, 12, 5, 12, 0.62)
    box(d, 12, 16, 42, 50, 40, 50, 0.45)
    box(d, 15, 18, 5, 9, 50, 55, 0.2)
    box(d, 0, 2, 60, 64, 0, 3, 0.45)
    out["case_04"] = (d, l, "two lesions, two TPs, two FPs (one with a TP's confidence)")

    # 05 touching blobs of different confidence (merge into one candidate), compensated
    d, l = new()
    box(l, 8, 12, 20, 30, 20, 30, 1)
    box(d, 8, 12, 20, 25, 20, 30, 0.4)
    box(d, 8, 12, 25, 30, 20, 30, 0.7)
    box(d, 0, 2, 50, 54, 50, 54, 0.4)
    out["case_05"] = (d, l, "touching blobs 0.4|0.7 merge (conf 0.7); extra 0.4 blob keeps the softmax check quiet")

    # 06 one candidate overlapping two lesions with equal IoU (assignment tie)
    d, l = new()
    box(l, 8, 12, 10, 16, 10, 16, 1)
    box(l, 8, 12, 10, 16, 22, 28, 1)
    box(d, 8, 12, 10, 16, 13, 25, 0.75)
    out["case_06"] = (d, l, "one candidate bridging two lesions, IoU 0.2 with each")

    # 07 two candidates on one lesion, different overlap
    d, l = new()
    box(l, 5, 15, 30, 40, 30, 40, 1)
    box(d, 5, 15, 30, 40, 30, 36, 0.55)
    box(d, 5, 15, 30, 40, 37, 40, 0.85)
    out["case_07"] = (d, l, "two candidates on one lesion: IoU 0.6 (conf .55) and 0.3 (conf .85)")

    # 08 two candidates on one lesion, equal overlap, different confidence
    d, l = new()
    box(l, 5, 15, 5, 15, 5, 15, 1)
    box(d, 5, 15, 5, 15, 5, 9, 0.35)
    box(d, 5, 15, 5, 15, 11, 15, 0.65)
    out["case_08"] = (d, l, "two candidates on one lesion, equal IoU 0.4, conf .35/.65")

    # 09 overlaps exactly at thresholds
    d, l = new()
    box(l, 2, 3, 2, 4, 2, 7, 1)  # 10 voxels
    box(d, 2, 3, 2, 3, 2, 3, 0.5)  # 1 voxel inside: IoU 0.1, DSC 2/11
    box(l, 10, 12, 10, 12, 10, 12, 1)  # 8 voxels
    box(d, 10, 11, 10, 12, 10, 12, 0.45)  # 4 inside: IoU 0.5, DSC 2/3
    box(l, 16, 17, 40, 42, 40, 42, 1)  # 4 voxels
    box(d, 16, 17, 40, 41, 40, 41, 0.3)  # 1 inside: IoU 0.25, DSC 0.4
    box(l, 5, 6, 50, 52, 50, 53, 1)  # 6 voxels
    box(d, 5, 6, 50, 51, 50, 52, 0.7)  # 2 inside: IoU 1/3, DSC 0.5
    out["case_09"] = (d, l, "overlaps exactly at 0.1 / 0.25 / 0.5 (IoU) and 0.5 (DSC)")

    # 10 just below the 0.1 IoU threshold
    d, l = new()
    box(l, 4, 5, 4, 5, 4, 15, 1)  # 11 voxels
    box(d, 4, 5, 4, 5, 4, 5, 0.5)  # IoU 1/11, DSC 1/6
    out["case_10"] = (d, l, "IoU 1/11 (< 0.1), DSC 1/6")

    # 11 tie confidences across cases (TP 0.5 and FP 0.5)
    d, l = new()
    box(l, 5, 10, 5, 10, 5, 10, 1)
    box(d, 5, 10, 5, 10, 5, 10, 0.5)
    box(d, 15, 17, 50, 55, 50, 55, 0.5)
    out["case_11"] = (d, l, "perfect TP at 0.5 plus FP at 0.5")

    # 12 benign FP 0.5
    d, l = new()
    box(d, 3, 5, 3, 6, 3, 6, 0.5)
    out["case_12"] = (d, l, "benign, FP at 0.5 (tie with case_11)")

    # 13 low-IoU candidate: TP at 0.1, FP+FN at 0.25
    d, l = new()
    box(l, 5, 10, 20, 30, 20, 30, 1)
    box(d, 5, 10, 28, 35, 20, 30, 0.6)
    out["case_13"] = (d, l, "IoU 100/750")

    # 14 many small candidates with random confidences, two lesions, one missed
    d, l = new()
    box(l, 2, 6, 2, 8, 2, 8, 1)
    box(l, 12, 18, 40, 48, 40, 48, 1)
    box(d, 2, 6, 3, 8, 2, 8, float(np.float32(rng.uniform(0.05, 0.95))))
    for k in range(6):
        z0 = 2 + 3 * (k % 3)
        y0 = 20 + 6 * k
        box(d, z0, z0 + 2, y0, y0 + 3, 20, 23, float(np.float32(rng.uniform(0.05, 0.95))))
    out["case_14"] = (d, l, "seven candidates with random confidences, one TP, one FN")

    # 15 IoU fails 0.1, DSC passes
    d, l = new()
    box(l, 4, 12, 10, 20, 10, 20, 1)
    box(d, 4, 12, 10, 20, 19, 26, 0.77)
    out["case_15"] = (d, l, "IoU 0.0625, DSC 2/17")

    # 16 label with value 2 (another structure)
    d, l = new()
    box(l, 5, 10, 5, 10, 5, 10, 1)
    box(l, 12, 16, 40, 50, 40, 50, 2)
    box(d, 5, 10, 5, 10, 5, 10, 0.8)
    box(d, 12, 16, 40, 50, 40, 50, 0.6)
    out["case_16"] = (d, l, "label value 2 region counts as lesion unless y_true_postprocess_func drops it")

    # 17 anisotropic spacing (written as .mha)
    d, l = new()
    box(l, 6, 10, 20, 40, 20, 40, 1)
    box(d, 6, 10, 25, 45, 20, 40, 0.66)
    out["case_17"] = (d, l, "anisotropic spacing 3.0 x 0.5 x 0.5 mm (z,y,x), MetaImage files")

    # 18 benign FP at confidence 1.0
    d, l = new()
    box(d, 10, 12, 30, 34, 30, 34, 1.0)
    out["case_18"] = (d, l, "benign, FP at 1.0")

    # 19 lesion and candidate at the volume corner
    d, l = new()
    box(l, 0, 4, 0, 6, 0, 6, 1)
    box(d, 0, 3, 0, 6, 0, 6, 0.88)
    out["case_19"] = (d, l, "border lesion and candidate")

    # 20 corner-only (26-) connectivity in label and detection map
    d, l = new()
    box(l, 5, 7, 5, 7, 5, 7, 1)
    box(l, 7, 9, 7, 9, 7, 9, 1)
    box(d, 5, 7, 5, 7, 5, 7, 0.4)
    box(d, 7, 9, 7, 9, 7, 9, 0.4)
    box(l, 12, 14, 40, 42, 40, 42, 1)
    box(d, 14, 16, 42, 44, 42, 44, 0.4)  # corner-touches lesion 2 only diagonally: no overlap
    out["case_20"] = (d, l, "cubes touching at a corner are one component (label and map)")

    # 21 TP with a tiny confidence
    d, l = new()
    box(l, 10, 14, 10, 14, 10, 14, 1)
    box(d, 10, 14, 10, 14, 10, 14, 1e-4)
    out["case_21"] = (d, l, "TP at confidence 1e-4")

    # 22 one candidate overlapping two lesions, enough for one only
    d, l = new()
    box(l, 5, 10, 5, 15, 5, 15, 1)
    box(l, 5, 10, 5, 15, 17, 27, 1)
    box(d, 5, 10, 5, 15, 8, 18, 0.58)
    out["case_22"] = (d, l, "candidate: IoU 0.538 with lesion 1, 0.0526 with lesion 2")

    # 23 greedy-by-overlap would lose a match; optimal assignment keeps both
    d, l = new()
    box(l, 4, 8, 10, 30, 10, 20, 1)  # L1 800
    box(l, 4, 8, 10, 20, 22, 32, 1)  # L2 400
    box(d, 4, 8, 10, 20, 12, 26, 0.9)  # C1: IoU(L1)=320/1040, IoU(L2)=0.2
    box(d, 4, 8, 24, 30, 10, 20, 0.35)  # C2: IoU(L1)=0.3
    out["case_23"] = (d, l, "assignment keeps two matches where greedy would keep one")

    # 24 benign, two separate blobs with equal confidence
    d, l = new()
    box(d, 2, 4, 2, 4, 2, 4, 0.5)
    box(d, 12, 14, 50, 52, 50, 52, 0.5)
    out["case_24"] = (d, l, "benign, two FP blobs both 0.5")

    res = {}
    for k, (d, l, note) in out.items():
        sp = (3.0, 0.5, 0.5) if k in ("case_05", "case_17") else (1.0, 1.0, 1.0)
        res[k] = (d, l, sp, note)
    return res


def bump(shape, center, sigma, peak):
    zz, yy, xx = np.meshgrid(*[np.arange(s, dtype=np.float64) for s in shape], indexing="ij")
    r2 = ((zz - center[0]) / sigma[0]) ** 2 + ((yy - center[1]) / sigma[1]) ** 2 + ((xx - center[2]) / sigma[2]) ** 2
    return peak * np.exp(-0.5 * r2)


def quant(p):
    q = np.round(np.clip(p, 0, 1) * 1024) / 1024
    q[q < 4 / 1024] = 0
    return q.astype(np.float32)


def softmax_cases():
    out = {}
    s = SM_SHAPE

    def lab():
        return np.zeros(s, np.uint8)

    # sm_00: strong bump on lesion + weak bump elsewhere
    p = np.maximum(bump(s, (10, 20, 20), (2, 4, 4), 0.9), bump(s, (10, 45, 45), (2, 3, 3), 0.3))
    l = lab()
    box(l, 8, 13, 16, 25, 16, 25, 1)
    out["sm_00"] = (quant(p), l, "strong bump on lesion, weak bump (0.3) elsewhere")

    # sm_01: two overlapping bumps (saddle), lesion under the first
    p = bump(s, (10, 30, 26), (2, 3, 3), 0.8) + bump(s, (10, 30, 37), (2, 3, 3), 0.6)
    l = lab()
    box(l, 8, 13, 27, 34, 22, 30, 1)
    out["sm_01"] = (quant(p), l, "two touching bumps 0.8/0.6")

    # sm_02: tiny sharp bump + broad bump on lesion (stored as nnU-Net npz)
    p = np.maximum(bump(s, (5, 10, 50), (0.6, 0.8, 0.8), 0.7), bump(s, (12, 40, 20), (2, 4, 4), 0.5))
    l = lab()
    box(l, 10, 15, 36, 45, 16, 25, 1)
    out["sm_02"] = (quant(p), l, "sharp tiny bump 0.7 (< min voxels) + broad bump 0.5 on lesion; .npz")

    # sm_03: benign, faint bump
    p = bump(s, (10, 32, 32), (2, 3, 3), 0.05)
    l = lab()
    out["sm_03"] = (quant(p), l, "benign, faint bump 0.05")

    # sm_04: all-zero softmax on a lesion case
    p = np.zeros(s)
    l = lab()
    box(l, 5, 9, 10, 16, 10, 16, 1)
    out["sm_04"] = (quant(p), l, "all-zero softmax, one lesion")

    # sm_05: two equal-peak bumps, lesion under the second
    p = np.maximum(bump(s, (6, 15, 15), (2, 3, 3), 0.6), bump(s, (14, 45, 45), (2, 3, 3), 0.6))
    l = lab()
    box(l, 12, 17, 41, 50, 41, 50, 1)
    out["sm_05"] = (quant(p), l, "two equal 0.6 peaks")

    # sm_06: seven separated bumps, lesions under two
    p = np.zeros(s)
    centers = [(5, 10, 10), (5, 10, 32), (5, 10, 54), (14, 32, 10), (14, 32, 32), (14, 32, 54), (10, 54, 32)]
    peaks = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    for c, pk in zip(centers, peaks):
        p = np.maximum(p, bump(s, c, (1.5, 2.5, 2.5), pk))
    l = lab()
    box(l, 3, 8, 7, 14, 29, 36, 1)
    box(l, 8, 13, 50, 58, 28, 36, 1)
    out["sm_06"] = (quant(p), l, "seven bumps 0.9..0.3, lesions under 0.8 and 0.3")

    # sm_07: isolated spike above a broad low bump (dynamic v1 quirk)
    p = bump(s, (10, 30, 30), (3, 6, 6), 0.2)
    p[3, 5, 5] = 0.9
    p[3, 5, 6] = 0.9
    p[3, 6, 5] = 0.85
    l = lab()
    box(l, 8, 13, 25, 36, 25, 36, 1)
    out["sm_07"] = (quant(p), l, "3-voxel spike 0.9 + broad 0.2 bump on lesion")
    return out


def edge_arrays():
    """Tiny inline arrays for edge cases. Returns dict name -> list of (det, lab) and meta."""
    Z = lambda s=(4, 8, 8): np.zeros(s, np.float32)
    L = lambda s=(4, 8, 8): np.zeros(s, np.int32)
    e = {}
    e["all_empty"] = [(Z(), L()), (Z(), L())]
    a = Z()
    a[0, 0, 0] = 0.5
    b = Z()
    b[1, 1, 1] = 0.7
    e["negatives_only"] = [(a, L()), (b, L())]
    a = Z()
    a[0, 0, 0] = 0.5
    l1 = L()
    l1[0, 0, 0] = 1
    c = Z()
    c[2, 2, 2] = 0.25
    e["single_threshold"] = [(a, l1), (a.copy(), l1.copy())]
    e["lesions_one_missed_no_fp"] = [(a, l1), (Z(), l1.copy()), (c, L())]
    a = Z()
    a[0, 0, 0] = np.nan
    b = Z()
    b[0, 0, 0] = 0.3
    e["nan_in_map"] = [(a, l1.copy()), (b, L())]
    a = Z()
    a[0, 0, 0] = -0.1
    e["negative_value"] = [(a, L())]
    a = Z()
    a[0, 0, 0] = 3.0
    e["over_one"] = [(a, l1.copy()), (b.copy(), L())]
    a = Z()
    a[0, 0, 0] = 0.3
    a[0, 0, 1] = 0.5
    e["softmax_rejected"] = [(a, L())]
    a = Z()
    a[0, 0, 0] = 0.3
    a[0, 0, 1] = 0.5
    a[3, 7, 7] = 0.5
    e["nonconstant_accepted"] = [(a, L()), (b.copy(), l1.copy())]
    a = Z((3, 8, 8))
    a[1, 1, 1] = 0.5
    l2 = L()
    l2[1, 1, 1] = 1
    e["pred_fewer_slices_padded"] = [(a, l2), (b.copy(), L())]
    a = Z((5, 8, 8))
    a[1, 1, 1] = 0.5
    e["pred_more_slices"] = [(a, l2.copy())]
    e["pred_more_slices_benign"] = [(a.copy(), L()), (b.copy(), l1.copy())]
    a = Z((4, 6, 6))
    a[1, 1, 1] = 0.5
    e["pred_smaller_inplane"] = [(a, l2.copy())]
    a = Z()
    a[0, 0, 0] = 0.5
    lf = np.zeros((4, 8, 8), np.float32)
    lf[0, 0, 0] = 0.6
    e["label_fraction_truncates"] = [(a, lf), (b.copy(), l1.copy())]
    a = Z()
    a[3, 7, 7] = 0.5
    e["min_overlap_zero_far_candidate"] = [(a, l1.copy()), (b.copy(), L())]
    return e


def write_image(array: np.ndarray, path: Path, spacing_zyx=(1.0, 1.0, 1.0)) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(tuple(float(s) for s in spacing_zyx[::-1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path), useCompression=True)


def write_fixtures(folder: Path) -> None:
    """The fixture's image files, as they were written (softmax case sm_02 was an nnU-Net
    ``.npz`` for the reference, channel 1 of ``probabilities``; here its float32 channel as
    NIfTI, the same array)."""
    for case, (det, lab, spacing, _) in det_cases().items():
        ext = ".mha" if case == "case_17" else ".nii.gz"
        write_image(det, folder / "cases" / f"{case}_detection_map{ext}", spacing)
        write_image(lab, folder / "cases" / f"{case}_label{ext}", spacing)
    for case, (softmax, lab, _) in softmax_cases().items():
        write_image(softmax, folder / "softmax" / "pred" / f"{case}.nii.gz")
        write_image(lab, folder / "softmax" / "labels" / f"{case}_label.nii.gz")


def _split(name: str, marker: str) -> tuple[str, str]:
    case, _, ext = name.partition(marker)
    return case, ext


def lay_out(root: Path, phase_yaml: str, softmax: bool = False, cases: list[str] | None = None) -> tuple[Path, Path]:
    """(phase, submission) under ``root`` from the fixture's files: ``labels/<case>.<ext>``
    and ``<case>.<ext>``, the cases ``cases`` (default: all)."""
    phase, submission = root / "phase", root / "input"
    (phase / "labels").mkdir(parents=True)
    submission.mkdir(parents=True)
    if softmax:
        truths = {p.name.partition("_label")[0]: p for p in (FIXTURE / "softmax" / "labels").iterdir()}
        maps = {p.name.partition(".")[0]: p for p in (FIXTURE / "softmax" / "pred").iterdir()}
    else:
        files = sorted((FIXTURE / "cases").iterdir())
        truths = {_split(p.name, "_label")[0]: p for p in files if "_label" in p.name}
        maps = {_split(p.name, "_detection_map")[0]: p for p in files if "_detection_map" in p.name}
    for case in sorted(truths) if cases is None else cases:
        truth, found = truths[case], maps[case]
        shutil.copy(truth, phase / "labels" / (case + truth.name[truth.name.index(".") :]))
        shutil.copy(found, submission / (case + found.name[found.name.index(".") :]))
    (phase / "phase.yaml").write_text(phase_yaml)
    return phase, submission


def expected() -> dict:
    return json.loads((FIXTURE / "expected.json").read_text())


def manifest() -> dict:
    return json.loads((FIXTURE / "cases_manifest.json").read_text())
