"""The TomoChallenge bit-packed volume format: one byte per 2 x 2 x 2 block of voxels.

tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.prepare_submission`` /
``load_submission`` (and the same layout in ``fuelcell_utils``): voxel ``[2k+dz, 2j+dy, 2i+dx]``
is bit ``4·dz + 2·dy + dx`` (value ``1 << bit``) of ``packed[k, j, i]``; a voxel is set iff the
submitted value is ``> 0.5`` (NaN is not). The reference stores the bytes as HDF5 dataset
``vol`` (gzip) with a ``description`` attribute.

Unpacking works on any range of packed planes, so a volume can be decoded slab by slab
without ever holding the full-size 0/1 array.
"""

import numpy as np

BLOCK = 2


def bit_of(dz: int, dy: int, dx: int) -> int:
    return 4 * dz + 2 * dy + dx


def pack(volume: np.ndarray) -> np.ndarray:
    """Pack a 3-D volume with even dimensions (``prepare_submission``'s layout)."""
    if volume.ndim != 3 or any(n % BLOCK for n in volume.shape):
        raise ValueError(f"packing needs a 3-D volume with even dimensions, not {volume.shape}")
    foam = np.greater(volume, 0.5)
    packed = np.zeros(tuple(n // BLOCK for n in volume.shape), dtype=np.uint8)
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                packed |= foam[dz::2, dy::2, dx::2].astype(np.uint8) << np.uint8(bit_of(dz, dy, dx))
    return packed


def unpack(packed: np.ndarray, z0: int, z1: int, shape_yx: tuple[int, int]) -> np.ndarray:
    """Voxel slices ``z0 <= z < z1`` of the 0/1 volume ``packed`` encodes, as uint8, with the
    (y, x) size cut to ``shape_yx`` (a packed plane covers two voxel rows and columns)."""
    ny, nx = shape_yx
    k0, k1 = z0 // BLOCK, -(-z1 // BLOCK)
    planes = packed[k0:k1]
    out = np.empty((planes.shape[0] * 2, planes.shape[1] * 2, planes.shape[2] * 2), dtype=np.uint8)
    bits = np.empty(planes.shape, dtype=np.uint8)
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                np.right_shift(planes, np.uint8(bit_of(dz, dy, dx)), out=bits)
                np.bitwise_and(bits, np.uint8(1), out=out[dz::2, dy::2, dx::2])
    start = z0 - 2 * k0
    return out[start : start + (z1 - z0), :ny, :nx]
