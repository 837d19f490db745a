"""The first image series of a TIFF file, as tifffile defines it: which pages make up the
image and its shape (a tifffile "shaped" description, an ImageJ hyperstack, else a stack of
identical pages)."""

import json
import math
from collections.abc import Callable
from typing import Any

from evaluation.errors import Unusable
from evaluation.readers import limits
from evaluation.readers.tiff.structure import _Page


def _squeeze(shape: tuple[int, ...], axes: str) -> tuple[int, ...]:
    """tifffile's ``squeeze_axes``: length-1 dimensions dropped, except X and Y (and at
    least one dimension kept)."""
    kept = [n for n, a in zip(shape, axes) if n > 1 or a in "XY"]
    return tuple(kept) if kept else (shape[-1],)


def _fits(page_shape: tuple[int, ...], series_shape: tuple[int, ...]) -> bool:
    """Whether pages tile a "shaped" series as tifffile requires: read from the last
    dimension backwards, every page dimension is met by an equal series dimension (series
    dimensions of size 1 may come in between) or by a run of series dimensions whose running
    product reaches the page's running product."""
    page_total, series_total = math.prod(page_shape), math.prod(series_shape)
    if page_total == 0 or series_total == 0:
        return bool(page_total == series_total)
    if series_total % page_total:
        return False
    left = list(series_shape)
    page_product = series_product = 1
    for size in reversed(page_shape):
        page_product *= size
        while left:
            other = left.pop()
            series_product *= other
            if other == size or series_product == page_product:
                break
            if other != 1:
                return False
    return True


def _shaped_metadata(description: str) -> Any:  # a dict when valid (the caller checks)
    if description[:6] == "shape=":
        return {"shape": tuple(int(i) for i in description[7:-1].split(","))}
    return json.loads(description)


def _imagej_metadata(description: str) -> dict[str, Any]:  # values: int, float, bool or str
    result: dict[str, Any] = {}
    converters: tuple[Callable[[str], object], ...] = (int, float, lambda v: {"true": True, "false": False}[v.lower()])
    for line in description.splitlines():
        if "=" not in line:
            continue
        key, text = (part.strip() for part in line.split("=", 1))
        value: object = text
        for convert in converters:
            try:
                value = convert(text)
                break
            except (ValueError, KeyError, OverflowError):
                continue
        result[key] = value
    return result


class _Series:
    """Which pages (or one contiguous run of the file) make up the image, and its shape.
    ``span``: the IFDs that describe the image, which must all agree with the first one
    (even where the data is read as one run from the first page's offset)."""

    def __init__(self, shape: tuple[int, ...], pages: list[_Page], contiguous: int | None, span: list[_Page]):
        self.shape, self.pages, self.contiguous = tuple(int(n) for n in shape), pages, contiguous
        self.span = span


def _dataoffset(pages: list[_Page], shape: tuple[int, ...], single_shaped: bool) -> int | None:
    """tifffile's ``TiffPageSeries.dataoffset``: where the series' data lies in one run."""
    position = 0
    for page in pages:
        if not page.final:
            return None
        if not position:
            position = int(page.offsets[0]) + page.nbytes
            continue
        if position != int(page.offsets[0]):
            return None
        position += page.nbytes
    offset = int(pages[0].offsets[0])
    if len(pages) == 1 and single_shaped:
        return offset
    if position == offset + math.prod(shape) * pages[0].dtype.itemsize:
        return offset
    return None


