"""The hostile corpus, third round: uploads that spend the grader's work or memory before its
own checks run (issue 22). Each kind builds its phase and submission from the helpers of
``hostile.py``; ``test_hostile_corpus.py`` runs them with the rest.

Decoders that copy what follows each compressed member (concatenated empty streams), shards
of a million one-voxel inner chunks, skips and header extensions a library walks byte by
byte, compressed members that declare a 4 GiB dictionary, overlapping zip entries, tar
extended headers read whole before any check, a matching that is cubic in the instances,
HDF5 chunks far larger than their dataset, PackBits no-op bytes, fan-outs without a finite
default, a job list of millions of empty objects, and names whose invisible characters make
a line read as something else.
"""

import bz2
import io
import json
import lzma
import shutil
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import tifffile
from helpers.hostile import (
    CASE_FAILURE,
    GEOMETRY,
    MARKER,
    SCORED,
    Kind,
    _multiclass_fails,
    _scores_like_native,
    annotators_phase,
    cellmap_phase,
    cellmap_submission,
    cellmap_with,
    fisbe_phase,
    fisbe_submission,
    grand_challenge,
    itk_image,
    multiclass_phase,
    multiclass_submission,
    multiclass_with,
    truth_map,
    truth_mito,
    zarr_v3,
    zipped_cellmap,
)

# --------------------------------------------------------------------------------------------
# Compressed streams built without compressing gigabytes


def deflate_parts(parts, wbits: int = 31) -> bytes:
    """A gzip (``wbits`` 31) or zlib (15) stream of ``parts``: bytes as they are, or
    ``(unit, count)`` for ``unit`` repeated ``count`` times, compressed once and its
    compressed form repeated (each repetition follows a full flush, which resets the
    compressor's state, so the same input compresses to the same bytes)."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    body, crc, adler, total = [], 0, 1, 0
    for part in parts:
        unit, count = (part, 1) if isinstance(part, bytes) else part
        if not count:
            continue
        first = raw.compress(unit) + raw.flush(zlib.Z_FULL_FLUSH)
        body.append(first)
        if count > 1:
            again = raw.compress(unit) + raw.flush(zlib.Z_FULL_FLUSH)
            body.append(again * (count - 1))
        for _ in range(count):
            crc, adler = zlib.crc32(unit, crc), zlib.adler32(unit, adler)
        total += len(unit) * count
    body.append(raw.flush(zlib.Z_FINISH))
    stream = b"".join(body)
    if wbits == 31:
        return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + stream + struct.pack("<II", crc, total % 2**32)
    return b"\x78\xda" + stream + adler.to_bytes(4, "big")


EMPTY_MEMBERS = {
    "gzip": (lambda: zlib.compress(b"", 9, wbits=31), 400_000),  # 20 bytes each: 8 MB
    "bz2": (lambda: bz2.compress(b""), 400_000),  # 14 bytes each: 5.6 MB
    "lzma": (lambda: lzma.compress(b""), 250_000),  # 32 bytes each: 8 MB
}
_STREAMS = {"gzip": lambda d: zlib.compress(d, 6, wbits=31), "bz2": lambda d: bz2.compress(d, 9), "lzma": lzma.compress}


def with_empty_members(codec: str, data: bytes) -> bytes:
    """``data`` compressed by ``codec``, followed by hundreds of thousands of empty members
    of the same format (each valid, each decoding to nothing)."""
    empty, count = EMPTY_MEMBERS[codec]
    return _STREAMS[codec](data) + empty() * count


# --------------------------------------------------------------------------------------------
# 1. Concatenated empty compressed streams


TALL_CHUNK = (48, 48, 4096)  # one chunk of a 48^3 uint8 array: 9.4 MB, within the padding slack


def _tall_chunk_mito(codec: str, tail: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """crop101/mito as 48^3 uint8 in one 48 x 48 x 4096 chunk compressed with ``codec``,
    whose stored bytes are ``tail(raw chunk)``."""

    def mutate(crop: Path) -> None:
        label = crop / "mito"
        shutil.rmtree(label)
        label.mkdir()
        chunk = np.zeros(TALL_CHUNK, np.uint8)
        chunk[:, :, :48] = truth_mito().astype(np.uint8)
        meta = {
            "zarr_format": 2,
            "shape": [48, 48, 48],
            "chunks": list(TALL_CHUNK),
            "dtype": "|u1",
            "compressor": {"id": codec},
            "fill_value": 0,
            "filters": None,
            "order": "C",
        }
        (label / ".zarray").write_text(json.dumps(meta))
        (label / ".zattrs").write_text(json.dumps(GEOMETRY))
        (label / "0.0.0").write_bytes(tail(chunk.tobytes()))

    return mutate


def _tiff_lzma_members(folder: Path) -> None:
    """case_1.tif: one LZMA strip that is the image followed by 250 000 empty xz streams."""
    path = folder / "case_1.tif"
    tifffile.imwrite(path, truth_map(1), compression="lzma")
    _replace_strip(path, with_empty_members("lzma", truth_map(1)[0].tobytes()))  # the first page's strip


def _replace_strip(path: Path, payload: bytes) -> None:
    """Point the first page's only strip at ``payload``, appended to the file."""
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        at_offsets, at_counts = page.tags["StripOffsets"].valueoffset, page.tags["StripByteCounts"].valueoffset
    data = bytearray(path.read_bytes())
    end = len(data)
    data[at_offsets : at_offsets + 4] = end.to_bytes(4, "little")
    data[at_counts : at_counts + 4] = len(payload).to_bytes(4, "little")
    path.write_bytes(bytes(data) + payload)


