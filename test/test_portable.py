"""evaluation/metrics/portable.py: the same bits on every processor, and those the references
give on a processor without AVX-512 and without fused multiply-adds in its BLAS."""

import json
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np

from evaluation.metrics import portable

NUMPY_WITHOUT_AVX512 = """
import json, sys
import numpy as np
base, exponents, values = json.loads(sys.stdin.read())
print(json.dumps([np.power(base, np.array(exponents)).tolist(), np.log2(np.array(values)).tolist()]))
"""


def _rounded_step_by_step(vector) -> float:
    """sqrt of x0*x0 + x1*x1 + ..., each product and each sum rounded to float64 on its own."""
    total = 0.0
    for x in vector:
        total = float(Fraction(total) + Fraction(float(Fraction(x) * Fraction(x))))
    return math.sqrt(total)


def test_norm_and_dot_round_each_product_and_sum_in_index_order():
    rng = np.random.default_rng(1)
    for _ in range(2000):
        vector = rng.normal(size=int(rng.integers(1, 6))) * 10.0 ** rng.integers(-3, 4)
        assert portable.norm(vector) == _rounded_step_by_step(vector)
    # BraTS-GLI-00001's 'parts' centres of mass (test/test_segmentation_brats.py): the fused
    # chain some BLAS kernels compute gives ...735, the correctly rounded value is ...734.
    difference = (13.55188679245283 - 14.0, 19.37264150943396 - 20.0, 22.23820754716981 - 22.0)
    assert portable.norm(difference) == 0.8069243818302734
    assert portable.dot([1, 2, 3], [4.5, 0.25, 2]) == 11.0


def test_power_and_log2_are_numpys_on_a_processor_without_avx512():
    from numpy._core._multiarray_umath import __cpu_features__

    avx512 = [name for name, present in __cpu_features__.items() if present and ("AVX512" in name or name == "X86_V4")]
    avx512 += os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()  # those this run already disabled
    rng = np.random.default_rng(2)
    exponents = np.concatenate([-rng.exponential(30.0, 5000), [0.0, -0.0, -math.inf, 1e-300, 700.0]])
    values = np.concatenate([rng.uniform(0, 1, 5000), [1.0, 2.0, 0.5, 5e-324, 1e300]])
    done = subprocess.run(
        [sys.executable, "-c", NUMPY_WITHOUT_AVX512],
        input=json.dumps([1.01, exponents.tolist(), values.tolist()]),
        capture_output=True,
        text=True,
        env={**os.environ, "NPY_DISABLE_CPU_FEATURES": " ".join(avx512)},
        check=True,
    )
    powers, logs = json.loads(done.stdout)
    assert portable.power(1.01, exponents).tolist() == powers
    assert portable.log2(values).tolist() == logs
    assert portable.power(1.01, exponents.reshape(5, -1)).shape == (5, 1001)


def test_power_overflows_to_infinity_as_numpy_does():
    assert portable.power(10.0, np.array([400.0, 1.0])).tolist() == [math.inf, 10.0]