def _series_shaped(pages: list[_Page], description: str, display: str) -> _Series | None:
    """tifffile's ``_series_shaped`` for the first series."""
    try:
        metadata = _shaped_metadata(description)
        reshape = tuple(metadata["shape"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise Unusable(f"{display}: its tifffile shape description is invalid") from None
    if (
        not isinstance(metadata, dict)
        or len(reshape) > limits.TIFF_MAX_DIMENSIONS
        or not all(isinstance(n, int) and n >= 0 for n in reshape)
    ):
        raise Unusable(f"{display}: its tifffile shape description is invalid")
    keyframe = pages[0]
    size = math.prod(reshape)
    if keyframe.size == 0:
        raise Unusable(f"{display}: has an empty page")
    npages, mod = divmod(size, keyframe.size) if size > 0 else (1, 0)
    if mod:
        return None
    truncated = metadata.get("truncated", False if keyframe.subifds else None)
    given = None
    if "axes" in metadata:
        axes = metadata["axes"]
        given = reshape if isinstance(axes, str) and len(axes) == len(reshape) else None
    chosen = [keyframe]
    if 1 < npages <= len(pages):
        if truncated:
            npages = 1
        elif keyframe.final and keyframe.offset + size * keyframe.dtype.itemsize < pages[1].offset and not keyframe.subifds:
            pass
        else:
            chosen = pages[:npages]
    failed = not _fits(keyframe.shape, reshape)
    if failed or given is None:
        shape = keyframe.shape if len(chosen) == 1 else (len(chosen), *keyframe.shape)
        if failed:
            reshape = shape
    else:
        shape = given
    if keyframe.contiguous and math.prod(reshape) > math.prod(shape) and math.prod(reshape) % math.prod(shape) == 0:
        shape = (math.prod(reshape) // math.prod(shape), *shape)
    if math.prod(shape) == math.prod(reshape):
        shape = reshape
    return _Series(shape, chosen, _dataoffset(chosen, shape, single_shaped=True), pages[: max(1, npages)])


def _series_imagej(pages: list[_Page], description: str, file_size: int, display: str) -> _Series | None:
    """tifffile's ``_series_imagej``."""
    meta = _imagej_metadata(description)
    page = pages[0]
    order = meta.get("order", "czt")
    counts = [meta.get(name, 1) for name in ("frames", "slices", "channels", "images")]
    if not isinstance(order, str) or not all(isinstance(n, int) for n in counts):
        raise Unusable(f"{display}: its ImageJ description is invalid")
    frames, slices, channels, images = counts
    if images < 1 or frames < 1 or slices < 1 or channels < 1:
        return None
    if channels == 1 or (page.shaped[0] > 1 and page.shaped[0] == channels):
        images = frames * slices
    elif images == frames * slices and page.shaped[4] == channels:
        channels = 1
    else:
        images = frames * slices * channels
    if images == 1 and len(pages) > 1:
        images = len(pages)
    if images > limits.MAX_VOXELS:
        raise Unusable(f"{display}: its ImageJ description declares an impossibly large image")
    nbytes = images * page.nbytes
    if not page.final:
        virtual = False
    elif int(page.offsets[0]) + nbytes > file_size:
        return None
    elif images <= 1:
        virtual = True
    elif len(pages) > 1 and int(page.offsets[0]) + nbytes > pages[1].offset:
        virtual = False
    else:
        virtual = True
    chosen = [page] if virtual else pages
    found: tuple[str, tuple[int, ...]] = {
        "czt": ("TZC", (frames, slices, channels)),
        "default": ("TZC", (frames, slices, channels)),
        "ctz": ("ZTC", (slices, frames, channels)),
        "zct": ("TCZ", (frames, channels, slices)),
        "ztc": ("CTZ", (channels, frames, slices)),
        "tcz": ("ZCT", (slices, channels, frames)),
        "tzc": ("CZT", (channels, slices, frames)),
    }.get(order.lower(), ("TZC", (frames, slices, channels)))
    axes, shape = found
    remain = images // math.prod(shape)
    if remain > 1:
        shape, axes = (remain, *shape), "I" + axes
    if page.shaped[0] > 1:
        shape, axes = shape[:-1] + page.shape, axes + page.axes[1:]
    else:
        shape, axes = shape + page.shape, axes + page.axes
    if "S" not in axes:
        shape, axes = shape + (1,), axes + "S"
    if len(shape) > limits.TIFF_MAX_DIMENSIONS:
        raise Unusable(f"{display}: its ImageJ description declares too many dimensions")
    return _Series(_squeeze(shape, axes), chosen, _dataoffset(chosen, shape, single_shaped=True), pages)


def _series(pages: list[_Page], file_size: int, display: str) -> _Series:
    first = pages[0]
    descriptions = [d for d in first.descriptions if d]
    shaped = next(
        (d for d in descriptions if '"mibi.' not in d and (d[:1] == "{" and '"shape":' in d or d[:6] == "shape=")), None
    )
    imagej = next((d for d in descriptions if d[:7] in ("ImageJ=", "SCIFIO=")), None)
    series = None
    if shaped is not None:
        series = _series_shaped(pages, shaped, display)
    elif imagej is not None:
        series = _series_imagej(pages, imagej, file_size, display)
    if series is None:  # a stack of the file's pages
        shape = first.shape if len(pages) == 1 else (len(pages), *first.shape)
        axes = first.axes if len(pages) == 1 else "I" + first.axes
        if "S" not in axes:
            shape, axes = shape + (1,), axes + "S"
        described = shaped is not None or imagej is not None
        series = _Series(_squeeze(shape, axes), pages, _dataoffset(pages, shape, single_shaped=described), pages)
    # every page used must be stored like the first (tifffile would split a plain stack there,
    # or decode later pages with the first page's settings)
    key, final = first.key(), first.final
    if any(page.key() != key or page.final != final for page in series.span[1:]):
        raise Unusable(f"{display}: its pages differ in size, type or storage; save the image as one stack of equal pages")
    return series
