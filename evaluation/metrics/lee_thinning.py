"""Lee et al. (1994) 3-D thinning that visits only the object's voxels.

``skimage.morphology.skeletonize`` (3-D: Lee thinning, as used by the FISBe reference) sweeps
the whole array six times per iteration: once per border direction (in the order W, E, S, N,
U, B of its implementation) it collects, in raster order, every foreground voxel whose
neighbour in that direction is background and that is deletable (not an end point, Euler
invariant, simple), then re-checks the candidates one after the other and deletes those still
simple; it stops after an iteration without deletions. For thin neurons the array is >99 %
background, so almost all of that time is spent skipping zeros.

This module runs the same procedure over the list of foreground voxels kept in raster order,
so candidates, their order and every decision are those of the full sweep, and the result is
the same skeleton, voxel for voxel (checked against scikit-image by the tests). The voxel
tests are written from their geometric definitions:

- end point: exactly one foreground voxel among the 26 neighbours;
- simple (Lee's N(v)-labelling): the foreground among the 26 neighbours forms at most one
  26-connected component;
- Euler invariant: deleting the voxel leaves the Euler characteristic of the union of closed
  unit cubes unchanged, i.e. 1 - (faces not shared) + (edges not shared) - (corners not
  shared) == 0.

Compiled with numba (``metrics.jit``'s policy: :func:`available`). The kernels below are plain Python
until the first thinning (or :func:`warm_up`) compiles them: numba picks the folder of its
cache when a function is compiled, and in a read-only install that folder has to be set up
first (:func:`_cache_folder`), which changes the environment and the temporary folder. Doing
it then, not at import, keeps importing this module free of side effects.
"""

import os

import numpy as np

from evaluation import numba_cache

_KERNELS = ("_gather", "_is_simple", "_is_euler_invariant", "_thin")  # compiled in this order
_compiled = False

