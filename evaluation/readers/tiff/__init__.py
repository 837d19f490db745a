"""TIFF images from untrusted files: parsed and decoded here, every size bounded first.

tifffile is not used to read submitted TIFFs. Its structure parsing has more surface than a
label image needs (dozens of vendor flavours, several of which open other files: OME,
Micro-Manager, NDTiff) and costs grow faster than linearly with the number of pages (65,536
one-pixel pages took minutes); without imagecodecs its decoders ignore the expected size
(an LZMA strip of 393 KB decoded to 5.3 GB). This module reads the subset that label images
use, and reads it the way tifffile does (the shape of tifffile's first series, the same
values; the tests compare the two on files tifffile writes):

- **Structure.** Classic TIFF and BigTIFF, either byte order. The IFD chain is walked once
  with its length bounded (``limits.TIFF_MAX_PAGES``), loops refused, at most ``limits.TIFF_MAX_SEGMENTS`` strips
  or tiles over all pages, out-of-line values inside the file (``readers.limits``). Only the
  tags a label image needs are read; vendor metadata is never parsed and no other file is
  ever opened.
- **Shape.** As tifffile's first series: the shape in a tifffile "shaped" description, an
  ImageJ hyperstack's images/channels/slices/frames, else a stack of identical pages. The
  pages of the series must agree in size, type and storage (else the file is refused).
- **Data.** Uncompressed, deflate (zlib), LZMA or PackBits; predictor none or horizontal
  differencing; 1-bit, 8, 16, 32, 64-bit integers and 16, 32, 64-bit floats. Every strip or
  tile lies inside the file and decodes through ``readers.codecs`` to at most its own size
  (deflate and LZMA with an output limit, one stream, a dictionary limit; PackBits compiled,
  its stored size bounded by what its output can need, before it is read). LZW and JPEG
  need codecs that are not installed here and are refused with a message saying what to
  use instead.
- **Size.** Shape and dtype come from the IFDs alone (``probe``); ``max_voxels`` refuses a
  larger declared image before any data is read. ``TiffArray`` reads regions page by page.

Problems raise ``errors.Unusable`` with a one-line message naming the file by its
``display`` name; anything else a bug of this module is, and is reported as one.

The package: ``structure`` (the IFD chain and the tags of each page), ``series`` (the first
series as tifffile defines it) and ``array`` (``TiffArray``: regions read page by page).
"""

from pathlib import Path

import numpy as np

from evaluation.readers.tiff.array import TiffArray

__all__ = ["TiffArray", "open_array", "probe", "read"]


def open_array(path: Path, display: str | None = None, max_voxels: int | None = None) -> TiffArray:
    """The first image series of ``path``, checked from its IFDs and read page by page."""
    return TiffArray(path, display, max_voxels)


def probe(path: Path, display: str | None = None) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and (native) dtype from the IFDs alone; no image data is read."""
    with TiffArray(path, display) as array:
        return array.shape, array.dtype


def read(path: Path, display: str | None = None, max_voxels: int | None = None) -> np.ndarray:
    """The whole first image series."""
    with TiffArray(path, display, max_voxels) as array:
        return array.read()
