"""Linear interpolation of ``scipy.ndimage.zoom_shift`` (order 1, what scikit-image's
``rescale`` runs for CellMap's semantic labels), compiled, to the bit.

scipy's C loop (``ni_interpolation.c`` ``NI_ZoomShift``) computes every output voxel from
per-axis tables of input indices and spline weights as the sum, over its (z, y, x) neighbours
in that order, of ``((value * wz) * wy) * wx``; it takes ~100 ns a voxel. ``values`` below
evaluates exactly that sum from the same tables (``tables`` reads them off ``zoom_shift``
itself), in a few ns a voxel.

Semantic labels are only compared with 0.5 after the clip, so ``mask`` first interpolates
separably (three passes of two terms, ~4x less work, different rounding) and recomputes
with the exact sum only the voxels within ``MARGIN`` of the threshold: the two sums differ by a
few units in the last place of the largest input value, and the decision (clip, optional
float32 stores, compare) is monotone in the sum, so every other voxel's decision is the
exact one.
"""

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba

# Relative to the input's largest magnitude: far above the two sums' rounding difference
# (~1e-15) and float32's half-ulp at 0.5 (3e-8), far below any meaningful value difference.
MARGIN = 1e-6


def tables(input_shape, output_shape, zoom) -> list | None:
    """Per axis, (index, weight) arrays of shape (n_out, 2): the (at most two) input voxels and
    weights of every output voxel, in ascending input order, missing ones with index -1 and
    weight 0 (along x index 0: the kernels add its zero term there instead of branching). The
    weights are read off ``zoom_shift`` itself: zooming a one-hot line gives each exactly
    (0.0 + 1.0 * w). None where a voxel has more than two (never for linear interpolation),
    or without a working numba."""
    if not jit.compiled():
        return None
    from scipy import ndimage  # here, not at import: importing it takes 0.4 s (resampling only)

    mode = ndimage._ni_support._extend_mode_to_code("grid-constant")
    out = []
    for n_in, n_out, factor in zip(input_shape, output_shape, zoom):
        weights = np.zeros((n_out, n_in))
        hot, line = np.zeros(n_in), np.zeros(n_out)
        for j in range(n_in):
            hot[j] = 1.0
            ndimage._nd_image.zoom_shift(hot, np.array([factor]), None, line, 1, mode, 0.0, 0, True)
            weights[:, j] = line
            hot[j] = 0.0
        if np.count_nonzero(weights, axis=1).max(initial=0) > 2:
            return None
        index, weight = np.full((n_out, 2), -1, np.int64), np.zeros((n_out, 2))
        rows, cols = np.nonzero(weights)  # row-major: ascending input index within a row
        slot = np.zeros(len(rows), np.int64)
        slot[1:] = rows[1:] == rows[:-1]
        index[rows, slot], weight[rows, slot] = cols, weights[rows, cols]
        out.append((index, weight))
    np.maximum(out[-1][0], 0, out=out[-1][0])
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _exact_row(source, iz, wz, iy, wy, ix, wx, a, b, t):
    """Row (a, b) of the C loop's sums into ``t``."""
    t[:] = 0.0
    for h0 in range(2):
        z = iz[a, h0]
        if z < 0:
            continue
        w0 = wz[a, h0]
        for h1 in range(2):
            y = iy[b, h1]
            if y < 0:
                continue
            w1 = wy[b, h1]
            row = source[z, y]
            for c in range(t.shape[0]):
                t[c] += ((row[ix[c, 0]] * w0) * w1) * wx[c, 0]
                t[c] += ((row[ix[c, 1]] * w0) * w1) * wx[c, 1]


@numba.njit(cache=True, nogil=True)
def _values(source, iz, wz, iy, wy, ix, wx, out):
    t = np.empty(out.shape[2])
    for a in range(out.shape[0]):
        for b in range(out.shape[1]):
            _exact_row(source, iz, wz, iy, wy, ix, wx, a, b, t)
            out[a, b, :] = t


@numba.njit(cache=True, nogil=True, inline="always")
def _decide(v, low, high, single_type, single_out, threshold):
    if single_type:
        v = np.float64(np.float32(v))
    v = min(max(v, low), high)
    if single_out:
        v = np.float64(np.float32(v))
    return v > threshold


