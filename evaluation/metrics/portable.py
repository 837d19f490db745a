"""Floating-point results that do not depend on the processor.

numpy hands some float64 work to code it picks at run time by the processor's features: dot
products and matrix products go to the BLAS, whose kernel may fuse each multiply with its add,
and ``power``, ``exp`` and ``log2`` go to SIMD routines on AVX-512 machines whose results differ
from the C library's in the last place (in about 5% of ``power``'s results). The references call
those numpy functions, so their own numbers differ from machine to machine by an ulp; the grader
computes the same expressions as a processor without those features does (the C library's
functions; products and sums rounded one at a time, in index order), which is what the
references give on such machines, and gives the same bits on every machine.
"""

import math
from collections.abc import Iterable

import numpy as np


def dot(a: Iterable[float], b: Iterable[float]) -> float:
    """``np.dot`` of two short vectors, summed left to right without fused multiply-adds."""
    total = 0.0
    for x, y in zip(a, b, strict=True):
        total += float(x) * float(y)
    return total


def norm(vector: Iterable[float]) -> float:
    """``np.linalg.norm`` of a short vector (the square root of its ``dot`` with itself)."""
    values = [float(x) for x in vector]
    return math.sqrt(dot(values, values))


def power(base: float, exponents: np.ndarray) -> np.ndarray:
    """``base ** exponents`` elementwise with the C library's ``pow`` (infinite on overflow, as
    numpy's)."""
    flat = np.asarray(exponents, np.float64).ravel()
    return np.fromiter((_pow(base, e) for e in flat.tolist()), np.float64, flat.size).reshape(np.shape(exponents))


def _pow(base: float, exponent: float) -> float:
    try:
        return math.pow(base, exponent)
    except OverflowError:
        return math.inf


def log2(values: np.ndarray) -> np.ndarray:
    """``np.log2`` of positive values with the C library's ``log2``."""
    flat = np.asarray(values, np.float64).ravel()
    return np.fromiter(map(math.log2, flat.tolist()), np.float64, flat.size).reshape(np.shape(values))
