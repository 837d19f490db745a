"""Distances to a surface as ITK computes them: the "thick" label contour of
``LabelContourImageFilter(FullyConnected=True)`` and the unsigned distance map of
``SignedMaurerDistanceMapImageFilter(UseImageSpacing=True, SquaredDistance=False)``, value for
value in ITK's single precision.

ITK's filter is the separable Voronoi method of Maurer, Qi and Raghavan (PAMI 2003), one image
axis at a time in ITK's order x, y, z (numpy's axes 2, 1, 0), with ``float`` pixels. Its
values are reproduced bit for bit because its arithmetic is:

* every site (here: every contour voxel, each of which has a background neighbour, so ITK's
  own border extraction keeps them all) starts at 0, every other voxel at the largest float;
  a line without a site keeps its values;
* a site's coordinate on the stack of a line is ``float32(i) * float32(spacing)``, a float32
  product, and the removal test evaluates ``c |g2| - b |g1| - a |gf| - (a b) c`` from left to
  right in float32;
* a voxel's own coordinate when the distances are read back is ``float32(i * spacing)`` with
  the product in double: a different rounding where the spacing is not a float32 number (an
  ``.mha`` header's 0.7), which puts a site at a distance of about 1e-7 mm from itself;
* the nearest site of a voxel is the first along the stack whose squared distance does not
  exceed the next one's; the square root is taken in double and rounded to float32.

``i`` is the index in the image ITK transforms. Values inside a box that holds every site and
every voxel asked about equal the whole image's (lines outside the sites' box never receive a
finite value), so a caller passes that box and where it starts in the image.
"""

import numpy as np

from evaluation.metrics import jit
from evaluation.metrics.jit import numba

_FAR = np.float32(np.finfo(np.float32).max)


@numba.njit(cache=True, nogil=True, inline="always")
def _removable(  # pragma: no cover - compiled
    d1: np.float32, d2: np.float32, df: np.float32, x1: np.float32, x2: np.float32, xf: np.float32
) -> bool:
    """ITK's ``Remove``: whether the middle site of three is hidden by the outer two."""
    a = x2 - x1
    b = xf - x2
    c = xf - x1
    value = c * abs(d2) - b * abs(d1)
    value = value - a * abs(df)
    value = value - (a * b) * c
    return bool(value > np.float32(0.0))


@numba.njit(cache=True, nogil=True)
def _voronoi_line(  # pragma: no cover - compiled
    line: np.ndarray,
    inside: np.ndarray,
    n: int,
    start: int,
    step32: np.float32,
    step64: np.float64,
    g: np.ndarray,
    h: np.ndarray,
) -> None:
    """ITK's ``Voronoi`` on one line of ``n`` values: the partial squared distances of the
    earlier axes in, those including this axis out (negated inside the object)."""
    top = -1
    for i in range(n):
        d = line[i]
        if d != _FAR:
            at = np.float32(i + start) * step32
            while top >= 1 and _removable(g[top - 1], g[top], d, h[top - 1], h[top], at):
                top -= 1
            top += 1
            g[top] = d
            h[top] = at
    if top == -1:
        return
    last = top
    k = 0
    for i in range(n):
        at = np.float32(np.float64(i + start) * step64)
        t = h[k] - at
        d1 = abs(g[k]) + t * t
        while k < last:
            t2 = h[k + 1] - at
            d2 = abs(g[k + 1]) + t2 * t2
            if d1 <= d2:
                break
            k += 1
            d1 = d2
        line[i] = -d1 if inside[i] else d1


@numba.njit(cache=True, nogil=True)
def _maurer(
    sites: np.ndarray, start: np.ndarray, step32: np.ndarray, step64: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    nz, ny, nx = sites.shape
    out = np.empty((nz, ny, nx), np.float32)
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                out[z, y, x] = np.float32(0.0) if sites[z, y, x] else _FAR
    longest = max(nx, ny, nz)
    g = np.empty(longest, np.float32)
    h = np.empty(longest, np.float32)
    line = np.empty(longest, np.float32)
    inside = np.empty(longest, np.bool_)
    for z in range(nz):  # ITK's dimension 0: x
        for y in range(ny):
            for x in range(nx):
                line[x] = out[z, y, x]
                inside[x] = sites[z, y, x]
            _voronoi_line(line, inside, nx, start[2], step32[0], step64[0], g, h)
            for x in range(nx):
                out[z, y, x] = line[x]
    for z in range(nz):  # dimension 1: y
        for x in range(nx):
            for y in range(ny):
                line[y] = out[z, y, x]
                inside[y] = sites[z, y, x]
            _voronoi_line(line, inside, ny, start[1], step32[1], step64[1], g, h)
            for y in range(ny):
                out[z, y, x] = line[y]
    for y in range(ny):  # dimension 2: z
        for x in range(nx):
            for z in range(nz):
                line[z] = out[z, y, x]
                inside[z] = sites[z, y, x]
            _voronoi_line(line, inside, nz, start[0], step32[2], step64[2], g, h)
            for z in range(nz):
                out[z, y, x] = line[z]
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                out[z, y, x] = np.float32(np.sqrt(np.float64(abs(out[z, y, x]))))
    return out


@numba.njit(cache=True, nogil=True)
def _contour(mask: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    nz, ny, nx = mask.shape
    out = np.zeros((nz, ny, nx), np.bool_)
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                if not mask[z, y, x]:
                    continue
                if z == 0 or y == 0 or x == 0 or z == nz - 1 or y == ny - 1 or x == nx - 1:
                    out[z, y, x] = True
                    continue
                edge = False
                for dz in range(-1, 2):
                    for dy in range(-1, 2):
                        for dx in range(-1, 2):
                            if not mask[z + dz, y + dy, x + dx]:
                                edge = True
                out[z, y, x] = edge
    return out


def contour(mask: np.ndarray) -> np.ndarray:
    """``LabelContourImageFilter`` with ``FullyConnected=True`` on a binary mask: the voxels of
    the mask with a 26-neighbour outside it, the outside of the array counting as outside."""
    return _contour(np.ascontiguousarray(mask, dtype=np.bool_))


def distance_map(
    sites: np.ndarray, spacing_xyz: tuple[float, float, float], start_zyx: tuple[int, int, int] = (0, 0, 0)
) -> np.ndarray:
    """float32 distance from every voxel of ``sites``' box to the nearest site, as ITK's
    signed Maurer distance map's absolute value: ``spacing_xyz`` the image spacing in ITK's
    (x, y, z) order as doubles, ``start_zyx`` the index of the box's first voxel in the image
    ITK transforms."""
    step64 = np.asarray(spacing_xyz, np.float64)
    return _maurer(
        np.ascontiguousarray(sites, dtype=np.bool_), np.asarray(start_zyx, np.int64), step64.astype(np.float32), step64
    )


def warm_up() -> None:
    """Compiles the kernels on a tiny box (``jit.warm_up`` says so when it is the first time)."""

    def compile_all() -> None:
        mask = np.zeros((3, 4, 5), bool)
        mask[1, 1:3, 1:4] = True
        distance_map(contour(mask), (1.0, 1.0, 1.0))

    jit.warm_up("ITK distances", compile_all, [__file__], equivalents=False)