@numba.njit(cache=True, nogil=True)
def _plane(source, z, y0, iy, wy, ix, wx, along_x, plane):
    """Input plane z interpolated along x (its rows y0 on), then along y."""
    for y in range(along_x.shape[0]):
        row, dst = source[z, y0 + y], along_x[y]
        for c in range(dst.shape[0]):
            dst[c] = row[ix[c, 0]] * wx[c, 0] + row[ix[c, 1]] * wx[c, 1]
    plane[:] = 0.0
    for b in range(plane.shape[0]):
        for h1 in range(2):
            y = iy[b, h1]
            if y >= 0:
                w1, src, dst = wy[b, h1], along_x[y - y0], plane[b]
                for c in range(dst.shape[0]):
                    dst[c] += src[c] * w1


@numba.njit(cache=True, nogil=True)
def _mask(source, iz, wz, iy, wy, ix, wx, low, high, single_type, single_out, threshold, margin, out):
    """Output planes in order, each from two input planes interpolated along x and y and
    kept in two slots (linear interpolation reads planes z and z + 1: z % 2 tells the
    slot), so that the buffers stay small and are reused."""
    nz, ny, nx = out.shape
    y0, y1 = source.shape[1], 0  # the input rows the box reads
    for b in range(ny):
        for h1 in range(2):
            if iy[b, h1] >= 0:
                y0, y1 = min(y0, iy[b, h1]), max(y1, iy[b, h1] + 1)
    y0 = min(y0, y1)
    along_x, planes = np.empty((y1 - y0, nx)), np.empty((2, ny, nx))
    held = np.array([-1, -1])
    t, exact = np.empty(nx), np.empty(nx)
    for a in range(nz):
        for h0 in range(2):
            z = iz[a, h0]
            if z >= 0 and held[z % 2] != z:
                _plane(source, z, y0, iy, wy, ix, wx, along_x, planes[z % 2])
                held[z % 2] = z
        for b in range(ny):
            t[:] = 0.0
            for h0 in range(2):
                z = iz[a, h0]
                if z >= 0:
                    w0, src = wz[a, h0], planes[z % 2, b]
                    for c in range(nx):
                        t[c] += src[c] * w0
            near = False
            for c in range(nx):
                if abs(t[c] - threshold) <= margin:
                    near = True
                else:
                    out[a, b, c] = _decide(t[c], low, high, single_type, single_out, threshold)
            if near:  # the exact sums of this row decide its voxels near the threshold
                _exact_row(source, iz, wz, iy, wy, ix, wx, a, b, exact)
                for c in range(nx):
                    if abs(t[c] - threshold) <= margin:
                        out[a, b, c] = _decide(exact[c], low, high, single_type, single_out, threshold)


def _on(table_list, box) -> list:
    return [t[s] for (index, weight), s in zip(table_list, box) for t in (index, weight)]


def values(source: np.ndarray, table_list, box, dtype) -> np.ndarray:
    """The C loop's output on ``box`` (before the clip), in ``dtype``."""
    out = np.zeros(tuple(s.stop - s.start for s in box), dtype=dtype)
    _values(source, *_on(table_list, box), out)
    return out


def mask(source: np.ndarray, table_list, box, low, high, single_type: bool, single_out: bool, threshold: float, scale: float):
    """``clip(values) > threshold`` on ``box``, the values stored as float32 first where
    ``single_type`` (the interpolated array's dtype), and again after the clip where
    ``single_out``; ``scale``: the input's largest magnitude (sets the margin)."""
    out = np.empty(tuple(s.stop - s.start for s in box), dtype=bool)
    margin = MARGIN * max(1.0, scale)
    _mask(source, *_on(table_list, box), float(low), float(high), single_type, single_out, threshold, margin, out)
    return out


def warm_up(dtypes) -> None:
    """Compile (or load from numba's cache) ``mask`` and ``values`` for inputs of these dtypes
    once, e.g. in a parent process before it forks a worker per task (each compile takes
    seconds). If compiling fails, ``tables`` returns None from then on and scipy's routine
    interpolates (same values, slower)."""

    def compile_all():
        for dtype in dtypes:
            source = np.zeros((2, 2, 2), dtype)
            table_list = tables(source.shape, (4, 4, 4), np.full(3, 0.5))
            box = (slice(0, 4),) * 3
            mask(source, table_list, box, 0.0, 1.0, False, False, 0.5, 1.0)
            values(source, table_list, box, np.float64)

    jit.warm_up("linear interpolation", compile_all, [__file__])
