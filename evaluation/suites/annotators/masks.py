"""The tool's mask operations: dilation before measuring, and connected components.

Reference: MMV-Lab/string_vessel_project@c90f9ec, ``core/evaluation.py``:
``thicken_segmentation_skimage`` (grey dilation per slice with a scikit-image ``disk`` or
``square`` footprint) and ``count_components`` (``scipy.ndimage.label``).
"""

import numpy as np
from scipy import ndimage

from evaluation.errors import PhaseError


def footprint(radius: int, shape: str) -> np.ndarray:
    """``disk(r)`` or ``square(2r + 1)`` of scikit-image (``thicken_segmentation_skimage``)."""
    from skimage import morphology

    if shape == "disk":
        return morphology.disk(radius).astype(bool)
    if shape == "square":
        return morphology.footprint_rectangle((2 * radius + 1, 2 * radius + 1)).astype(bool)
    raise PhaseError(f"dilation footprint must be 'disk' or 'square', not {shape!r}")


def dilate(mask: np.ndarray, element: np.ndarray) -> np.ndarray:
    """Slice-by-slice dilation of a 0/1 (Z, Y, X) mask. For 0/1 values scikit-image's grey
    dilation is binary dilation, and its reflected border never adds foreground for these
    symmetric footprints, so one binary dilation with a depth-1 element is the same."""
    return ndimage.binary_dilation(mask.astype(bool), structure=element[None]).astype(np.uint8)


def component_count(mask: np.ndarray) -> int:
    """``scipy.ndimage.label`` with its default face-connected structure (``count_components``)."""
    return int(ndimage.label(mask)[1]) if mask.any() else 0
