"""NIfTI-1 (nifti1_io.c) and PNG: the binary headers, checked before SimpleITK opens the file
(``itk_formats`` explains why)."""

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from evaluation.errors import Unusable
from evaluation.readers import codecs, limits
from evaluation.readers.itk_formats.header import Header, _Doubt
from evaluation.readers.untrusted import open_regular

_NIFTI1_SIZE = 348
_NIFTI2_SIZE = 540
# datatype code -> bytes per voxel, for the scalar number types (nifti_datatype_sizes)
_NIFTI_TYPES = {2: 1, 4: 2, 8: 4, 16: 4, 64: 8, 256: 1, 512: 2, 768: 4, 1024: 8, 1280: 8}


@dataclass(frozen=True)
class NiftiHeader:
    byte_order: str  # "<" or ">"
    dims: tuple[int, ...]  # dim[1..dim[0]], x first
    datatype: int
    vox_offset: int  # where the library starts reading pixels (max(348, int(vox_offset)))
    pixdim: tuple[float, ...] = ()  # pixdim[1..7] as stored (float32), x first
    scl_slope: float = 0.0  # the stored scaling: value = stored * scl_slope + scl_inter
    scl_inter: float = 0.0

    @property
    def nbytes(self) -> int:
        return math.prod(self.dims) * _NIFTI_TYPES[self.datatype]

    @property
    def scaled(self) -> bool:
        """Whether the header scales the stored values: nibabel's rule
        (``Nifti1Header.get_slope_inter``: a slope of 0 or not finite means none)."""
        return math.isfinite(self.scl_slope) and self.scl_slope != 0 and (self.scl_slope, self.scl_inter) != (1.0, 0.0)


def parse_nifti(head: bytes) -> NiftiHeader:
    """The NIfTI-1 header in ``head`` (its first 348 bytes or more; the extender after them is
    checked by the caller), as nifti1_io reads it;
    refuses anything but a single-file NIfTI-1 image of scalar numbers."""
    if len(head) < _NIFTI1_SIZE:
        raise _Doubt("is too short for a NIfTI header; the file is truncated or not NIfTI")
    for order in "<>":
        sizeof_hdr = struct.unpack_from(order + "i", head, 0)[0]
        if sizeof_hdr == _NIFTI2_SIZE and head[4:7] in (b"n+2", b"ni2"):
            raise _Doubt("is a NIfTI-2 file, which this reader cannot read; save it as NIfTI-1 (.nii or .nii.gz)")
        if sizeof_hdr == _NIFTI1_SIZE:
            break
    else:
        raise _Doubt("is not a NIfTI-1 file (its header size field is not 348)")
    magic = head[344:348]
    if magic != b"n+1\0":
        if magic[:1] == b"n" and magic[1:2] in (b"i", b"+"):
            raise _Doubt(
                f"has NIfTI magic {magic.rstrip(bytes(1)).decode('ascii', 'replace')!r}; only single-file NIfTI-1 ('n+1', header and pixels in one .nii) is accepted"
            )
        raise _Doubt("is an Analyze file or has no NIfTI magic; only single-file NIfTI-1 ('n+1') is accepted")
    dim = struct.unpack_from(order + "8h", head, 40)
    if not 1 <= dim[0] <= 7:  # need_nhdr_swap decides by dim[0]: it must agree with sizeof_hdr
        raise _Doubt(f"has dim[0] = {dim[0]} in its NIfTI header; expected 1 to 7")
    dims = dim[1 : dim[0] + 1]
    if min(dims) < 1:
        raise _Doubt(f"has image size {dims} in its NIfTI header; every size must be at least 1")
    datatype = struct.unpack_from(order + "h", head, 70)[0]
    if datatype not in _NIFTI_TYPES:
        raise _Doubt(f"has NIfTI datatype code {datatype}; expected a scalar number type")
    vox_offset = struct.unpack_from(order + "f", head, 108)[0]
    if not math.isfinite(vox_offset) or vox_offset >= 2**31:
        raise _Doubt(f"has vox_offset = {vox_offset} in its NIfTI header")
    pixdim = struct.unpack_from(order + "8f", head, 76)[1:]
    slope, inter = struct.unpack_from(order + "2f", head, 112)
    return NiftiHeader(order, tuple(dims), datatype, max(_NIFTI1_SIZE, int(vox_offset)), pixdim, slope, inter)


# datatype code -> numpy type of the stored values
FLOAT_TYPES = (16, 64)
_NIFTI_DTYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4", 1024: "i8", 1280: "u8"}


