"""Index regions of the grader's own array readers (zarr, HDF5, TIFF): the subset of numpy
indexing they accept, normalised once."""

import operator


def select(region, shape: tuple[int, ...]) -> tuple[list[tuple[int, int]], list[int]]:
    """``region`` (``...``, integers, step-1 slices, or a tuple of them) as ``[(start, stop)]``
    per axis of ``shape``, and the axes indexed by an integer (dropped from the result)."""
    ndim = len(shape)
    items = region if isinstance(region, tuple) else (region,)
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if ellipses:
        at = ellipses[0]
        items = items[:at] + (slice(None),) * (ndim - len(items) + 1) + items[at + 1 :]
    if len(items) > ndim:
        raise IndexError(f"too many indices for an array of {ndim} dimensions")
    items = items + (slice(None),) * (ndim - len(items))
    selection, dropped = [], []
    for axis, (item, size) in enumerate(zip(items, shape)):
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step != 1:
                raise IndexError("only slices with step 1 are supported")
            selection.append((start, max(start, stop)))
        elif not isinstance(item, bool) and hasattr(item, "__index__") and type(item).__name__ != "bool_":
            index = operator.index(item)
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
            index %= size
            selection.append((index, index + 1))
            dropped.append(axis)
        else:
            raise IndexError(f"only integers, slices and ... are valid indices, not {type(item).__name__}")
    return selection, dropped