def _mito_scored(metrics: dict) -> None:
    entry = metrics["case"]["crop101"]["mito"]
    assert entry.get("status") != "failed" and entry["is_missing"] is False, entry


# --------------------------------------------------------------------------------------------
# 2. Shards of a million one-voxel inner chunks


def _sharded(shard: tuple, inner: tuple, shared: bool = False) -> Callable[[Path], None]:
    """crop101/mito (48^3 uint32, the truth's labels) as zarr v3 shards of ``shard`` voxels in
    uncompressed inner chunks of ``inner``; with ``shared``, every index entry points at the
    same first inner chunk's bytes instead of its own."""

    def mutate(crop: Path) -> None:
        values = truth_mito().astype("<u4")
        zarr_v3(
            crop,
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": [48, 48, 48],
                "data_type": "uint32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0,
                "codecs": [
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": list(inner),
                            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                            "index_location": "end",
                        },
                    }
                ],
                "attributes": GEOMETRY,
            },
        )
        per_shard = tuple(s // i for s, i in zip(shard, inner))
        nbytes = int(np.prod(inner)) * 4
        for corner in np.ndindex(*(48 // s for s in shard)):
            block = values[tuple(slice(c * s, (c + 1) * s) for c, s in zip(corner, shard))]
            # inner chunks in C order of their positions, each C-ordered
            pieces = block.reshape(per_shard[0], inner[0], per_shard[1], inner[1], per_shard[2], inner[2])
            data = np.ascontiguousarray(pieces.transpose(0, 2, 4, 1, 3, 5)).tobytes()
            count = int(np.prod(per_shard))
            index = np.empty((count, 2), "<u8")
            index[:, 0] = 0 if shared else np.arange(count, dtype=np.uint64) * nbytes
            index[:, 1] = nbytes
            path = crop / "mito" / "c" / "/".join(map(str, corner))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data + index.tobytes())

    return mutate


def _one_shard_of_a_million_inner_chunks(crop: Path) -> None:
    """crop101/mito declared as one 128 x 128 x 64 shard of one-voxel inner chunks (2^20),
    all pointing at the same 4 bytes: 16 MiB of index, a few KB compressed."""
    zarr_v3(
        crop,
        {
            "zarr_format": 3,
            "node_type": "array",
            "shape": [128, 128, 64],
            "data_type": "uint32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [128, 128, 64]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": [1, 1, 1],
                        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                        "index_location": "end",
                    },
                }
            ],
            "attributes": GEOMETRY,
        },
    )
    index = np.zeros((1 << 20, 2), "<u8")
    index[:, 1] = 4
    (crop / "mito" / "c" / "0" / "0").mkdir(parents=True)
    (crop / "mito" / "c" / "0" / "0" / "0").write_bytes(bytes(4) + index.tobytes())


