"""Regenerate the bundled example of the ``annotators`` suite (seeded, so the files are stable).

Five 128x128 images of thin, curved "string vessels". Three annotators trace them with small
disagreements (A shifts a vessel by a pixel, B misses a short piece, C draws thicker lines).
Two models predict label maps as the tool expects them: 0 background, 1 tissue, 2 vessel;
``unet`` is close to the annotators, ``baseline`` misses a vessel and adds a false positive.

    python examples/annotators/make_example.py
"""

from pathlib import Path

import numpy as np
import tifffile
from scipy import ndimage
from skimage.draw import line

HERE = Path(__file__).resolve().parent
SIZE = 128
IMAGES = ("vessels_01", "vessels_02", "vessels_03", "vessels_04", "vessels_05")


def curve(rng: np.random.Generator) -> np.ndarray:
    """Points of a smooth random curve crossing the image."""
    t = np.linspace(0, 1, 40)
    start, end = rng.uniform(8, SIZE - 8, 2), rng.uniform(8, SIZE - 8, 2)
    bend = rng.uniform(-25, 25) * np.sin(np.pi * t * rng.uniform(1, 2.5))
    direction = (end - start) / max(np.linalg.norm(end - start), 1)
    normal = np.array([-direction[1], direction[0]])
    points = start + np.outer(t, end - start) + np.outer(bend, normal)
    return np.clip(np.round(points), 0, SIZE - 1).astype(int)


def draw(curves, offset=(0, 0), skip=None, width=1) -> np.ndarray:
    mask = np.zeros((SIZE, SIZE), dtype=bool)
    for k, points in enumerate(curves):
        for i in range(len(points) - 1):
            if skip is not None and skip[0] == k and skip[1] <= i < skip[2]:
                continue
            (r0, c0), (r1, c1) = np.clip(points[i] + offset, 0, SIZE - 1), np.clip(points[i + 1] + offset, 0, SIZE - 1)
            rr, cc = line(r0, c0, r1, c1)
            mask[rr, cc] = True
    return ndimage.binary_dilation(mask, iterations=width) if width else mask


def main() -> None:
    rng = np.random.default_rng(20260218)
    phase, submission = HERE / "phase" / "annotations", HERE / "submission"
    for image in IMAGES:
        curves = [curve(rng) for _ in range(rng.integers(2, 4))]
        annotations = {
            "annotator_A": draw(curves[:1], offset=(1, 0)) | draw(curves[1:]),
            "annotator_B": draw(curves, skip=(0, 10, 16)),
            "annotator_C": draw(curves, width=2),
        }
        for folder, mask in annotations.items():
            (phase / folder).mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(phase / folder / f"{image}.tif", mask.astype(np.uint8) * 255, compression="zlib")
        tissue = ndimage.binary_dilation(draw(curves, width=0), iterations=9)
        blob = np.zeros((SIZE, SIZE), dtype=bool)
        r, c = rng.integers(10, SIZE - 10, 2)
        blob[r - 3 : r + 3, c - 3 : c + 3] = True
        models = {
            "predictions_unet": draw(curves, offset=tuple(rng.integers(-1, 2, 2))),
            "predictions_baseline": draw(curves[1:], width=2) | blob,
        }
        for folder, vessel in models.items():
            labels = np.where(vessel, 2, np.where(tissue, 1, 0)).astype(np.uint8)
            (submission / folder).mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(submission / folder / f"{image}_segPred.tif", labels, compression="zlib")


if __name__ == "__main__":
    main()