BORDERS = ((0, -1, 0), (0, 1, 0), (0, 0, 1), (0, 0, -1), (1, 0, 0), (-1, 0, 0))  # W, E, S, N, U, B as (dz, dy, dx)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Neighbour offsets (index (dz+1)*9 + (dy+1)*3 + (dx+1), centre 13) and the sharing
    tables for adjacency, faces, edges and corners of the centre voxel."""
    offsets = [(dz, dy, dx) for dz in (-1, 0, 1) for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    index: dict[tuple[int, ...], int] = {o: i for i, o in enumerate(offsets)}
    adjacency = np.full((27, 26), -1, np.int64)
    for i, a in enumerate(offsets):
        near = [j for j, b in enumerate(offsets) if j not in (i, 13) and max(abs(x - y) for x, y in zip(a, b)) <= 1]
        adjacency[i, : len(near)] = near
    faces = np.array([index[o] for o in offsets if sum(map(abs, o)) == 1], np.int64)
    edges = []
    for axis in range(3):
        others = [a for a in range(3) if a != axis]
        for s1 in (-1, 1):
            for s2 in (-1, 1):
                shared = []
                for d1, d2 in ((s1, 0), (0, s2), (s1, s2)):
                    o = [0, 0, 0]
                    o[others[0]], o[others[1]] = d1, d2
                    shared.append(index[tuple(o)])
                edges.append(shared)
    corners = []
    for s in [(a, b, c) for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]:
        corners.append([index[(a, b, c)] for a in (0, s[0]) for b in (0, s[1]) for c in (0, s[2]) if (a, b, c) != (0, 0, 0)])
    return np.array(offsets, np.int64), adjacency, faces, np.array(edges, np.int64), np.array(corners, np.int64)


OFFSETS, ADJACENCY, FACES, EDGES, CORNERS = _tables()


# --------------------------------------------------------------------------------------------
# Kernels: plain Python here, replaced by their numba-compiled versions by _compile()


def _gather(img: np.ndarray, v: int, steps: np.ndarray, out: np.ndarray) -> None:
    for k in range(27):
        out[k] = img[v + steps[k]]


def _is_simple(nb: np.ndarray, adjacency: np.ndarray, label: np.ndarray, stack: np.ndarray) -> bool:
    components = 0
    for k in range(27):
        label[k] = 0
    for start in range(27):
        if start == 13 or nb[start] == 0 or label[start] != 0:
            continue
        components += 1
        if components > 1:
            return False
        label[start] = components
        top = 0
        stack[top] = start
        top += 1
        while top > 0:
            top -= 1
            i = stack[top]
            for j in range(26):
                n = adjacency[i, j]
                if n < 0:
                    break
                if nb[n] != 0 and label[n] == 0:
                    label[n] = components
                    stack[top] = n
                    top += 1
    return True


def _is_euler_invariant(nb: np.ndarray, faces: np.ndarray, edges: np.ndarray, corners: np.ndarray) -> bool:
    change = 1
    for f in range(6):
        if nb[faces[f]] == 0:
            change -= 1
    for e in range(12):
        if nb[edges[e, 0]] == 0 and nb[edges[e, 1]] == 0 and nb[edges[e, 2]] == 0:
            change += 1
    for c in range(8):
        alone = True
        for j in range(7):
            if nb[corners[c, j]] != 0:
                alone = False
                break
        if alone:
            change -= 1
    return change == 0


def _thin(
    img: np.ndarray,
    voxels: np.ndarray,
    steps: np.ndarray,
    borders: np.ndarray,
    adjacency: np.ndarray,
    faces: np.ndarray,
    edges: np.ndarray,
    corners: np.ndarray,
) -> np.ndarray:
    alive = voxels.copy()
    count = alive.size
    candidates = np.empty(count, np.int64)
    nb = np.zeros(27, np.uint8)
    label = np.zeros(27, np.int64)
    stack = np.zeros(32, np.int64)
    unchanged = 0
    while unchanged < 6:
        unchanged = 0
        for b in range(6):
            step = borders[b]
            found = 0
            for i in range(count):
                v = alive[i]
                if img[v + step] != 0:
                    continue
                _gather(img, v, steps, nb)
                total = 0
                for k in range(27):
                    total += nb[k]
                if total == 2:  # end point
                    continue
                if not _is_euler_invariant(nb, faces, edges, corners):
                    continue
                if not _is_simple(nb, adjacency, label, stack):
                    continue
                candidates[found] = v
                found += 1
            changed = False
            for i in range(found):
                v = candidates[i]
                _gather(img, v, steps, nb)
                if _is_simple(nb, adjacency, label, stack):
                    img[v] = 0
                    changed = True
            if changed:
                kept = 0
                for i in range(count):
                    if img[alive[i]] != 0:
                        alive[kept] = alive[i]
                        kept += 1
                count = kept
            else:
                unchanged += 1
    return alive[:count].copy()


# --------------------------------------------------------------------------------------------
# Compiling


def _cache_folder() -> bool:
    """numba's cache for this module's folder in a read-only install (``numba_cache``)."""
    return numba_cache.use_install_cache([os.path.dirname(os.path.abspath(__file__))])


def _compile() -> None:
    """Replaces each kernel in this module by its numba-compiled version (in place, so that
    the compiled kernels call each other compiled), after the cache folder is set up.
    Compiling itself happens on a kernel's first call, or is loaded from the cache."""
    global _compiled
    if _compiled:
        return
    _cache_folder()
    from evaluation.metrics import jit  # numba is imported here, after its cache folder is set

    namespace = globals()
    for name in _KERNELS:
        namespace[name] = jit.numba.njit(cache=True)(namespace[name])
    _compiled = True


def available() -> bool:
    """Whether the compiled thinning can be used (``jit``'s switch); otherwise
    ``metrics.skeleton`` thins with scikit-image (the same skeleton, slower)."""
    from evaluation.metrics import jit

    return jit.compiled()


def warm_up() -> None:
    """Compile (or load from numba's cache) once, e.g. in a parent process before it forks
    its workers, so that each worker does not pay for it again. If compiling fails, the
    scikit-image path is used from then on (same results, slower)."""
    from evaluation.metrics import jit

    mask = np.zeros((3, 3, 5), np.uint8)
    mask[1, 1, 1:4] = 1
    jit.warm_up("Lee thinning", lambda: thin_box(mask), [__file__])


def thin_box(mask: np.ndarray, voxels: np.ndarray | None = None) -> np.ndarray:
    """Raster-order flat indices (into ``mask``) of the Lee skeleton of ``mask``, a 3-D array
    whose outermost layer is background; ``voxels``, if given, are its foreground's sorted flat
    indices (saves a pass over the array)."""
    _compile()
    img = np.ascontiguousarray(mask, dtype=np.uint8)
    strides = (img.shape[1] * img.shape[2], img.shape[2], 1)
    steps = OFFSETS @ np.asarray(strides, np.int64)
    borders = np.array([dz * strides[0] + dy * strides[1] + dx * strides[2] for dz, dy, dx in BORDERS], np.int64)
    flat = img.reshape(-1)
    voxels = np.flatnonzero(flat) if voxels is None else voxels
    return _thin(flat, np.asarray(voxels, np.int64), steps, borders, ADJACENCY, FACES, EDGES, CORNERS)
