"""Foam-phantom ground truth: label volumes rasterised from a void list, slab by slab.

Reproduces the voxeliser the TomoChallenge foam scorer builds its ground truth with:
dmpelt/foam_ct_phantom@5aaaf7e ``ccode_c.c`` ``genvol`` (supersampling 1) as called by
tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.compute_scores`` and
``compute_scores_dyn`` (through ``foam_ct_phantom.expand.genvol_expand``).

The sample is the infinite cylinder x^2 + y^2 <= 1; voids are non-overlapping spheres given as
float32 records ``[x, y, z, r, value]``. A voxel centre outside the cylinder is background (0),
inside it takes the label of the first sphere in list order that strictly contains it, else
foam (1). Void labels are 2/3/4 for large/medium/small radii. The volume is indexed
``[z, y, x]`` and the y axis is reversed afterwards (the reference's "identical to ASTRA" flip).

Speed: the reference visits every sphere for every voxel of a slice (it pre-filters by z only);
here every sphere touches only its own bounding box, so rasterising the 1080 x 1280 x 1280
challenge volume with 150 000 voids costs about one pass over the void voxels.

Exactness: the reference evaluates coordinates in double and squared distances in x87 long
double. Distances are computed here in float64 and every voxel whose squared distance lies
within a relative 1e-12 of the squared radius (or of the cylinder's 1) is re-decided with
``numpy.longdouble`` in the reference's operation order, so ties are decided exactly as the
reference decides them wherever numpy's long double is the x87 80-bit type (x86-64 Linux).
"""

from dataclasses import dataclass

import numpy as np

BACKGROUND, FOAM, LARGE, MEDIUM, SMALL = 0, 1, 2, 3, 4
VOID_LABELS = (LARGE, MEDIUM, SMALL)
LARGE_MIN_R, MEDIUM_MIN_R = 0.1, 0.025
_TIE = 1e-12  # relative window re-decided in long double; float64 error is ~1e-15


@dataclass(frozen=True)
class Grid:
    """The reconstruction grid (``foam_ct_phantom.VolumeGeometry``): voxel counts, voxel size
    and the (x, y) centre, in cylinder-radius units. The challenge grid is the default."""

    nx: int = 1280
    ny: int = 1280
    nz: int = 1080
    voxel_size: float = 3 / 1280
    cx: float = 0.0
    cy: float = 0.0

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.nz, self.ny, self.nx)


def void_labels(radii: np.ndarray, large_min_r: float = LARGE_MIN_R, medium_min_r: float = MEDIUM_MIN_R) -> np.ndarray:
    """Label 2/3/4 by radius as ``compute_scores`` assigns them: ``r >= 0.1`` large,
    ``0.025 <= r < 0.1`` medium, else small, compared in float32 (the array's type)."""
    r = np.asarray(radii, dtype=np.float32)
    large, medium = np.float32(large_min_r), np.float32(medium_min_r)
    return np.where(r >= large, LARGE, np.where(r >= medium, MEDIUM, SMALL)).astype(np.uint8)


def axis_centres(n: int, voxel_size: float, centre: float = 0.0) -> np.ndarray:
    """Voxel-centre coordinates along one axis, rounded exactly as ``genvol`` rounds them:
    ``c + (i + 0.5)·vs − n·vs/2 + 0 − vs/2 + vs/2`` with ``c``, ``vs`` and the products
    ``n·vs``, ``vs/2`` in float32 and the sums in double, left to right."""
    vs = np.float32(voxel_size)
    half_extent = np.float64(np.float32(np.float32(n) * vs) / np.float32(2))
    half_voxel = np.float64(vs / np.float32(2))
    coords = np.float64(np.float32(centre)) + (np.arange(n, dtype=np.float64) + 0.5) * np.float64(vs)
    coords = coords - half_extent
    coords = coords + 0.0  # the supersampling offset, float32 zero at supersampling 1
    coords = coords - half_voxel
    return coords + half_voxel


