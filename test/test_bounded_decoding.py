"""One refusal, blamed once; one set of bounded decoders; the third round of hostile inputs
(issue 22) closed where they are decoded. Small inputs, in process: the command-line runs of
the same attacks are in the hostile corpus (``helpers/hostile_work.py``)."""

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import time
import tracemalloc
import zipfile
import zlib

import h5py
import numpy as np
import pytest
import tifffile
from helpers.hostile_work import _local_header, overlapping_zip

from evaluation import contract
from evaluation.archive import Limits, extract
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file, participant_file, printable
from evaluation.readers import codecs, hdf5, limits, regions, tiff, untrusted, zarr_store

# --------------------------------------------------------------------------------------------
# One refusal, blame assigned by whoever knows whose file it is


def test_a_refusal_becomes_the_participants_or_the_organizers_error():
    with pytest.raises(SubmissionError, match="^x.tif: broken$"), participant_file():
        raise Unusable("x.tif: broken")
    with pytest.raises(PhaseError, match="^truth: broken$"), organizer_file():
        raise Unusable("truth: broken")
    with pytest.raises(PhaseError), participant_file():  # the inner owner decides first
        with organizer_file():
            raise Unusable("truth: broken")


def test_an_unassigned_refusal_or_any_other_exception_is_our_bug():
    for exc in (Unusable("nobody said whose"), KeyError("x"), ValueError("y")):
        outcome = contract.failure("case", exc)
        assert outcome["kind"] == "internal" and "traceback" in outcome


@pytest.mark.parametrize(
    "characters",
    ["\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\u2064", "\ufeff", "\xad", "\u2028", "\u2029", "\U000e0041", "\u202e"],
)
def test_every_format_and_separator_character_is_escaped(characters):
    shown = printable(f"case_2{characters}.nii.gz matches no test case")
    assert shown.isprintable() and characters not in shown
    assert characters.encode("unicode_escape").decode() in shown
    assert printable("plain é ü 日本 text") == "plain é ü 日本 text"


# --------------------------------------------------------------------------------------------
# The decoders: output and work bounded, nothing after the data


RAW = bytes(range(256)) * 64


