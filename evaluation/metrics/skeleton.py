"""3-D skeletons of single instances, computed on small boxes instead of the whole volume.

``skimage.morphology.skeletonize`` on a 3-D mask is Lee et al. (1994) thinning: repeated
sweeps over the whole array, each deleting "simple" border voxels after a test on their
3x3x3 neighbourhood. Everything it decides for a voxel depends on that neighbourhood only,
and it pads the array with zeros itself. Hence:

- the skeleton of a mask equals the skeleton of the mask's bounding box grown by one voxel
  of background (the outside of the box is background either way);
- the sweeps only ever act on foreground voxels, so a sweep over the list of foreground
  voxels in raster order makes the same decisions as a sweep over the array
  (``lee_thinning``), in time proportional to the instance instead of its box.

The references (Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``localize.py``
``get_centerline_overlap``) thin every instance on the full volume; the results here are
identical voxel for voxel (checked by the tests against full-volume thinning).
"""

import numpy as np
from skimage.morphology import skeletonize

from evaluation.metrics import lee_thinning

# Below this share of foreground in the box, the voxel-list thinning beats scanning the box.
_SPARSE_SHARE = 0.2


def skeleton_voxels(voxels: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Sorted flat indices of the skeleton of the instance whose sorted flat indices in a
    volume of ``shape`` are ``voxels``."""
    if voxels.size == 0:
        return np.zeros(0, np.int64)
    coords = np.asarray(np.unravel_index(voxels, shape))
    low, high = coords.min(axis=1), coords.max(axis=1) + 1
    box_shape = tuple(int(h - l) + 2 for l, h in zip(low, high))  # one voxel of margin each side
    mask = np.zeros(box_shape, dtype=np.uint8)
    local: tuple[np.ndarray, ...] | np.ndarray = tuple(coords - low[:, None] + 1)
    del coords
    mask[local] = 1
    if lee_thinning.available() and voxels.size < _SPARSE_SHARE * mask.size:
        inside = np.ravel_multi_index(local, box_shape)  # sorted: the box keeps raster order
        del local
        local = np.asarray(np.unravel_index(lee_thinning.thin_box(mask, inside), box_shape))
    else:
        local = np.asarray(np.nonzero(skeletonize(mask)))
    flat = np.ravel_multi_index(tuple(local + (low[:, None] - 1)), shape)
    return np.sort(flat).astype(np.int64, copy=False)