@dataclass(frozen=True)
class Spheres:
    """A void list as columns: centres and radii (float32) and the label of each sphere."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    r: np.ndarray
    label: np.ndarray

    @classmethod
    def from_records(cls, records: np.ndarray, labels: np.ndarray | None = None) -> "Spheres":
        """From the flat float32 ``[x, y, z, r, value]`` records of a ``spheres`` dataset;
        labels default to the radius classes of ``void_labels``."""
        flat = np.asarray(records, dtype=np.float32).ravel()
        if flat.size % 5:
            raise ValueError(f"a void list holds 5 numbers per sphere; got {flat.size} numbers")
        columns = flat.reshape(-1, 5).T
        radii = columns[3].copy()
        return cls(
            columns[0].copy(),
            columns[1].copy(),
            columns[2].copy(),
            radii,
            void_labels(radii) if labels is None else np.asarray(labels, np.uint8),
        )

    def __len__(self) -> int:
        return int(self.r.size)


def material_volume(z: np.ndarray, r: np.ndarray) -> np.float32:
    """Foam volume of the cylinder section the voids span, in float32 as
    ``foam_ct_phantom.expand.__get_material_volume`` computes it (numpy >= 2 promotion)."""
    z_extent = (z - r).min(), (z + r).max()
    cylinder = np.pi * (z_extent[1] - z_extent[0])
    voids = (4 * np.pi * r**3 / 3).sum()
    return cylinder - voids


def expanded(spheres: Spheres, sizes: np.ndarray, time: float, grid: Grid) -> tuple[Spheres, Grid]:
    """The expanding phantom at ``time`` in [0, 1] (``genvol_expand``): radii scaled by the
    size curve interpolated at ``time``, the voxel size divided by the cube root of the
    foam-volume ratio so the sample keeps its material volume. Labels keep the unscaled
    radii's classes (``compute_scores_dyn`` labels before expanding). The reference passes no
    centre here, so the grid is centred whatever ``grid.cx, cy`` say."""
    start = material_volume(spheres.z, spheres.r)
    size = np.interp(time, np.linspace(0, 1, np.asarray(sizes).size), np.asarray(sizes, np.float32))
    radii = spheres.r.copy()
    radii *= size  # float32 array times a float64 scalar, stored back in float32
    factor = (start / material_volume(spheres.z, radii)) ** (1 / 3)
    voxel_size = grid.voxel_size * (1 / factor)
    scaled = Spheres(spheres.x, spheres.y, spheres.z, radii, spheres.label)
    return scaled, Grid(grid.nx, grid.ny, grid.nz, float(np.float32(voxel_size)), 0.0, 0.0)


class Rasterizer:
    """Label slabs of one phantom on one grid. ``slab(z0, z1)`` returns the y-flipped uint8
    labels of slices ``z0 <= z < z1`` (slices outside the grid are not allowed)."""

    def __init__(self, spheres: Spheres, grid: Grid):
        self.spheres = spheres
        self.grid = grid
        self.xc = axis_centres(grid.nx, grid.voxel_size, grid.cx)
        self.yc = axis_centres(grid.ny, grid.voxel_size, grid.cy)
        self.zc = axis_centres(grid.nz, grid.voxel_size, 0.0)
        self.r2 = (spheres.r * spheres.r).astype(np.float64)  # float32 product, as s2s in genvol
        self.cylinder = _cylinder(self.xc, self.yc)
        self.margin = 2.0 * float(np.float32(grid.voxel_size))

    def slab(self, z0: int, z1: int) -> np.ndarray:
        if not 0 <= z0 <= z1 <= self.grid.nz:
            raise ValueError(f"slices {z0}:{z1} outside 0:{self.grid.nz}")
        out = np.repeat(self.cylinder[None], z1 - z0, axis=0)
        if z1 == z0:
            return out[:, ::-1].copy()
        s = self.spheres
        zc = self.zc[z0:z1]
        near = np.flatnonzero(
            (s.z.astype(np.float64) + s.r > zc[0] - self.margin) & (s.z.astype(np.float64) - s.r < zc[-1] + self.margin)
        )
        for j in near:  # list order: a voxel keeps the first sphere that claims it
            self._paint(out, int(j), zc)
        return out[:, ::-1].copy()

    def _paint(self, out: np.ndarray, j: int, zc: np.ndarray) -> None:
        s = self.spheres
        r = float(s.r[j])
        boxes = [
            _span(axis, float(centre), r, self.margin) for axis, centre in ((zc, s.z[j]), (self.yc, s.y[j]), (self.xc, s.x[j]))
        ]
        if any(lo >= hi for lo, hi in boxes):
            return
        (z0, z1), (y0, y1), (x0, x1) = boxes
        dz = (zc[z0:z1] - np.float64(s.z[j])) ** 2
        dy = (self.yc[y0:y1] - np.float64(s.y[j])) ** 2
        dx = (self.xc[x0:x1] - np.float64(s.x[j])) ** 2
        d2 = (dx[None, None, :] + dy[None, :, None]) + dz[:, None, None]
        r2 = self.r2[j]
        inside = d2 < r2
        close = np.abs(d2 - r2) <= _TIE * r2
        if close.any():
            _refine(inside, close, (zc[z0:z1], self.yc[y0:y1], self.xc[x0:x1]), (s.z[j], s.y[j], s.x[j]), s.r[j])
        region = out[z0:z1, y0:y1, x0:x1]
        region[inside & (region == FOAM)] = s.label[j]


def _span(coords: np.ndarray, centre: float, r: float, margin: float) -> tuple[int, int]:
    """Index range of the (sorted) voxel centres that may lie within ``r`` of ``centre``."""
    return int(np.searchsorted(coords, centre - r - margin)), int(np.searchsorted(coords, centre + r + margin, side="right"))


def _refine(inside: np.ndarray, close: np.ndarray, axes, centre, radius) -> None:
    """Re-decide near-tie voxels in long double with the reference's operation order:
    ``(dx + dy) + dz < float32(r·r)``, differences of a double coordinate and a float32 centre."""
    iz, iy, ix = np.nonzero(close)
    ld = np.longdouble
    dz = (ld(1) * axes[0][iz] - ld(centre[0])) ** 2
    dy = (ld(1) * axes[1][iy] - ld(centre[1])) ** 2
    dx = (ld(1) * axes[2][ix] - ld(centre[2])) ** 2
    r2 = ld(np.float32(radius) * np.float32(radius))
    inside[iz, iy, ix] = (dx + dy) + dz < r2


def _cylinder(xc: np.ndarray, yc: np.ndarray) -> np.ndarray:
    """FOAM where ``sqrt(x^2 + y^2) <= 1`` (long double in the reference), else BACKGROUND;
    unflipped [y, x]."""
    rho2 = yc[:, None] ** 2 + xc[None, :] ** 2
    inside = rho2 <= 1.0
    iy, ix = np.nonzero(np.abs(rho2 - 1.0) <= _TIE)
    if iy.size:
        ld = np.longdouble
        x, y = ld(1) * xc[ix], ld(1) * yc[iy]
        inside[iy, ix] = ~(np.sqrt(x * x + y * y) > 1)
    return inside.astype(np.uint8)