@pytest.mark.parametrize(
    "codec,compress",
    [("zlib", zlib.compress), ("gzip", gzip.compress), ("bz2", bz2.compress), ("xz", lzma.compress)],
)
def test_streams_decode_exactly_and_refuse_more_less_and_trailing_data(codec, compress):
    data = compress(RAW)
    assert codecs.decode(codec, data, len(RAW), exact=True) == RAW
    with pytest.raises(Unusable, match="more data than it can hold"):
        codecs.decode(codec, data, len(RAW) - 1)
    with pytest.raises(Unusable, match="instead of"):
        codecs.decode(codec, data, len(RAW) + 1, exact=True)
    with pytest.raises(Unusable, match="data after its compressed stream"):
        codecs.decode(codec, data + b"junk", len(RAW))
    with pytest.raises(Unusable, match="truncated"):
        codecs.decode(codec, data[: len(data) // 2], len(RAW))


@pytest.mark.parametrize(
    "codec,empty",
    [("gzip", gzip.compress(b"", mtime=0)), ("bz2", bz2.compress(b"")), ("xz", lzma.compress(b""))],
    ids=["gzip", "bz2", "xz"],  # not the bytes: every worker collects the same names
)
def test_hundreds_of_thousands_of_empty_members_cost_linear_time(codec, empty):
    """The member bound refuses at once; without it (an archive's budget) the input handed to
    the decoder in steps keeps every copy of what follows a member small: linear time."""
    many = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[codec](RAW) + empty * 100_000
    started = time.perf_counter()
    with pytest.raises(Unusable, match=f"more than {limits.MAX_STREAMS} concatenated"):
        codecs.decode(codec, many, len(RAW), members=limits.MAX_STREAMS)
    assert time.perf_counter() - started < 1
    started = time.perf_counter()
    assert codecs.decode(codec, many, len(RAW), members=1 << 20) == RAW
    assert time.perf_counter() - started < 15  # quadratic copying took hours at this size


def test_gzip_zero_padding_is_skipped_where_allowed_only():
    data = gzip.compress(RAW) + bytes(3 << 20)
    assert codecs.decode("gzip", data, len(RAW), padding=True) == RAW
    with pytest.raises(Unusable):
        codecs.decode("gzip", data, len(RAW))


def test_an_xz_dictionary_beyond_the_limit_is_refused_without_allocating_it():
    data = bytearray(lzma.compress(RAW))
    size = (data[12] + 1) * 4
    data[16] = 0x28  # LZMA2 dictionary of 4 GiB - 1
    data[12 + size - 4 : 12 + size] = zlib.crc32(bytes(data[12 : 12 + size - 4])).to_bytes(4, "little")
    tracemalloc.start()
    with pytest.raises(Unusable, match="MiB of memory"):
        codecs.decode("xz", bytes(data), len(RAW))
    assert tracemalloc.get_traced_memory()[1] < 64 << 20
    tracemalloc.stop()


def test_packbits_is_decoded_as_tifffile_reads_it_and_its_input_bounded():
    encoded = b"\x02abc\xfdz\x80\x00q"
    assert codecs.packbits(encoded, 100) == b"abczzzzq"
    assert codecs.packbits(b"\x05ab", 100) == b"ab"  # a literal run cut short by the end is kept
    with pytest.raises(Unusable, match="more data than it can hold"):
        codecs.packbits(b"\xf0x", 10)
    started = time.perf_counter()
    with pytest.raises(Unusable, match="longer than"):
        codecs.packbits(b"\x80" * (8 << 20), 1024)
    assert time.perf_counter() - started < 1


def test_headers_that_state_a_size_are_checked_before_decoding():
    import numcodecs

    for name, codec in (("blosc", numcodecs.Blosc()), ("zstd", numcodecs.Zstd()), ("lz4", numcodecs.LZ4())):
        data = codec.encode(RAW)
        assert bytes(getattr(codecs, name)(data, len(RAW), True)) == RAW
        with pytest.raises(Unusable, match="more data than its chunk holds"):
            getattr(codecs, name)(data, len(RAW) - 1, False)


# --------------------------------------------------------------------------------------------
# JSON by element count


def test_json_is_bounded_by_its_element_count_before_parsing():
    assert untrusted.json_shape(b'{"a": [1, 2, {"b": "x,y:[{"}], "c": 3}') == (3, 9)
    with pytest.raises(Unusable, match="more than 1000 elements"):
        untrusted.parse_json(b"[" + b"{}," * 1000 + b"{}]", "predictions.json", max_elements=1000)
    assert untrusted.parse_json(b"[" + b"0," * 99 + b"0]", "x", max_elements=1000) == [0] * 100


# --------------------------------------------------------------------------------------------
# Readers: work bounded before decoding


def _sharded(folder, shape, inner, entries):
    import json

    folder.mkdir()
    (folder / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "array",
                "shape": list(shape),
                "data_type": "uint8",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shape)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0,
                "codecs": [
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": list(inner),
                            "codecs": [{"name": "bytes"}],
                            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                            "index_location": "end",
                        },
                    }
                ],
            }
        )
    )
    (folder / "c" / "0").mkdir(parents=True)
    data, index = entries
    (folder / "c" / "0" / "0").write_bytes(data + np.asarray(index, "<u8").tobytes())


def test_shard_indexes_are_checked_whole_before_any_inner_chunk_is_decoded(tmp_path):
    count = 16 * 16
    shared = np.tile(np.array([[0, 1]], np.uint64), (count, 1))
    _sharded(tmp_path / "shared", (16, 16), (1, 1), (b"\x07", shared))
    with pytest.raises(Unusable, match="overlap"):
        zarr_store.open_array(tmp_path / "shared", "a")[...]
    own = np.stack([np.arange(count, dtype=np.uint64), np.ones(count, np.uint64)], axis=1)
    _sharded(tmp_path / "own", (16, 16), (1, 1), (bytes(range(count)), own))
    assert (zarr_store.open_array(tmp_path / "own", "a")[...] == np.arange(count, dtype=np.uint8).reshape(16, 16)).all()
    into_index = own.copy()
    into_index[-1] = (count, 1)  # the last inner chunk's byte is the index's first
    _sharded(tmp_path / "into", (16, 16), (1, 1), (bytes(range(count)), into_index))
    with pytest.raises(Unusable, match="overlap"):
        zarr_store.open_array(tmp_path / "into", "a")[...]


