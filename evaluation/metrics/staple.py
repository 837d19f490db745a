"""STAPLE consensus of binary raters (Warfield et al. 2004), through SimpleITK.

The consensus is SimpleITK's ``STAPLEImageFilter``, exactly as MMV-Lab/string_vessel_project
@c90f9ec calls it (``core/evaluation.py: evaluation_metrics``): foreground value 1, confidence
weight 1, at most ``max_iterations`` EM iterations, rater images as given (uint8 0/1). Using the
same compiled filter rather than a re-implementation keeps the per-pixel probabilities, the
iteration count and the rater sensitivities and specificities identical to the tool's.

Known behaviour of the filter (SimpleITK 2.5.7, ITK 5.4): an empty rater gets sensitivity 0 and
specificity 1; when every rater is empty the probabilities, sensitivities and specificities are
NaN.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Staple:
    probability: np.ndarray  # float64, the shape of the inputs
    sensitivity: list[float]
    specificity: list[float]
    iterations: int


def staple(raters: list[np.ndarray], max_iterations: int = 100) -> Staple:
    """The STAPLE probability image of ``raters`` (equal-shaped 0/1 arrays) and rater scores."""
    import SimpleITK as sitk

    images = [sitk.GetImageFromArray(np.ascontiguousarray(r, dtype=np.uint8)) for r in raters]
    flt = sitk.STAPLEImageFilter()
    flt.SetMaximumIterations(max_iterations)
    flt.SetForegroundValue(1.0)
    flt.SetConfidenceWeight(1.0)
    probability = sitk.GetArrayFromImage(flt.Execute(images))
    return Staple(
        probability=probability,
        sensitivity=[float(v) for v in flt.GetSensitivity()],
        specificity=[float(v) for v in flt.GetSpecificity()],
        iterations=int(flt.GetElapsedIterations()),
    )