# --------------------------------------------------------------------------------------------
# 3., 4. NRRD byte skips, NIfTI header extensions


def _nrrd_gzip_skip(skip: int) -> Callable[[Path], None]:
    """case_1.nrrd, gzip-encoded, skipping ``skip`` decompressed bytes before its 384 voxels:
    about 1 MB for a skip of 10^9 (zeros compress 1000:1)."""

    def write(folder: Path) -> None:
        header = "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 8 8 6\nspacings: 1 1 2\nendian: little\n"
        header += f"encoding: gzip\nbyte skip: {skip}\n\n"
        unit = 1 << 20
        body = deflate_parts([(bytes(unit), skip // unit), bytes(skip % unit), truth_map(1).tobytes()])
        (folder / "case_1.nrrd").write_bytes(header.encode() + body)

    return write


def _nifti_header(vox_offset: int, extender: bytes) -> bytes:
    """A NIfTI-1 header (348 bytes + 4-byte extender) of the 8 x 8 x 6 uint8 truth map."""
    header = bytearray(348)
    struct.pack_into("<i", header, 0, 348)
    struct.pack_into("<8h", header, 40, 3, 8, 8, 6, 1, 1, 1, 1)
    struct.pack_into("<hh", header, 70, 2, 8)  # datatype uint8, bitpix
    struct.pack_into("<8f", header, 76, 1.0, 1.0, 1.0, 2.0, 0, 0, 0, 0)  # pixdim (qfac, x, y, z)
    struct.pack_into("<f", header, 108, float(vox_offset))
    struct.pack_into("<ff", header, 112, 1.0, 0.0)  # scl_slope, scl_inter
    struct.pack_into("<h", header, 254, 1)  # sform code
    for row, values in enumerate(((-1.0, 0, 0, 0), (0, -1.0, 0, 0), (0, 0, 2.0, 0))):
        struct.pack_into("<4f", header, 280 + 16 * row, *values)
    header[344:348] = b"n+1\x00"
    return bytes(header) + extender


def _nifti_extension(gzipped: bool, extension_bytes: int, flagged: bool = True) -> Callable[[Path], None]:
    """case_1.nii(.gz) whose pixels start at 352 + ``extension_bytes``: one header extension
    of that size (``flagged``), or just that much padding after an extender of zeros."""

    def write(folder: Path) -> None:
        offset = 352 + extension_bytes
        extender = b"\x01\x00\x00\x00" if flagged else bytes(4)
        head = _nifti_header(offset, extender)
        first = struct.pack("<ii", extension_bytes, 6) if flagged else b""
        padding = extension_bytes - len(first)
        unit = 1 << 20
        pixels = np.ascontiguousarray(truth_map(1)).tobytes()
        if gzipped:
            data = deflate_parts([head + first, (bytes(unit), padding // unit), bytes(padding % unit), pixels])
            (folder / "case_1.nii.gz").write_bytes(data)
        else:
            (folder / "case_1.nii").write_bytes(head + first + bytes(padding) + pixels)

    return write


# --------------------------------------------------------------------------------------------
# 5.-8. Archives: dictionaries, overlapping entries, extended headers


def _zip_lzma(properties: bytes | None) -> Callable[[Path], Path]:
    """The CellMap submission zipped with LZMA entries (zip method 14); with ``properties``,
    the first entry's LZMA properties replaced (5D FF FF FF FF: a 4 GiB dictionary)."""

    def build(root: Path) -> Path:
        source = cellmap_submission(root / "source") / "submission.zarr"
        folder = root / "input"
        folder.mkdir()
        archive = folder / "submission.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_LZMA) as z:
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    z.write(path, path.relative_to(source).as_posix())
        if properties is not None:
            data = bytearray(archive.read_bytes())
            name_length, extra_length = struct.unpack_from("<HH", data, 26)
            start = 30 + name_length + extra_length  # the first entry's data: version (2), size (2), properties
            data[start + 4 : start + 4 + len(properties)] = properties
            archive.write_bytes(bytes(data))
        return folder

    return build


def _tar_xz(dictionary_byte: int | None) -> Callable[[Path], Path]:
    """The CellMap submission as a .tar.xz; with ``dictionary_byte``, its first block header
    declares that LZMA2 dictionary size (0x28: 4 GiB), its CRC32 fixed."""

    def build(root: Path) -> Path:
        source = cellmap_submission(root / "source") / "submission.zarr"
        folder = root / "input"
        folder.mkdir()
        archive = folder / "submission.tar.xz"
        with tarfile.open(archive, "w:xz", preset=6) as tar:
            tar.add(source, arcname="submission.zarr")
        if dictionary_byte is not None:
            data = bytearray(archive.read_bytes())
            size = (data[12] + 1) * 4  # the block header after the 12-byte stream header
            assert data[14:16] == b"\x21\x01", "LZMA2 filter flags expected"
            data[16] = dictionary_byte
            data[12 + size - 4 : 12 + size] = zlib.crc32(bytes(data[12 : 12 + size - 4])).to_bytes(4, "little")
            archive.write_bytes(bytes(data))
        return folder

    return build


def _local_header(name: bytes, crc: int, compressed: int, size: int, method: int = 8) -> bytes:
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, compressed, size, len(name), 0) + name


def _central_entry(name: bytes, crc: int, compressed: int, size: int, offset: int, method: int = 8) -> bytes:
    return (
        struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc, compressed, size, len(name), 0, 0, 0, 0, 0, offset
        )
        + name
    )


def _end_of_directory(count: int, size: int, offset: int) -> bytes:
    return struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, size, offset, 0)


def overlapping_zip(entries: int, kernel_bytes: int, names: Callable[[int], str]) -> bytes:
    """A "quoted overlap" zip bomb: ``entries`` local headers, each followed by a stored
    deflate block that quotes the next header, then one deflate kernel of ``kernel_bytes``
    zeros shared by all: entry i decodes to headers i+1..n and the kernel's output. Every
    entry is a valid deflate stream with its own CRC, and each declares its own modest size."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = raw.compress(bytes(kernel_bytes)) + raw.flush(zlib.Z_FINISH)
    kernel_out = bytes(kernel_bytes)
    encoded = [names(i).encode() for i in range(entries)]
    headers = [b""] * entries
    quoted, quoted_in = b"", b""  # the headers (with their block headers) that entry i decodes first
    for i in range(entries - 1, -1, -1):
        crc = zlib.crc32(kernel_out, zlib.crc32(quoted))
        headers[i] = _local_header(encoded[i], crc, len(quoted_in) + len(kernel), len(quoted) + kernel_bytes)
        block = struct.pack("<BHH", 0, len(headers[i]), 0xFFFF ^ len(headers[i]))
        quoted, quoted_in = headers[i] + quoted, block + headers[i] + quoted_in
    body, directory, position = [], [], 0
    for i in range(entries):
        body.append(headers[i])
        signature, *fields = struct.unpack_from("<IHHHHHIIIHH", headers[i])
        crc, compressed, size = fields[5], fields[6], fields[7]
        directory.append(_central_entry(encoded[i], crc, compressed, size, position))
        position += len(headers[i])
        if i + 1 < entries:
            block = struct.pack("<BHH", 0, len(headers[i + 1]), 0xFFFF ^ len(headers[i + 1]))
            body.append(block)
            position += len(block)
    body.append(kernel)
    position += len(kernel)
    listing = b"".join(directory)
    return b"".join(body) + listing + _end_of_directory(entries, len(listing), position)


def _overlap_bomb(root: Path) -> Path:
    """The CellMap submission zipped, with 96 overlapping entries of 15 MiB each appended as
    a second archive's entries would be: 1.5 GB from about 30 KB."""
    folder = zipped_cellmap(root)
    bomb = overlapping_zip(96, 15 << 20, lambda i: f"pad/{i:03d}")
    (folder / "submission.zip").unlink()
    (folder / "submission.zip").write_bytes(bomb)
    return folder


def _shared_local_header(root: Path) -> Path:
    """Two central-directory entries that point at one local header (same data, two names)."""
    folder = root / "input"
    folder.mkdir()
    data = zlib.compress(b"x" * 1000, 9)[2:-4]
    name = b"crop101/a"
    local = _local_header(name, zlib.crc32(b"x" * 1000), len(data), 1000)
    directory = _central_entry(name, zlib.crc32(b"x" * 1000), len(data), 1000, 0) + _central_entry(
        b"crop101/b", zlib.crc32(b"x" * 1000), len(data), 1000, 0
    )
    body = local + data
    (folder / "submission.zip").write_bytes(body + directory + _end_of_directory(2, len(directory), len(body)))
    return folder


def _raw_header(name: str, kind: bytes, size: int) -> bytes:
    """A ustar header block written field by field (GNU ``L``/``K`` types included)."""
    block = bytearray(512)
    block[0 : len(name)] = name.encode()
    block[100:108] = b"0000644\x00"
    block[108:116] = b"0000000\x00"
    block[116:124] = b"0000000\x00"
    block[124:136] = f"{size:011o}\x00".encode()
    block[136:148] = b"00000000000\x00"
    block[156:157] = kind
    block[257:265] = b"ustar  \x00"
    block[148:156] = b" " * 8
    block[148:156] = f"{sum(block):06o}\x00 ".encode()
    return bytes(block)


def _tar_big_extended_header(kind: bytes, size: int) -> Callable[[Path], Path]:
    """A .tar.gz whose first member is an extended header of ``size`` bytes (GNU long name
    ``L`` or long link ``K``, PAX ``x`` or global ``g``), then a plain file: about 1/1000 of
    ``size`` compressed."""

    def build(root: Path) -> Path:
        folder = root / "input"
        folder.mkdir()
        unit = 1 << 20
        filler = b"a" * unit if kind in (b"L", b"K") else (b"9 a=b\n" * (unit // 6) + b"\n" * (unit % 6))
        blocks = -(-size // 512) * 512
        tail = io.BytesIO()
        with tarfile.open(fileobj=tail, mode="w", format=tarfile.GNU_FORMAT) as tar:
            info = tarfile.TarInfo("crop101/file")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        parts = [_raw_header("././@LongLink" if kind in (b"L", b"K") else "pax", kind, size), (filler, size // unit)]
        parts += [filler[: size % unit], bytes(blocks - size), tail.getvalue()]
        (folder / "submission.tar.gz").write_bytes(deflate_parts(parts))
        return folder

    return build


# --------------------------------------------------------------------------------------------
# 9. maximize_merge over twelve thousand fragments


MERGE_SHAPE = (48, 50, 50)


def merge_phase(root: Path) -> Path:
    """Instance maps with one 40^3 block, matched with panoptica's maximize_merge."""
    from helpers.hostile import _phase_file

    phase = root / f"{MARKER}-phase"
    truth = np.zeros(MERGE_SHAPE, np.uint32)
    truth[4:44, 5:45, 5:45] = 1
    for i in (1, 2):
        itk_image(truth, phase / f"{MARKER}-labels" / f"case_{i}.mha")
    return _phase_file(
        phase,
        f"suite: segmentation\ntruth: {MARKER}-labels\ninput: instances\nmetrics: [dice]\n"
        "instance_metrics: [detection, panoptic]\nmatching: maximize_merge\ndefinition: panoptica\n",
    )


def merge_submission(fragments: int) -> Callable[[Path], Path]:
    """Case 1 covers 60 % of the block with id 1 and puts ``fragments`` single voxels (ids
    2, 3, ...) inside the rest, every other voxel of it; case 2 is the block itself."""

    def build(root: Path) -> Path:
        folder = root / "input"
        prediction = np.zeros(MERGE_SHAPE, np.uint32)
        prediction[4:28, 5:45, 5:45] = 1
        rest = np.zeros(MERGE_SHAPE, bool)
        rest[28:44, 5:45, 5:45] = True
        rest &= (np.indices(MERGE_SHAPE).sum(axis=0) % 2) == 0  # no two fragments touch by a face
        where = np.flatnonzero(rest)[:fragments]
        prediction.reshape(-1)[where] = np.arange(2, 2 + len(where), dtype=np.uint32)
        truth = np.zeros(MERGE_SHAPE, np.uint32)
        truth[4:44, 5:45, 5:45] = 1
        itk_image(prediction, folder / "case_1.mha")
        itk_image(truth, folder / "case_2.mha")
        return folder

    return build


def _all_merged(metrics: dict) -> None:
    assert not metrics["failures"], metrics["failures"]


# --------------------------------------------------------------------------------------------
# 10. HDF5 chunks far larger than the dataset


def _hdf5_huge_chunks(chunks: tuple[int, int, int]) -> Callable[[Path], None]:
    """case_1.h5: the 6 x 8 x 8 label map, resizable, in one gzip chunk of ``chunks``
    (written directly: its stream decodes to the whole chunk, the labels in its corner)."""

    def write(folder: Path) -> None:
        chunk = np.zeros(chunks, np.uint8)
        chunk[:6, :8, :8] = truth_map(1)
        with h5py.File(folder / "case_1.h5", "w") as f:
            dataset = f.create_dataset(
                "labels", shape=(6, 8, 8), maxshape=(None, None, None), chunks=chunks, dtype=np.uint8, compression="gzip"
            )
            dataset.id.write_direct_chunk((0, 0, 0), zlib.compress(chunk.tobytes(), 6))

    return write


def _fisbe_hdf5_huge_chunks(folder: Path) -> None:
    """s0.hdf: the FISBe labels in one (64, 2048, 2048) gzip chunk (256 MiB decoded)."""
    labels = np.zeros((16, 32, 32), np.int32)
    from helpers.hostile import fisbe_labels

    labels[...] = fisbe_labels()
    unit = 1 << 20
    chunk = (64, 2048, 2048)
    rows = bytearray()
    for plane in labels.astype(np.uint8):
        for row in plane:
            rows += row.tobytes() + bytes(chunk[2] - 32)
        rows += bytes((chunk[1] - 32) * chunk[2])
    head = bytes(rows)
    rest = int(np.prod(chunk)) - len(head)
    stream = deflate_parts([head, (bytes(unit), rest // unit), bytes(rest % unit)], wbits=15)
    with h5py.File(folder / "s0.hdf", "w") as f:
        dataset = f.create_dataset(
            "volumes/labels", shape=(16, 32, 32), maxshape=(None, None, None), chunks=chunk, dtype=np.uint8, compression="gzip"
        )
        dataset.id.write_direct_chunk((0, 0, 0), stream)


# --------------------------------------------------------------------------------------------
# 11. PackBits no-op bytes


def _packbits_noops(noops: int) -> Callable[[Path], Path]:
    """img_1_segPred.tif (32 x 32, PackBits) whose one strip is ``noops`` bytes of 0x80 (the
    no-op header) and then the rows as literal runs."""

    def build(root: Path) -> Path:
        from helpers.hostile import annotators_submission

        folder = annotators_submission(root)
        prediction = np.zeros((32, 32), np.uint8)
        prediction[8:24, 10:13] = 1
        path = folder / "img_1_segPred.tif"
        tifffile.imwrite(path, prediction)  # tifffile writes PackBits only with imagecodecs: set the tag here
        with tifffile.TiffFile(path) as tif:
            at = tif.pages[0].tags["Compression"].valueoffset
        data = bytearray(path.read_bytes())
        data[at : at + 2] = (32773).to_bytes(2, "little")
        path.write_bytes(bytes(data))
        literal = b"".join(b"\x1f" + row.tobytes() for row in prediction)
        _replace_strip(path, b"\x80" * noops + literal)
        return folder

    return build


# --------------------------------------------------------------------------------------------
# 12. Fan-out: thousands of model folders


def _many_models(count: int) -> Callable[[Path], Path]:
    """``count`` model folders of the annotators suite, each with both images, zipped."""

    def build(root: Path) -> Path:
        folder = root / "input"
        folder.mkdir()
        prediction = np.zeros((32, 32), np.uint8)
        prediction[8:24, 10:13] = 1
        buffer = io.BytesIO()
        tifffile.imwrite(buffer, prediction)
        data = buffer.getvalue()
        with zipfile.ZipFile(folder / "submission.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for model in range(count):
                for image in ("img_1", "img_2"):
                    z.writestr(f"run_m{model}/{image}_segPred.tif", data)
        return folder

    return build


# --------------------------------------------------------------------------------------------
# 13. A job list of millions of elements


def _gc_elements(element: bytes, count: int) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        folder = grand_challenge(root)
        with open(folder / "predictions.json", "wb") as f:
            f.write(b"[")
            block = (element + b",") * 100_000
            for _ in range(count // 100_000):
                f.write(block)
            f.write(element + b"]")
        return folder

    return build


# --------------------------------------------------------------------------------------------
# 14. Invisible characters


def _invisible_name(characters: str) -> Callable[[Path], Path]:
    """The two cases, plus a copy of case 2 whose name hides ``characters`` before the suffix
    (written under a plain name, then renamed: ITK is not asked to encode it)."""

    def build(root: Path) -> Path:
        folder = multiclass_submission(root)
        itk_image(truth_map(2), folder / "plain.nii.gz")
        (folder / "plain.nii.gz").rename(folder / f"case_2{characters}.nii.gz")
        return folder

    return build


# --------------------------------------------------------------------------------------------
# The kinds


def _cellmap_fails(name, mutate, words) -> Kind:
    return Kind(name, cellmap_phase, cellmap_with(mutate), words, CASE_FAILURE)


KINDS = [
    # 1. concatenated empty members: decoding must not copy what follows each member
    _cellmap_fails(
        "gzip chunk followed by 400 000 empty gzip members",
        _tall_chunk_mito("gzip", lambda raw: with_empty_members("gzip", raw)),
        ("crop101/mito", "streams"),
    ),
    _cellmap_fails(
        "bz2 chunk followed by 400 000 empty bz2 streams",
        _tall_chunk_mito("bz2", lambda raw: with_empty_members("bz2", raw)),
        ("crop101/mito", "streams"),
    ),
    _cellmap_fails(
        "lzma chunk followed by 250 000 empty xz streams",
        _tall_chunk_mito("lzma", lambda raw: with_empty_members("lzma", raw)),
        ("crop101/mito", "streams"),
    ),
    _cellmap_fails(
        "zlib chunk followed by trailing bytes",
        _tall_chunk_mito("zlib", lambda raw: zlib.compress(raw, 6) + b"\x00junk" * 1_000_000),
        ("crop101/mito", "after"),
    ),
    Kind(
        "gzip chunk followed by 8 MB of zero padding",
        cellmap_phase,
        cellmap_with(_tall_chunk_mito("gzip", lambda raw: zlib.compress(raw, 6, wbits=31) + bytes(8 << 20))),
        outcome=SCORED,
        check=_mito_scored,
    ),
    _multiclass_fails("TIFF LZMA strip followed by 250 000 empty xz streams", _tiff_lzma_members, ("case_1.tif", "streams")),
    # 2. shards: inner chunks bounded per shard and per read, their bytes never shared
    _cellmap_fails(
        "zarr v3 shard of 2^20 one-voxel inner chunks", _one_shard_of_a_million_inner_chunks, ("crop101/mito", "inner chunks")
    ),
    _cellmap_fails(
        "zarr v3 shards whose inner chunks share their bytes",
        _sharded((16, 16, 16), (2, 2, 2), shared=True),
        ("crop101/mito", "overlap"),
    ),
    _cellmap_fails(
        "zarr v3 array of 110 592 one-voxel inner chunks in three shards",
        _sharded((16, 48, 48), (1, 1, 1)),
        ("crop101/mito", "inner chunks"),
    ),
    Kind(
        "zarr v3 shard of 13 824 inner chunks of 2^3 voxels",
        cellmap_phase,
        cellmap_with(_sharded((48, 48, 48), (2, 2, 2))),
        outcome=SCORED,
        check=_mito_scored,
    ),
    # 3., 4. skips and header extensions that a library walks byte by byte
    _multiclass_fails("NRRD gzip with a byte skip of 10^9", _nrrd_gzip_skip(1_000_000_000), ("case_1.nrrd", "byte skip")),
    _multiclass_fails("NRRD gzip with a byte skip of 64 MiB", _nrrd_gzip_skip(64 << 20), ("case_1.nrrd", "byte skip")),
    _multiclass_fails(
        "NIfTI .nii.gz with a 1 GiB header extension", _nifti_extension(True, (1 << 30) - 352), ("case_1.nii.gz", "extension")
    ),
    _multiclass_fails(
        "NIfTI .nii.gz with 1 GiB of padding before its pixels",
        _nifti_extension(True, (1 << 30) - 352, flagged=False),
        ("case_1.nii.gz", "vox_offset"),
    ),
    _multiclass_fails("NIfTI .nii with a header extension", _nifti_extension(False, 64), ("case_1.nii", "extension")),
    # 5.-8. archives: stored and deflate members only, dictionaries bounded, overlaps refused,
    # extended headers capped before they are read
    Kind(
        "zip entry with LZMA declaring a 4 GiB dictionary",
        cellmap_phase,
        _zip_lzma(b"\x5d\xff\xff\xff\xff"),
        ("LZMA", "deflate"),
    ),
    Kind("zip of LZMA entries", cellmap_phase, _zip_lzma(None), ("LZMA", "deflate")),
    Kind("tar.xz declaring a 4 GiB dictionary", cellmap_phase, _tar_xz(0x28), ("submission.tar.xz", "memory")),
    Kind("tar.xz of the submission", cellmap_phase, _tar_xz(None), outcome=SCORED, check=_mito_scored),
    Kind("zip entries overlapping one deflate kernel", cellmap_phase, _overlap_bomb, ("overlap",)),
    Kind("zip entries sharing one local header", cellmap_phase, _shared_local_header, ("overlap",)),
    Kind("tar.gz with a 600 MB GNU long name", cellmap_phase, _tar_big_extended_header(b"L", 600 << 20), ("header",)),
    Kind("tar.gz with a 600 MB GNU long link", cellmap_phase, _tar_big_extended_header(b"K", 600 << 20), ("header",)),
    Kind("tar.gz with a 600 MB PAX header", cellmap_phase, _tar_big_extended_header(b"x", 600 << 20), ("header",)),
    Kind("tar.gz with a 600 MB PAX global header", cellmap_phase, _tar_big_extended_header(b"g", 600 << 20), ("header",)),
    # 9. matching cost bounded: a running intersection for maximize_merge
    Kind("maximize_merge over 12 000 fragments", merge_phase, merge_submission(12_000), outcome=SCORED, check=_all_merged),
    # 10. HDF5 chunk extents checked against the dataset, as zarr's are
    _multiclass_fails("HDF5 chunks far larger than the dataset", _hdf5_huge_chunks((64, 2048, 2048)), ("case_1.h5", "chunk")),
    Kind(
        "HDF5 chunks somewhat larger than the dataset",
        multiclass_phase,
        multiclass_with(_hdf5_huge_chunks((8, 8, 8))),
        outcome=SCORED,
        check=_scores_like_native,
    ),
    Kind(
        "FISBe HDF5 chunks far larger than the dataset",
        fisbe_phase,
        lambda r: fisbe_submission(r, _fisbe_hdf5_huge_chunks),
        ("s0.hdf", "chunk"),
        CASE_FAILURE,
    ),
    # 11. PackBits decoded by a compiled loop, its input bounded by what its output needs
    Kind(
        "PackBits strip of 200 MiB of no-op bytes",
        annotators_phase,
        _packbits_noops(200 << 20),
        ("img_1_segPred.tif", "PackBits"),
        CASE_FAILURE,
    ),
    # 12. finite fan-out by default
    Kind("3 000 model folders", annotators_phase, _many_models(3000), ("3000 models", "at most")),
    # 13. JSON bounded by its element count
    Kind(
        "predictions.json of 63 million empty objects",
        multiclass_phase,
        _gc_elements(b"{}", 63_000_000),
        ("predictions.json", "elements"),
    ),
    Kind(
        "predictions.json of 95 million zeros", multiclass_phase, _gc_elements(b"0", 95_000_000), ("predictions.json", "elements")
    ),
    # 14. invisible characters escaped in the participant's line
    Kind("name with U+061C and U+200B", multiclass_phase, _invisible_name("\u061c\u200b"), ("\\u061c\\u200b",)),
    Kind("name with U+FEFF and U+00AD", multiclass_phase, _invisible_name("\ufeff\xad"), ("\\ufeff\\xad",)),
    Kind("name with U+2060 to U+2064", multiclass_phase, _invisible_name("\u2060\u2061\u2062\u2063\u2064"), ("\\u2060",)),
    Kind("name with a line and a paragraph separator", multiclass_phase, _invisible_name("\u2028\u2029"), ("\\u2028\\u2029",)),
    Kind("name with Unicode tag characters", multiclass_phase, _invisible_name("\U000e0041\U000e007f"), ("\\U000e0041",)),
]