def test_inner_chunks_are_bounded_per_shard_and_per_array(tmp_path, monkeypatch):
    with pytest.raises(Unusable, match="inner chunks; at most"):
        _sharded(tmp_path / "big", (512, 512), (1, 1), (b"", []))
        zarr_store.open_array(tmp_path / "big", "a")
    monkeypatch.setattr(limits, "ZARR_MAX_INNER_CHUNKS", 100)
    count = 16 * 16
    own = np.stack([np.arange(count, dtype=np.uint64), np.ones(count, np.uint64)], axis=1)
    _sharded(tmp_path / "own", (16, 16), (1, 1), (bytes(range(count)), own))
    with pytest.raises(Unusable, match="hold 256 inner chunks of shape"):
        zarr_store.open_array(tmp_path / "own", "a")


def test_hdf5_chunks_are_bounded_by_the_dataset_as_zarr_chunks_are(tmp_path):
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("x", shape=(6, 8, 8), maxshape=(None, None, None), chunks=(64, 2048, 2048), dtype="u1")
    with pytest.raises(Unusable, match=r"chunks \(64, 2048, 2048\) cover"):
        hdf5.open_array(tmp_path / "a.h5")
    with h5py.File(tmp_path / "b.h5", "w") as f:
        f.create_dataset("x", data=np.ones((6, 8, 8), "u1"), maxshape=(None, None, None), chunks=(8, 8, 8))
    with hdf5.open_array(tmp_path / "b.h5") as array:
        assert array.read().sum() == 6 * 64


def test_a_packbits_strip_longer_than_its_output_can_need_is_refused_unread(tmp_path):
    path = tmp_path / "p.tif"
    tifffile.imwrite(path, np.ones((4, 4), np.uint8))
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        at, offsets, counts = page.tags["Compression"].valueoffset, page.tags["StripOffsets"], page.tags["StripByteCounts"]
        at_offsets, at_counts = offsets.valueoffset, counts.valueoffset
    data = bytearray(path.read_bytes())
    data[at : at + 2] = (32773).to_bytes(2, "little")
    payload = b"\x80" * (1 << 20) + b"\x0f" + b"\x01" * 16
    data[at_offsets : at_offsets + 4] = len(data).to_bytes(4, "little")
    data[at_counts : at_counts + 4] = len(payload).to_bytes(4, "little")
    path.write_bytes(bytes(data) + payload)
    with pytest.raises(Unusable, match="PackBits strip or tile is stored in 1048593 bytes"):
        tiff.read(path)


def test_every_region_reader_is_a_region_array(tmp_path):
    import zarr

    from evaluation.suites.cellmap.volumes import ArrayVolume, ZarrVolume

    zarr.open_array(str(tmp_path / "z"), mode="w", shape=(4, 4), chunks=(2, 2), dtype="u1", zarr_format=2)[...] = 1
    tifffile.imwrite(tmp_path / "t.tif", np.ones((4, 4), np.uint8))
    with h5py.File(tmp_path / "h.h5", "w") as f:
        f["x"] = np.ones((4, 4), np.uint8)
    z = zarr_store.open_array(tmp_path / "z", "z")
    with tiff.open_array(tmp_path / "t.tif") as t, hdf5.open_array(tmp_path / "h.h5") as h:
        for array in (z, t, h, ZarrVolume(z, "z"), ArrayVolume(np.ones((4, 4)))):
            assert isinstance(array, regions.RegionArray), type(array)
            assert array.read((slice(0, 2), slice(1, 3))).sum() == 4 and array.stored((slice(0, 4), slice(0, 4)))


