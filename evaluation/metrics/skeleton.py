"""3-D skeletons of single instances, computed on small boxes instead of the whole volume.

``skimage.morphology.skeletonize`` on a 3-D mask is Lee et al. (1994) thinning: repeated
sweeps over the whole array, each deleting "simple" border voxels after a test on their
3x3x3 neighbourhood. Everything it decides for a voxel depends on that neighbourhood only,
and it pads the array with zeros itself. Hence:

- the skeleton of a mask equals the skeleton of the mask's bounding box grown by one voxel
  of background (the outside of the box is background either way);
- two parts of a mask that are not 26-connected never see each other, and a part that has
  stopped changing stays unchanged in later sweeps, so each 26-connected component can be
  thinned on its own box.

The references (Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d, ``localize.py``
``get_centerline_overlap``) thin every instance on the full volume; the results here are
identical voxel for voxel (checked by the tests against full-volume thinning), in time
proportional to the boxes.
"""

import numpy as np
from skimage.morphology import skeletonize

# Components are split only when labelling the instance's box (4 bytes a voxel) stays small.
_MAX_LABELLED_BOX = 1 << 26


def _box(coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return coords.min(axis=1), coords.max(axis=1) + 1


def _thin(mask: np.ndarray) -> np.ndarray:
    """Lee thinning of ``mask`` (already surrounded by background); voxel coordinates."""
    return np.asarray(np.nonzero(skeletonize(mask)))


def skeleton_voxels(voxels: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """Sorted flat indices of the skeleton of the instance whose sorted flat indices in a
    volume of ``shape`` are ``voxels``."""
    if voxels.size == 0:
        return np.zeros(0, np.int64)
    coords = np.asarray(np.unravel_index(voxels, shape))
    low, high = _box(coords)
    box_shape = tuple(int(h - l) + 2 for l, h in zip(low, high))  # one voxel of margin each side
    mask = np.zeros(box_shape, dtype=bool)
    local = coords - low[:, None] + 1
    mask[tuple(local)] = True
    del local
    parts = []
    if mask.size <= _MAX_LABELLED_BOX:
        parts = _by_component(mask)
    if not parts:
        parts = [_thin(mask)]
    skeleton = np.concatenate(parts, axis=1) + (low[:, None] - 1)
    flat = np.ravel_multi_index(tuple(skeleton), shape)
    flat.sort()
    return flat.astype(np.int64, copy=False)


def _by_component(mask: np.ndarray) -> list[np.ndarray]:
    """Thin each 26-connected component of ``mask`` on its own box (coordinates in ``mask``);
    an empty list when there is only one component (thin the whole box then)."""
    import cc3d
    from scipy import ndimage

    labels, count = cc3d.connected_components(mask, connectivity=26, return_N=True)
    if count <= 1:
        return []
    parts = []
    for label, box in enumerate(ndimage.find_objects(labels), start=1):
        if box is None:
            continue
        grown = tuple(slice(s.start - 1, s.stop + 1) for s in box)  # mask has a background margin
        part = _thin(labels[grown] == label)
        parts.append(part + np.array([s.start for s in grown])[:, None])
    return parts


def skeletonize_full(mask: np.ndarray) -> np.ndarray:
    """The reference's way (full volume), for tests and benchmarks: boolean skeleton."""
    return skeletonize(mask.astype(np.uint8)) > 0