def stored_array(path: Path, header: Header, display: str) -> np.ndarray:
    """The pixel values of a NIfTI file ``check`` accepted, as stored: before the header's
    ``scl_slope``/``scl_inter``, which ITK applies in float32 where nibabel's ``get_fdata``
    applies them in float64. In array axis order (z, y, x); the size is the one the check bounded."""
    nifti = header.fields["nifti"]
    with open_regular(path, display) as f:
        if header.encoding == "deflate":
            try:
                data = codecs.prefix(codecs.GZIP, f.read, nifti.vox_offset + nifti.nbytes)[nifti.vox_offset :]
            except Unusable as exc:
                raise Unusable(f"{display}: cannot be read as .nii.gz ({exc}); the file may be truncated or corrupt") from None
        else:
            f.seek(nifti.vox_offset)
            data = f.read(nifti.nbytes)
    if len(data) < nifti.nbytes:
        raise Unusable(f"{display}: is truncated: its NIfTI header declares {nifti.nbytes} bytes of pixel data")
    dtype = np.dtype(_NIFTI_DTYPES[nifti.datatype]).newbyteorder(nifti.byte_order)
    dims = list(nifti.dims)
    while len(dims) > 1 and dims[-1] == 1:  # trailing dimensions of one voxel, as ITK drops them
        dims.pop()
    array = np.frombuffer(data, dtype).reshape(dims[::-1])
    return array.astype(dtype.newbyteorder("="))


def _nifti_extension(name: str) -> tuple[str, str]:
    """(base name, extension) as nifti_find_file_extension splits them: the extension must be
    all lower or all upper case, or the library looks for other files."""
    ext = name[-7:] if name.lower().endswith(".nii.gz") else name[-4:]
    letters = ext.replace(".", "")
    if letters != letters.lower() and letters != letters.upper():
        raise _Doubt(f"has the mixed-case extension {ext!r}; rename it to {ext.lower()!r}")
    return name[: -len(ext)], ext


def _check_nifti(f: BinaryIO, size: int, path: Path) -> Header:
    base, ext = _nifti_extension(path.name)
    compressed = ext.lower() == ".nii.gz"
    if compressed:
        sibling = base + (".nii" if ext.islower() else ".NII")
        if os.path.lexists(path.with_name(sibling)):  # nifti_findimgname tries it before the file itself
            raise _Doubt(f"the NIfTI library would read the file {sibling} beside it instead; remove one of the two")
        try:
            head = codecs.prefix(codecs.GZIP, f.read, _NIFTI1_SIZE + 4)
        except Unusable as exc:
            raise _Doubt(f"is not a gzip-compressed NIfTI file ({exc}); name an uncompressed file .nii") from None
    else:
        head = f.read(_NIFTI1_SIZE + 4)
    nifti = parse_nifti(head)
    if len(head) > _NIFTI1_SIZE and head[_NIFTI1_SIZE] != 0:
        raise _Doubt("has NIfTI header extensions, which are not accepted (label maps carry none); save it without them")
    if compressed:  # the library decompresses what comes before the pixels, byte by byte
        if nifti.vox_offset > limits.NIFTI_MAX_VOX_OFFSET:
            raise _Doubt(
                f"has vox_offset = {nifti.vox_offset} in its NIfTI header: its pixels would start after more than "
                f"{limits.NIFTI_MAX_VOX_OFFSET} bytes; save it with its pixels right after the header"
            )
        return Header(ext.lower(), size, 0, "deflate", {"nifti": nifti, "nbytes": nifti.nbytes, "skip": nifti.vox_offset})
    if nifti.vox_offset + nifti.nbytes > size:
        raise _Doubt(
            f"is truncated: its NIfTI header declares {nifti.nbytes} bytes of pixel data from byte "
            f"{nifti.vox_offset}, but the file has {size} bytes"
        )
    return Header(ext.lower(), size, nifti.vox_offset, "raw", {"nifti": nifti, "nbytes": nifti.nbytes})


# --------------------------------------------------------------------------------------------
# PNG

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _check_png(f: BinaryIO, size: int, path: Path) -> Header:
    head = f.read(33)
    if head[:8] != _PNG_SIGNATURE:
        raise _Doubt("is not a PNG file (its PNG signature is missing)")
    if len(head) < 33 or head[12:16] != b"IHDR" or struct.unpack(">I", head[8:12])[0] != 13:
        raise _Doubt("is not a valid PNG file (its IHDR chunk is missing)")
    width, height = struct.unpack(">II", head[16:24])
    if not (1 <= width < 2**31 and 1 <= height < 2**31):
        raise _Doubt(f"has PNG size {width} x {height}")
    return Header(".png", size, 8, "deflate")