# --------------------------------------------------------------------------------------------
# Archives: methods, overlaps, dictionaries, extended headers


def test_zip_entries_other_than_stored_or_deflate_are_refused(tmp_path):
    for method, name in ((zipfile.ZIP_LZMA, "LZMA"), (zipfile.ZIP_BZIP2, "bzip2")):
        archive = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(archive, "w", method) as z:
            z.writestr("crop1/a", b"x" * 100)
        with pytest.raises(Unusable, match=f"compressed with {name}; only stored and deflate"):
            extract(archive, tmp_path / name)


def test_overlapping_zip_entries_are_refused_before_anything_is_written(tmp_path):
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(overlapping_zip(8, 1 << 20, lambda i: f"pad/{i}"))
    with zipfile.ZipFile(archive) as z:  # zipfile itself reads every entry, each a valid stream
        assert len(z.read("pad/0")) > 1 << 20 and z.testzip() is None
    with pytest.raises(Unusable, match="overlap"):
        extract(archive, tmp_path / "out")
    assert not any((tmp_path / "out").iterdir())


def test_a_zip_entry_must_decode_to_exactly_its_size_and_crc(tmp_path):
    data = zlib.compress(b"a" * 1000)[2:-4]
    body = _local_header(b"x", zlib.crc32(b"b" * 1000), len(data), 1000) + data
    directory = (
        struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, zlib.crc32(b"b" * 1000), len(data), 1000, 1, 0, 0, 0, 0, 0, 0
        )
        + b"x"
    )
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), len(body), 0)
    (tmp_path / "crc.zip").write_bytes(body + directory + end)
    with pytest.raises(Unusable, match="CRC"):
        extract(tmp_path / "crc.zip", tmp_path / "out")


@pytest.mark.parametrize("kind", [b"L", b"K", b"x", b"g"])
def test_tar_extended_headers_are_capped_before_tarfile_reads_them(tmp_path, kind):
    from helpers.hostile_work import _raw_header, deflate_parts

    size = 64 << 20
    parts = [_raw_header("././@LongLink" if kind in b"LK" else "pax", kind, size), (b"a" * (1 << 20), size >> 20), bytes(1024)]
    (tmp_path / "a.tar.gz").write_bytes(deflate_parts(parts))
    tracemalloc.start()
    with pytest.raises(Unusable, match="extended header"):
        extract(tmp_path / "a.tar.gz", tmp_path / "out")
    assert tracemalloc.get_traced_memory()[1] < 16 << 20
    tracemalloc.stop()


def test_compressed_tars_are_decoded_by_the_bounded_decoders(tmp_path):
    for mode in ("w:gz", "w:bz2", "w:xz", "w"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode=mode) as tar:
            info = tarfile.TarInfo("crop1/a")
            info.size = len(RAW)
            tar.addfile(info, io.BytesIO(RAW))
        archive = tmp_path / f"a.tar{mode[2:] and '.' + mode[2:]}"
        archive.write_bytes(buffer.getvalue())
        out = extract(archive, tmp_path / mode.replace(":", "_"), Limits())
        assert (out / "crop1" / "a").read_bytes() == RAW


# --------------------------------------------------------------------------------------------
# NRRD skips, NIfTI extensions: what the image library would walk byte by byte


def test_a_gzip_nrrd_may_skip_only_a_little(tmp_path):
    from evaluation.readers import itk_formats

    def nrrd(skip: int) -> bytes:
        header = f"NRRD0004\ntype: uint8\ndimension: 3\nsizes: 4 4 2\nencoding: gzip\nbyte skip: {skip}\n\n"
        return header.encode() + gzip.compress(bytes(skip) + bytes(range(32)))

    (tmp_path / "ok.nrrd").write_bytes(nrrd(1000))
    assert itk_formats.read(tmp_path / "ok.nrrd").array.ravel().tolist() == list(range(32))
    (tmp_path / "far.nrrd").write_bytes(nrrd(limits.MAX_COMPRESSED_SKIP + 1))
    with pytest.raises(Unusable, match="'byte skip' of 1048577 bytes of compressed data"):
        itk_formats.info(tmp_path / "far.nrrd")


