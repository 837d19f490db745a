"""Seeded synthetic FISBe-like data: thin branching tubes ("neurons") that cross each other,
and predictions derived from them with the usual errors (jitter, splits, merges, misses,
false positives, small fragments). Used by the property tests and the benchmark."""

import numpy as np
from scipy import ndimage


def _ball(radius: int) -> np.ndarray:
    r = np.arange(-radius, radius + 1)
    return (r[:, None, None] ** 2 + r[None, :, None] ** 2 + r[None, None, :] ** 2) <= radius * radius + 0.5


def tube(rng, shape, length: int, radius: int, branches: int = 2, start=None) -> np.ndarray:
    """Sorted flat indices of a branching tube: persistent random walks, dilated by a ball."""
    shape = np.asarray(shape)
    point = np.asarray(start, float) if start is not None else rng.uniform(0.2, 0.8, 3) * shape
    direction = rng.normal(size=3)
    paths, todo = [], [(point, direction, length)]
    while todo:
        point, direction, steps = todo.pop()
        direction = direction / np.linalg.norm(direction)
        path = []
        for _ in range(steps):
            direction = direction + rng.normal(0, 0.12, 3)
            direction /= np.linalg.norm(direction)
            point = point + direction
            for axis in range(3):  # reflect at the volume's faces
                if not radius <= point[axis] <= shape[axis] - 1 - radius:
                    direction[axis] = -direction[axis]
                    point[axis] = np.clip(point[axis], radius, shape[axis] - 1 - radius)
            path.append(point.copy())
        paths.append(np.asarray(path))
        if branches > 0 and steps > 20:
            branches -= 1
            at = path[int(rng.integers(len(path) // 4, len(path)))]
            todo.append((np.asarray(at), rng.normal(size=3), steps // 2))
    centre = np.rint(np.concatenate(paths)).astype(np.int64)
    low = np.maximum(centre.min(0) - radius - 1, 0)
    high = np.minimum(centre.max(0) + radius + 2, shape)
    box = np.zeros(tuple(high - low), bool)
    box[tuple((centre - low).T)] = True
    box = ndimage.binary_dilation(box, structure=_ball(radius))
    coords = np.nonzero(box)
    return np.ravel_multi_index(tuple(c + l for c, l in zip(coords, low)), tuple(shape))


def neurons(rng, shape, count: int, length=(150, 400), radius=(1, 3)) -> list[np.ndarray]:
    return [
        tube(
            rng, shape, int(rng.integers(*length)), int(rng.integers(radius[0], radius[1] + 1)), branches=int(rng.integers(0, 4))
        )
        for _ in range(count)
    ]


def gt_stack(shape, instances: list[np.ndarray], dtype=np.uint8) -> np.ndarray:
    """FISBe layout: (N, Z, Y, X), channel c holds c+1 on instance c+1; channels overlap."""
    stack = np.zeros((len(instances),) + tuple(shape), dtype)
    for c, voxels in enumerate(instances):
        stack[c].reshape(-1)[voxels] = c + 1
    return stack


def split_along(voxels: np.ndarray, shape, rng) -> tuple[np.ndarray, np.ndarray]:
    coords = np.asarray(np.unravel_index(voxels, shape))
    axis = int(np.argmax(np.ptp(coords, axis=1)))
    cut = np.quantile(coords[axis], rng.uniform(0.3, 0.7))
    return voxels[coords[axis] < cut], voxels[coords[axis] >= cut]


def prediction(rng, shape, instances: list[np.ndarray], false_positives: int = 2, fragments: int = 3) -> list[np.ndarray]:
    """Predicted instances (sorted flat indices), some erroneous; painted in order they form
    a label image (later ones win where they overlap)."""
    out, merged_into = [], None
    for voxels in instances:
        roll = rng.random()
        if roll < 0.1:  # missed
            continue
        if roll < 0.25:  # split in two
            out.extend(p for p in split_along(voxels, shape, rng) if p.size)
        elif roll < 0.35 and merged_into is not None:  # merged with the previous kept prediction
            out[merged_into] = np.union1d(out[merged_into], voxels)
        elif roll < 0.5:  # partly found
            out.append(split_along(voxels, shape, rng)[0])
        else:  # found, slightly thinner or thicker
            out.append(_reshape(voxels, shape, thicker=rng.random() < 0.5))
        merged_into = len(out) - 1 if out else None
    out += neurons(rng, shape, false_positives, length=(60, 200))
    out += [tube(rng, shape, 8, 1, branches=0) for _ in range(fragments)]  # below 800 voxels: removed
    return [o for o in out if o.size]


def _reshape(voxels: np.ndarray, shape, thicker: bool) -> np.ndarray:
    """The instance dilated by one voxel, or eroded but keeping a shifted part of its rim,
    computed on its box (grown by 2 voxels, clipped to the volume)."""
    coords = np.asarray(np.unravel_index(voxels, shape))
    low = np.maximum(coords.min(axis=1) - 2, 0)
    high = np.minimum(coords.max(axis=1) + 3, shape)
    mask = np.zeros(tuple(high - low), bool)
    mask[tuple(coords - low[:, None])] = True
    if thicker:
        mask = ndimage.binary_dilation(mask)
    else:
        mask = ndimage.binary_erosion(mask) | (mask & ~ndimage.binary_erosion(mask) & np.roll(mask, 1, axis=0))
    found = np.nonzero(mask)
    return np.ravel_multi_index(tuple(c + l for c, l in zip(found, low)), tuple(shape))


def label_image(shape, instances: list[np.ndarray], dtype=np.int32) -> np.ndarray:
    image = np.zeros(int(np.prod(shape)), dtype)
    for label, voxels in enumerate(instances, start=1):
        image[voxels] = label
    return image.reshape(shape)