@pytest.mark.parametrize("compressed", [False, True])
def test_nifti_header_extensions_and_far_pixels_are_refused(tmp_path, compressed):
    import SimpleITK as sitk

    from evaluation.readers import itk_formats

    name = "a.nii.gz" if compressed else "a.nii"
    sitk.WriteImage(sitk.GetImageFromArray(np.ones((2, 3, 4), np.uint8)), str(tmp_path / "plain.nii"))
    data = bytearray((tmp_path / "plain.nii").read_bytes())
    assert data[348:352] == bytes(4)
    write = (lambda b: gzip.compress(bytes(b))) if compressed else bytes
    (tmp_path / name).write_bytes(write(data))
    assert itk_formats.read(tmp_path / name).array.sum() == 24
    extended = data[:348] + b"\x01\x00\x00\x00" + struct.pack("<ii", 16, 6) + bytes(8) + data[352:]
    struct.pack_into("<f", extended, 108, 368.0)
    (tmp_path / name).write_bytes(write(extended))
    with pytest.raises(Unusable, match="header extensions"):
        itk_formats.info(tmp_path / name)
    if compressed:
        far = data[:352] + bytes(1 << 17) + data[352:]
        struct.pack_into("<f", far, 108, 352.0 + (1 << 17))
        (tmp_path / name).write_bytes(write(far))
        with pytest.raises(Unusable, match="vox_offset"):
            itk_formats.info(tmp_path / name)


# --------------------------------------------------------------------------------------------
# panoptica's maximize_merge with a running intersection


def _maximize_merge_by_definition(ov, scores, threshold, strict):
    """The rule as written before (a pass over every pair for each candidate): the oracle."""
    from evaluation.suites.segmentation.instances import Matching, passes

    matching, used, best = Matching(), set(), {}
    for k in np.argsort(-scores, kind="stable"):
        ref, pred = int(ov.ref[k]), int(ov.pred[k])
        if pred in used:
            continue
        if ref in matching.pairs:
            merged = matching.pairs[ref] + [pred]
            inter = sum(int(ov.inter[(ov.ref == ref) & (ov.pred == p)].sum()) for p in merged)
            score = inter / (int(ov.ref_size[ref]) + int(ov.pred_size[merged].sum()) - inter)
            if score > best[ref]:
                matching.add(ref, pred)
                used.add(pred)
                best[ref] = score
        elif passes(scores[k], threshold, strict):
            matching.add(ref, pred)
            used.add(pred)
            best[ref] = float(scores[k])
    return matching


@pytest.mark.parametrize("seed", range(6))
def test_maximize_merge_matches_its_definition(seed):
    from evaluation.suites.segmentation.instances import Overlaps, maximize_merge

    rng = np.random.default_rng(seed)
    ref = rng.integers(0, 6, size=(12, 14)).repeat(2, axis=0)
    pred = rng.integers(0, 9, size=(24, 14)) * (rng.random((24, 14)) < 0.8)
    ov = Overlaps.of(ref.astype(np.uint32), pred.astype(np.uint32))
    scores = ov.iou()
    for threshold, strict in ((0.5, False), (0.1, True), (0.0, False)):
        fast = maximize_merge(ov, scores, threshold, strict)
        assert fast.pairs == _maximize_merge_by_definition(ov, scores, threshold, strict).pairs


def test_maximize_merge_of_twelve_thousand_fragments_is_fast():
    from evaluation.suites.segmentation.instances import Overlaps, maximize_merge

    ref = np.zeros((40, 40, 40), np.uint32)
    ref[...] = 1
    pred = np.zeros_like(ref)
    pred[:24] = 1
    rest = pred[24:].reshape(-1)
    rest[::2][:12_000] = np.arange(2, 12_002, dtype=np.uint32)
    ov = Overlaps.of(ref, pred)
    started = time.perf_counter()
    matching = maximize_merge(ov, ov.iou(), 0.5, False)
    assert time.perf_counter() - started < 2
    assert len(matching.pairs[0]) == 12_001
