"""HDF5 and TIFF readers (``readers.hdf5``, ``readers.tiff``) against crafted uploads.

- Every way an HDF5 file can refer to another file (external links at the last and at an
  intermediate level, soft links, virtual datasets, external raw storage, family members) is
  refused through every entry point that reads submitted HDF5, and the "ground truth" the
  file points at is never opened: Linux inotify on its folder sees every open (the detector
  is tested first, including on the attack it has to catch).
- Compression bombs and huge declared shapes are refused or read quickly, each in a fresh
  interpreter limited to 1 GiB of data memory (``RLIMIT_DATA``), whose peak memory is kept.
- On files written by h5py and tifffile the readers return exactly what those libraries
  read, region by region.
- Hypothesis mutates bytes of small valid files: the readers return the libraries' array (or
  the original one) or raise SubmissionError, nothing else, within memory and time limits.
"""

import json
import lzma
import multiprocessing
import os
import resource
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile
from helpers.opens import Opens
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation.errors import PhaseError, Unusable, organizer_file
from evaluation.readers import hdf5, images, tiff
from evaluation.readers.label_stacks import open_labels
from evaluation.readers.slabs import open_slabs
from evaluation.readers.tomo_volumes import open_binary
from evaluation.suites.fisbe.inputs import Sample, prediction_voxel_limit
from evaluation.suites.fisbe.scoring import load_sample

LABELS = np.arange(4 * 6 * 8, dtype=np.uint16).reshape(4, 6, 8) % 5
FISBE_PREDICTION_KEYS = ("volumes/labels", "volumes/gmm_label_cleaned")  # the fisbe phase's default prediction_key


# --------------------------------------------------------------------------------------------
# Detecting that a file was opened


@pytest.fixture
def truth(tmp_path):
    """A "ground-truth" folder the crafted uploads point at."""
    folder = tmp_path / "truth"
    folder.mkdir()
    with h5py.File(folder / "gt.h5", "w") as f:
        f["volumes/labels"] = LABELS
        f["vol"] = LABELS.astype(np.uint8)
    (folder / "raw.bin").write_bytes(LABELS.astype("<u2").tobytes())
    return folder


def test_the_detector_sees_opens_and_nothing_else(truth):
    with Opens(truth) as watch:
        os.stat(truth / "gt.h5")
        os.listdir(truth)
        assert watch.names() == set()
        with open(truth / "raw.bin", "rb"):
            pass
        assert watch.names() == {"raw.bin"}
        with h5py.File(truth / "gt.h5", "r"):  # HDF5's own C-level open
            pass
        assert watch.names() == {"gt.h5"}


def test_the_detector_catches_the_attack_it_guards_against(truth, tmp_path):
    """h5py's ``in`` follows an external link: the naive lookup opens the ground truth."""
    upload = tmp_path / "pred.h5"
    with h5py.File(upload, "w") as f:
        f["volumes"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes")
    with Opens(truth) as watch, h5py.File(upload, "r") as handle:
        assert watch.names() == set()
        assert "volumes/labels" in handle
        assert "gt.h5" in watch.names()


# --------------------------------------------------------------------------------------------
# HDF5 files that refer to other files


def _external_last(path, truth):
    with h5py.File(path, "w") as f:
        f["volumes/labels"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes/labels")
        f["vol"] = h5py.ExternalLink(str(truth / "gt.h5"), "/vol")


def _external_intermediate(path, truth):
    with h5py.File(path, "w") as f:
        f["volumes"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes")


def _soft_to_external(path, truth):
    with h5py.File(path, "w") as f:
        f["elsewhere"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes")
        f["volumes"] = h5py.SoftLink("/elsewhere")
        f["vol"] = h5py.SoftLink("/elsewhere/labels")


def _soft_last(path, truth):
    with h5py.File(path, "w") as f:
        f["hidden"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes/labels")
        f["volumes/labels"] = h5py.SoftLink("/hidden")


def _virtual(path, truth):
    layout = h5py.VirtualLayout(shape=LABELS.shape, dtype=LABELS.dtype)
    layout[...] = h5py.VirtualSource(str(truth / "gt.h5"), "volumes/labels", shape=LABELS.shape)
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("volumes/labels", layout)


def _virtual_unlimited(path, truth):
    """A virtual dataset with an unlimited mapping: HDF5 opens its sources as soon as it is
    asked for the dataset's dataspace."""
    with h5py.File(truth / "grow.h5", "w") as f:
        f.create_dataset("d", data=np.arange(10), maxshape=(None,))
    unlimited = h5py.h5s.UNLIMITED
    with h5py.File(path, "w") as f:
        virtual, source = h5py.h5s.create_simple((10,), (unlimited,)), h5py.h5s.create_simple((10,), (unlimited,))
        virtual.select_hyperslab((0,), (unlimited,), (1,), (1,))
        source.select_hyperslab((0,), (unlimited,), (1,), (1,))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_virtual(virtual, str(truth / "grow.h5").encode(), b"d", source)
        group = f.create_group("volumes")
        h5py.h5d.create(group.id, b"labels", h5py.h5t.NATIVE_INT64, virtual, dcpl=dcpl)


def _external_storage(path, truth):
    with h5py.File(path, "w") as f:
        f.create_dataset("volumes/labels", shape=LABELS.shape, dtype="<u2", external=[(str(truth / "raw.bin"), 0, LABELS.nbytes)])


REFERENCES = {
    "external link, last level": _external_last,
    "external link, intermediate level": _external_intermediate,
    "soft link to an external link": _soft_to_external,
    "soft link, last level": _soft_last,
    "virtual dataset": _virtual,
    "virtual dataset, unlimited mapping": _virtual_unlimited,
    "external raw storage": _external_storage,
}

ENTRY_POINTS = {
    "images.read(key)": lambda p: images.read(p, key="volumes/labels", display="pred.h5"),
    "images.read(only dataset)": lambda p: images.read(p, display="pred.h5"),
    "images.read(max_voxels)": lambda p: images.read(p, key="volumes/labels", display="pred.h5", max_voxels=10**6),
    "open_slabs(key)": lambda p: open_slabs(p, key="volumes/labels", display="pred.h5"),
    "open_slabs(only dataset)": lambda p: open_slabs(p, display="pred.h5"),
    "tomo open_binary (vol, then only dataset)": lambda p: open_binary(p, LABELS.shape, "pred.h5"),
    "sparse open_labels (keys, then only dataset)": lambda p: open_labels(p, FISBE_PREDICTION_KEYS, "pred.h5").__enter__(),
    "hdf5.probe(keys)": lambda p: hdf5.probe(p, display="pred.h5", keys=("volumes/labels", "vol")),
}


@pytest.mark.parametrize("reference", sorted(REFERENCES))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_references_to_other_files_are_refused_unopened(truth, tmp_path, reference, entry):
    upload = tmp_path / "upload" / "pred.h5"
    upload.parent.mkdir()
    REFERENCES[reference](upload, truth)
    with Opens(truth) as watch:
        with pytest.raises(Unusable) as caught:
            ENTRY_POINTS[entry](upload)
        assert watch.names() == set(), f"{reference} via {entry} opened {watch.names()}"
    message = str(caught.value)
    assert message.startswith("pred.h5: ") and "\n" not in message
    assert str(tmp_path) not in message and "truth" not in message


def test_trusted_files_with_links_are_phase_errors(truth, tmp_path):
    path = tmp_path / "label.h5"
    _external_intermediate(path, truth)
    with Opens(truth) as watch:
        with pytest.raises(PhaseError, match="external link"), organizer_file():
            open_slabs(path, key="volumes/labels", display="a label volume")
        with pytest.raises(PhaseError, match="external link"), organizer_file():
            with open_labels(path, ("volumes/labels",), "ground truth"):
                pass
        assert watch.names() == set()


def test_the_only_dataset_search_ignores_linked_datasets(truth, tmp_path):
    """``H5Ovisit`` follows hard links only: a file whose datasets are all links holds none."""
    path = tmp_path / "pred.h5"
    with h5py.File(path, "w") as f:
        f["a"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes/labels")
        f["b"] = h5py.SoftLink("/a")
        f["group/c"] = h5py.ExternalLink(str(truth / "gt.h5"), "/volumes")
        f["real"] = LABELS
    with Opens(truth) as watch:
        assert np.array_equal(images.read(path).array, LABELS)
        with h5py.File(path, "r") as handle:
            assert hdf5.only_dataset(handle, "pred.h5") == "real"
            visited = []
            handle.visititems(lambda name, obj: visited.append(name))  # h5py's walk, for the record
            assert visited == ["group", "real"]
        assert watch.names() == set()


def test_family_members_are_never_opened(tmp_path):
    """The first member of a family-driver file names the others; it is refused alone."""
    folder = tmp_path / "upload"
    folder.mkdir()
    with h5py.File(folder / "pred%d.h5", "w", driver="family", memb_size=4096) as f:
        f["x"] = np.arange(3000)
    assert (folder / "pred1.h5").exists()
    with Opens(folder) as watch:
        with pytest.raises(Unusable, match="pred0.h5"):
            images.read(folder / "pred0.h5")
        assert watch.names() <= {"pred0.h5"}


def test_only_a_bounded_description_attribute_is_read(tmp_path):
    with h5py.File(tmp_path / "a.h5", "w", libver="latest") as f:  # dense attribute storage
        dataset = f.create_dataset("vol", data=LABELS)
        dataset.attrs["description"] = "packed by the challenge's tool"
        dataset.attrs["other"] = np.zeros(10**6)
        huge = f.create_dataset("huge", data=LABELS)
        huge.attrs["description"] = "x" * (1 << 20)
    with hdf5.open_array(tmp_path / "a.h5", "vol") as array:
        assert array.attrs == {"description": "packed by the challenge's tool"}
    with hdf5.open_array(tmp_path / "a.h5", "huge") as array:
        assert array.attrs == {}


def _ome_xml(uuid: str, files: dict[str, str]) -> str:
    planes = "".join(
        f'<TiffData IFD="0" FirstZ="{z}" PlaneCount="1"><UUID FileName="{name}">{ref}</UUID></TiffData>'
        for z, (name, ref) in enumerate(files.items())
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" '
        f'UUID="{uuid}"><Image ID="Image:0"><Pixels ID="Pixels:0" DimensionOrder="XYZCT" Type="uint8" SizeX="4" '
        f'SizeY="3" SizeZ="{len(files)}" SizeC="1" SizeT="1"><Channel ID="Channel:0:0" SamplesPerPixel="1"/>'
        f"{planes}</Pixels></Image></OME>"
    )


def test_multi_file_tiff_flavours_never_open_other_files(tmp_path):
    """A multi-file OME-TIFF names its other planes' files; tifffile (OME enabled) opens
    them. The reader parses the file alone: no other file of the folder is ever opened
    (Micro-Manager and NDTiff companions included)."""
    folder = tmp_path / "upload"
    folder.mkdir()
    files = {
        "s.ome.tif": "urn:uuid:11111111-1111-1111-1111-111111111111",
        "secret.ome.tif": "urn:uuid:22222222-2222-2222-2222-222222222222",
    }
    tifffile.imwrite(
        folder / "s.ome.tif", np.ones((3, 4), np.uint8), description=_ome_xml(files["s.ome.tif"], files), metadata=None
    )
    tifffile.imwrite(
        folder / "secret.ome.tif",
        np.full((3, 4), 7, np.uint8),
        description=_ome_xml(files["secret.ome.tif"], files),
        metadata=None,
    )
    (folder / "NDTiff.index").write_bytes(bytes(64))
    tifffile.imwrite(folder / "s_MMStack_1.ome.tif", np.zeros((3, 4), np.uint8))
    with Opens(folder) as watch, tifffile.TiffFile(folder / "s.ome.tif") as tif:
        assert tif.series[0].asarray()[1].max() == 7  # the attack, with tifffile's defaults
        assert "secret.ome.tif" in watch.names()
    with Opens(folder) as watch:
        assert tiff.read(folder / "s.ome.tif").tolist() == [[1] * 4] * 3
        assert images.read(folder / "s.ome.tif").array.shape == (3, 4)
        with open_slabs(folder / "s.ome.tif") as slabs:
            slabs.read(0, 1)
        with open_labels(folder / "s.ome.tif", (), "s.ome.tif") as labels:
            labels.read((slice(0, 3), slice(0, 4)))
        assert watch.names() == {"s.ome.tif"}


def test_links_and_special_files_are_refused_before_opening(tmp_path, truth):
    (tmp_path / "link.h5").symlink_to(truth / "gt.h5")
    os.mkfifo(tmp_path / "fifo.tif")
    with Opens(truth) as watch:
        with pytest.raises(Unusable, match="symbolic link"):
            hdf5.read(tmp_path / "link.h5")
        with pytest.raises(Unusable, match="symbolic link"):
            images.read(tmp_path / "link.h5")
        assert watch.names() == set()
    with pytest.raises(Unusable, match="named pipe"):
        tiff.read(tmp_path / "fifo.tif")


# --------------------------------------------------------------------------------------------
# Bombs, in a fresh interpreter with 1 GiB of data memory


def _isolated(script: str, limit: int = 1 << 30, timeout: float = 120) -> dict:
    """Run ``script`` (which sets ``result``) in a fresh interpreter under ``RLIMIT_DATA``;
    returns its result with the elapsed time and peak resident memory (``VmHWM``)."""
    program = (
        textwrap.dedent(f"""
        import json, resource, sys, time
        resource.setrlimit(resource.RLIMIT_DATA, ({limit}, {limit}))
        from evaluation.errors import Unusable
        from evaluation.readers import hdf5, tiff
        started = time.monotonic()
        try:
    """)
        + textwrap.indent(textwrap.dedent(script), "    ")
        + textwrap.dedent("""
        except Unusable as exc:
            result = {"refused": str(exc)}
        except MemoryError:
            result = {"memory_error": True}
        result["seconds"] = time.monotonic() - started
        result["peak_mb"] = next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
        print(json.dumps(result))
    """)
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _deflate_bomb(total: int, block: int = 16 << 20) -> bytes:
    """A zlib stream of ``total`` zero bytes, built from one fully flushed block repeated
    (identical input after a full flush compresses to identical bytes): about 1 KB per MB."""
    zero = bytes(block)
    compressor = zlib.compressobj(9)
    head = compressor.compress(zero) + compressor.flush(zlib.Z_FULL_FLUSH)
    body = compressor.compress(zero) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.flush()
    count = total // block
    checksum = 1
    for _ in range(count):
        checksum = zlib.adler32(zero, checksum)
    return head + body * (count - 1) + tail[:-4] + checksum.to_bytes(4, "big")


def _xz_bomb(total: int, block: int = 64 << 20) -> bytes:
    """Concatenated xz streams of zeros (``lzma.decompress`` reads them all)."""
    one = lzma.compress(bytes(block), preset=0)
    return one * (total // block)


def _tiff_bytes(
    width: int,
    length: int,
    strips: list[bytes],
    *,
    compression: int = 1,
    bits: int = 8,
    rows: int | None = None,
    pages: int = 1,
    share_strips: bool = False,
) -> bytes:
    """A minimal little-endian TIFF: ``pages`` IFDs, each with the given strips (or, with
    ``share_strips``, all pointing at the first page's strips)."""
    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    rows = rows or length
    strip_offsets = []
    for strip in strips:
        strip_offsets.append(len(out))
        out += strip
        out += b"\x00" * (len(out) % 2)
    counts = [len(s) for s in strips]
    previous = 4
    for page in range(pages):
        if page and not share_strips:
            strip_offsets = []
            for strip in strips:
                strip_offsets.append(len(out))
                out += strip
                out += b"\x00" * (len(out) % 2)
        out += b"\x00" * (len(out) % 2)
        extra = bytearray()
        ifd = len(out)
        n = len(strips)
        tags = [
            (256, 4, 1, width),
            (257, 4, 1, length),
            (258, 3, 1, bits),
            (259, 3, 1, compression),
            (262, 3, 1, 1),
            (273, 4, n, strip_offsets),
            (277, 3, 1, 1),
            (278, 4, 1, rows),
            (279, 4, n, counts),
        ]
        entries = bytearray()
        value_base = ifd + 2 + 12 * len(tags) + 4
        for code, kind, count, value in tags:
            if count == 1:
                value = value[0] if isinstance(value, list) else value
                field = struct.pack("<I" if kind == 4 else "<HH", *((value,) if kind == 4 else (value, 0)))
            else:
                field = struct.pack("<I", value_base + len(extra))
                extra += struct.pack(f"<{count}I", *value)
            entries += struct.pack("<HHI", code, kind, count) + field
        out += struct.pack("<H", len(tags)) + entries + b"\x00\x00\x00\x00" + extra
        struct.pack_into("<I", out, previous, ifd)
        previous = ifd + 2 + 12 * len(tags)
    return bytes(out)


def _bomb_files(folder: Path) -> dict[str, tuple[str, str]]:
    """Crafted files and the reader call each one is fed to, in the child's words."""
    folder.mkdir(exist_ok=True)
    files = {}
    # HDF5: one 1 MB chunk whose deflate stream (1.6 MB) decodes to 1.6 GB
    path = folder / "deflate.h5"
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset("x", shape=(1000, 1000), dtype="u1", chunks=(1000, 1000), compression="gzip")
        dataset.id.write_direct_chunk((0, 0), _deflate_bomb(1600 << 20))
    files["hdf5 deflate chunk, 1.6 MB -> 1.6 GB"] = (path, "array = hdf5.read(path)[0]")
    # HDF5: an LZF chunk of 4 MB, which could expand 88-fold
    path = folder / "lzf.h5"
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset("x", shape=(1000, 1000), dtype="u1", chunks=(1000, 1000), compression="lzf")
        dataset.id.write_direct_chunk((0, 0), b"\x00\x00" + b"\xe0\xff\x00" * ((4 << 20) // 3))
    files["hdf5 lzf chunk, 4 MB (up to 352 MB)"] = (path, "array = hdf5.read(path)[0]")
    # HDF5: a declared 10^15-voxel dataset, nothing stored
    path = folder / "huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(10**5, 10**5, 10**5), dtype="u1", chunks=(1, 64, 64), compression="gzip")
    files["hdf5 declared 10^15 voxels, max_voxels 10^8"] = (path, "array = hdf5.read(path, max_voxels=10**8)[0]")
    # HDF5: 10^6 channels of 64^3 declared, one chunk stored, read channel group by group
    path = folder / "channels.h5"
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset("x", shape=(10**6, 64, 64, 64), dtype="u1", chunks=(1, 64, 64, 64), compression="gzip")
        dataset[123456, 1, 2, 3] = 7
    files["hdf5 10^6 channels, one stored, read by region"] = (
        path,
        """
        from evaluation.readers import hdf5
        total = 0
        with hdf5.open_array(path) as array:
            for first in range(0, array.shape[0], 1000):
                if array.stored((slice(first, first + 1000),)):
                    for c in range(first, first + 1000):
                        if array.stored((c,)):
                            total += int(array[c].sum())
        result = {"sum": total}
    """,
    )
    # TIFF: one 64 KB strip stored as 850 KB of LZMA streams that decode to 5.3 GB
    path = folder / "lzma.tif"
    path.write_bytes(_tiff_bytes(256, 256, [_xz_bomb(5300 << 20)], compression=34925))
    files["tiff lzma strip, 0.9 MB -> 5.3 GB"] = (path, "array = tiff.read(path)")
    path = folder / "deflate.tif"
    path.write_bytes(_tiff_bytes(256, 256, [_deflate_bomb(1600 << 20)], compression=8))
    files["tiff deflate strip, 1.6 MB -> 1.6 GB"] = (path, "array = tiff.read(path)")
    # TIFF: a page declared 10^5 x 10^5 with one tiny strip
    path = folder / "huge.tif"
    path.write_bytes(_tiff_bytes(100_000, 100_000, [zlib.compress(bytes(1000))], compression=8))
    files["tiff declared 10^10 voxels, max_voxels 10^8"] = (path, "array = tiff.read(path, max_voxels=10**8)")
    files["tiff declared 10^10 voxels, no limit"] = (path, "array = tiff.read(path)")
    # TIFF: 100,000 one-pixel pages sharing one strip
    path = folder / "pages.tif"
    path.write_bytes(_tiff_bytes(1, 1, [b"\x01"], pages=100_000, share_strips=True))
    files["tiff 100,000 pages"] = (path, "array = tiff.read(path)")
    return files


BOMBS = [
    ("hdf5 deflate chunk, 1.6 MB -> 1.6 GB", "refused", "decodes to more than"),
    ("hdf5 lzf chunk, 4 MB (up to 352 MB)", "refused", "lzf chunk that could decode"),
    ("hdf5 declared 10^15 voxels, max_voxels 10^8", "refused", "more voxels than"),
    ("hdf5 10^6 channels, one stored, read by region", "read", None),
    ("tiff lzma strip, 0.9 MB -> 5.3 GB", "refused", "decodes to more than"),
    ("tiff deflate strip, 1.6 MB -> 1.6 GB", "refused", "decodes to more than"),
    ("tiff declared 10^10 voxels, max_voxels 10^8", "refused", "more voxels than"),
    ("tiff declared 10^10 voxels, no limit", "refused", None),
    ("tiff 100,000 pages", "refused", "more than 65536 pages"),
]


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return _bomb_files(tmp_path_factory.mktemp("bombs"))


@pytest.mark.parametrize("name,expected,words", BOMBS, ids=[b[0] for b in BOMBS])
def test_bombs_are_refused_or_read_within_bounds(bombs, name, expected, words):
    path, call = bombs[name]
    script = f"path = {str(path)!r}\n"
    script += textwrap.dedent(call) if "\n" in call else f"{call}\nresult = {{'shape': list(array.shape)}}\n"
    result = _isolated(script)
    print(f"\n{name}: {json.dumps(result)}")
    assert result["seconds"] < 30 and result["peak_mb"] < 600
    if expected == "refused":
        assert "refused" in result, result
        assert words is None or words in result["refused"]
        assert result["refused"].startswith(Path(path).name)
    else:
        assert result == {**result, "sum": 7}


def test_fisbe_refuses_a_million_channels_from_metadata(tmp_path):
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("volumes/labels", shape=(10**6, 8, 16, 16), dtype="u2", chunks=(1, 8, 16, 16), compression="gzip")
    limit = prediction_voxel_limit((8, 16, 16))
    started = time.monotonic()
    with pytest.raises(Unusable, match="more voxels than"):
        with open_labels(tmp_path / "s.h5", FISBE_PREDICTION_KEYS, "s.h5", max_voxels=limit):
            pass
    assert time.monotonic() - started < 5
    assert limit == 8 * 4096 * 8 * 16 * 16


def test_fisbe_scoring_passes_the_limit_to_its_prediction_reader(tmp_path):
    with h5py.File(tmp_path / "truth.h5", "w") as f:
        f["volumes/gt_instances"] = np.zeros((1, 8, 16, 16), np.uint16)
    with h5py.File(tmp_path / "s.h5", "w") as f:
        f.create_dataset("volumes/labels", shape=(10**6, 8, 16, 16), dtype="u2", chunks=(1, 8, 16, 16), compression="gzip")
    sample = Sample(
        sample="s",
        truth=str(tmp_path / "truth.h5"),
        prediction=str(tmp_path / "s.h5"),
        display="s.h5",
        truth_key=("volumes/gt_instances",),
        prediction_key=FISBE_PREDICTION_KEYS,
        partly=False,
        remove_small_components=800,
    )
    with pytest.raises(Unusable, match=r"^s.h5: 'volumes/labels' has shape \(1000000, 8, 16, 16\), more voxels than"):
        load_sample(sample)  # the participant's: grading.scoring assigns it


def test_fisbe_tiff_predictions_have_a_size_guard(tmp_path):
    (tmp_path / "s.tif").write_bytes(_tiff_bytes(20_000, 20_000, [b"\x00" * 100], rows=20_000))
    with pytest.raises(Unusable, match="more voxels than"):
        with open_labels(tmp_path / "s.tif", (), "s.tif", max_voxels=prediction_voxel_limit((4, 5, 6))):
            pass


def test_unstored_regions_are_reported_and_read_as_the_fill_value(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        zero = f.create_dataset("zero", shape=(100, 50, 50), dtype="i2", chunks=(10, 25, 25), compression="gzip")
        zero[15, 30, 40] = 3
        f.create_dataset("fill", shape=(20, 20), dtype="f4", chunks=(5, 5), fillvalue=1.5)
        f.create_dataset("contiguous", shape=(4, 4), dtype="u1")  # never written: not allocated
    with hdf5.open_array(path, "zero") as array:
        assert array.stored((15,)) and array.stored((slice(10, 20), slice(25, 50)))
        assert not array.stored((slice(0, 10),)) and not array.stored((slice(10, 20), slice(0, 25)))
        assert not array.stored((slice(20, 100),))
        assert array[40:60].sum() == 0 and array[15, 30, 40] == 3
    with hdf5.open_array(path, "fill") as array:
        assert array.stored((0, 0)) and np.all(array[:3, :3] == 1.5)
    with hdf5.open_array(path, "contiguous") as array:
        assert not array.stored() and array.read().sum() == 0
    tiff_path = tmp_path / "x.tif"
    strips = [b"", zlib.compress(bytes([1]) * 4 * 2)]
    tiff_path.write_bytes(_tiff_bytes(4, 4, strips, compression=8, rows=2))
    with tiff.open_array(tiff_path) as array:
        assert array.stored() and array.read().tolist() == [[0] * 4, [0] * 4, [1] * 4, [1] * 4]


# --------------------------------------------------------------------------------------------
# Differential: the same values as h5py and tifffile


def _regions(shape, rng, count=6):
    for _ in range(count):
        region = []
        for n in shape:
            a, b = sorted(rng.integers(0, n + 1, 2))
            region.append(slice(int(a), int(max(b, a + 1) if a < n else b)))
        yield tuple(region)
    if len(shape) > 1:
        yield (int(rng.integers(0, shape[0])),)
        yield (slice(None), int(rng.integers(0, shape[1])))


def _hdf5_cases():
    rng = np.random.default_rng(7)
    data = rng.integers(0, 9, (13, 17, 11)).astype(np.uint16)
    chunked = {"chunks": (4, 5, 3)}
    return {
        "gzip": (data, {**chunked, "compression": "gzip"}),
        "gzip 9, edge chunks": (data, {"chunks": (5, 7, 4), "compression": "gzip", "compression_opts": 9}),
        "shuffle + gzip": (data, {**chunked, "compression": "gzip", "shuffle": True}),
        "fletcher32": (data, {**chunked, "fletcher32": True}),
        "shuffle + gzip + fletcher32": (
            data.astype(np.int32) - 4,
            {**chunked, "compression": "gzip", "shuffle": True, "fletcher32": True},
        ),
        "fletcher32, odd chunk bytes": (data.astype(np.uint8), {"chunks": (3, 5, 3), "fletcher32": True}),
        "lzf": (data, {**chunked, "compression": "lzf"}),
        "lzf + shuffle": (data, {**chunked, "compression": "lzf", "shuffle": True}),
        "chunked, no filter": (data, chunked),
        "contiguous": (data, {}),
        "compact": (data[:2, :3], {"compact": True}),
        "big-endian gzip": (data.astype(">u4"), {**chunked, "compression": "gzip", "shuffle": True}),
        "big-endian contiguous float": (data.astype(">f8") / 3, {}),
        "float16": (data.astype(np.float16), {**chunked, "compression": "gzip"}),
        "bool": (data > 4, {**chunked, "compression": "gzip"}),
        "int64 with negatives": (data.astype(np.int64) - 2**40, {**chunked, "compression": "gzip"}),
        "1-d": (data.ravel(), {"chunks": (100,), "compression": "gzip"}),
        "scalar": (np.array(7, np.int16), {}),
        "missing chunks, fill 0": (None, {"fillvalue": 0}),
        "missing chunks, fill 3": (None, {"fillvalue": 3}),
    }


@pytest.mark.parametrize("case", sorted(_hdf5_cases()))
def test_hdf5_reads_like_h5py(tmp_path, case):
    data, options = _hdf5_cases()[case]
    options = dict(options)
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        if data is None:
            dataset = f.create_dataset("x", shape=(20, 30, 9), dtype="i4", chunks=(6, 7, 4), compression="gzip", **options)
            dataset[0:6, 0:7] = 5
            dataset[18:20, 28:30, 8] = -9
            dataset[7:9, 10:12, 1:3] = 2
        elif options.pop("compact", False):
            space = h5py.h5s.create_simple(data.shape)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            h5py.h5d.create(f.id, b"x", h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
            f["x"][...] = data
        else:
            f.create_dataset("x", data=data, **options)
    with h5py.File(path, "r") as f:
        reference = f["x"]
        expected = reference[()]
        with hdf5.open_array(path) as array:
            assert array.shape == expected.shape
            assert array.dtype == expected.dtype.newbyteorder("=") and array.dtype.isnative
            got = array.read()
            assert got.dtype == array.dtype and np.array_equal(got, expected)
            rng = np.random.default_rng(len(case))
            for region in _regions(expected.shape, rng) if expected.ndim else [()]:
                assert np.array_equal(array[region], reference[region]), region


def test_big_endian_labels_come_back_native(tmp_path):
    with h5py.File(tmp_path / "be.h5", "w") as f:
        f.create_dataset("x", data=LABELS.astype(">u4"), chunks=(2, 3, 4), compression="gzip")
    tifffile.imwrite(tmp_path / "be.tif", LABELS.astype(">u4"), byteorder=">", compression="zlib", photometric="minisblack")
    for name in ("be.h5", "be.tif"):
        volume = images.read(tmp_path / name)
        assert volume.array.dtype == np.dtype("=u4") and np.array_equal(volume.array, LABELS)


def test_fletcher32_detects_corruption(tmp_path):
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=LABELS, chunks=LABELS.shape, fletcher32=True)
        info = f["x"].id.get_chunk_info(0)
    data = bytearray(path.read_bytes())
    data[info.byte_offset + 3] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(Unusable, match="fletcher32"):
        hdf5.read(path)
    with h5py.File(path, "r") as f, pytest.raises(OSError):
        f["x"][()]


def test_hdf5_refusals_name_the_fix(tmp_path):
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("scaleoffset", data=LABELS, chunks=(2, 3, 4), scaleoffset=0)
        f.create_dataset("strings", data=np.array([b"a", b"b"]))
        f.create_dataset("compound", data=np.zeros(3, dtype=[("a", "i4"), ("b", "f4")]))
        f.create_dataset("big_chunks", shape=(1 << 16, 1 << 16), dtype="f8", chunks=(1 << 13, 1 << 13))
    with pytest.raises(Unusable, match="scaleoffset, which is not accepted; save the labels as one plain"):
        hdf5.read(path, "scaleoffset")
    for key in ("strings", "compound"):
        with pytest.raises(Unusable, match="expected plain integers or floats"):
            hdf5.read(path, key)
    with pytest.raises(Unusable, match="smaller chunks"):
        hdf5.probe(path, "big_chunks")
    with pytest.raises(Unusable, match="has no dataset 'nothing'"):
        hdf5.read(path, "nothing")
    with pytest.raises(Unusable, match="holds 4 datasets; expected exactly one"):
        hdf5.read(path)


@pytest.mark.parametrize("patch_end", [False, True])
def test_truncated_hdf5_data_is_refused(tmp_path, patch_end):
    """Cut inside the data. With the superblock's end-of-file address patched to the cut,
    HDF5 opens the file and its own dataset check, or the reader's, refuses the data."""
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(10**5, dtype=np.int32))
        f.create_dataset("y", data=np.arange(10**5, dtype=np.int32), chunks=(10**4,), compression="gzip")
        x_data = f["x"].id.get_offset()
        y_last = max((f["y"].id.get_chunk_info(i) for i in range(10)), key=lambda info: info.byte_offset)
    original = bytes(path.read_bytes())
    for key, cut in (("x", x_data + 1000), ("y", y_last.byte_offset + y_last.size // 2)):
        data = bytearray(original)
        if patch_end:
            struct.pack_into("<Q", data, 40, cut)  # version-0 superblock: end-of-file address
        path.write_bytes(bytes(data[:cut]))
        with pytest.raises(Unusable, match=r"^t.h5: .*(truncated|past the end|corrupt)"):
            hdf5.read(path, key)


def _tiff_cases():
    rng = np.random.default_rng(3)
    volume = rng.integers(0, 7, (5, 37, 29)).astype(np.uint16)
    return {
        "uncompressed": (volume, {}),
        "deflate": (volume, {"compression": "zlib"}),
        "lzma": (volume, {"compression": "lzma"}),
        "predictor 2": (volume, {"compression": "zlib", "predictor": 2}),
        "predictor 2, int64": (volume.astype(np.int64) - 3, {"compression": "zlib", "predictor": 2}),
        "tiled": (volume, {"tile": (16, 16)}),
        "tiled deflate": (volume.astype(np.float32) / 3, {"tile": (16, 16), "compression": "zlib"}),
        "strips of 5 rows": (volume, {"rowsperstrip": 5, "compression": "zlib"}),
        "strips of 5 rows, uncompressed": (volume, {"rowsperstrip": 5}),
        "big-endian": (volume.astype(">u4"), {"byteorder": ">", "compression": "zlib"}),
        "big-endian uncompressed": (volume.astype(">i2"), {"byteorder": ">"}),
        "BigTIFF": (volume, {"bigtiff": True, "compression": "lzma"}),
        "single page": (volume[0], {}),
        "four dimensions": (rng.integers(0, 3, (3, 6, 9, 11)).astype(np.uint8), {}),
        "four dimensions, deflate": (rng.integers(0, 3, (3, 6, 9, 11)).astype(np.uint8), {"compression": "zlib"}),
        "1-bit": (volume[0] > 3, {}),
        "1-bit deflate, stack": (volume > 3, {"compression": "zlib"}),
        "ImageJ hyperstack": (volume.astype(np.uint8), {"imagej": True}),
        "ImageJ 5-d": (volume[None, :, None].astype(np.float32), {"imagej": True}),
        "float64 lzma": (volume.astype(np.float64) / 7, {"compression": "lzma"}),
        "RGB": (rng.integers(0, 255, (9, 11, 3)).astype(np.uint8), {"photometric": "rgb"}),
        "planar RGB": (
            rng.integers(0, 255, (3, 9, 11)).astype(np.uint8),
            {"photometric": "rgb", "planarconfig": "separate", "compression": "zlib"},
        ),
        "volumetric tiles": (volume.astype(np.uint8), {"volumetric": True, "tile": (2, 16, 16), "compression": "zlib"}),
        "volumetric page": (volume.astype(np.uint8), {"volumetric": True}),
        "pages without description": (volume, {"metadata": None}),
        "pages without description, deflate": (volume, {"metadata": None, "compression": "zlib"}),
    }


@pytest.mark.parametrize("case", sorted(_tiff_cases()))
def test_tiff_reads_like_tifffile(tmp_path, case):
    data, options = _tiff_cases()[case]
    path = tmp_path / "t.tif"
    tifffile.imwrite(path, data, **options)
    _compare_with_tifffile(path)


def _compare_with_tifffile(path: Path) -> None:
    with tifffile.TiffFile(path) as tif:
        expected = tif.series[0].asarray()
    assert tiff.probe(path) == (expected.shape, expected.dtype.newbyteorder("="))
    with tiff.open_array(path) as array:
        got = array.read()
        assert got.dtype.isnative and got.dtype == expected.dtype.newbyteorder("=") and np.array_equal(got, expected)
        for region in _regions(expected.shape, np.random.default_rng(expected.size)):
            assert np.array_equal(array[region], expected[region]), region


@pytest.mark.parametrize("mode", ["L", "1"])
def test_tiff_packbits_reads_like_tifffile(tmp_path, mode):
    from PIL import Image

    array = (np.arange(37 * 29).reshape(37, 29) % 7).astype(np.uint8)
    image = Image.fromarray(array) if mode == "L" else Image.fromarray(array > 3)
    image.save(tmp_path / "p.tif", compression="packbits")
    _compare_with_tifffile(tmp_path / "p.tif")


def test_tiff_refusals_name_the_fix(tmp_path):
    from PIL import Image

    Image.fromarray(LABELS[0].astype(np.uint8)).save(tmp_path / "lzw.tif", compression="tiff_lzw")
    with pytest.raises(Unusable, match="LZW .*imagecodecs.*; save it uncompressed or with deflate"):
        tiff.read(tmp_path / "lzw.tif")
    (tmp_path / "not.tif").write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(Unusable, match="not.tif: is not a TIFF file"):
        tiff.read(tmp_path / "not.tif")
    tifffile.imwrite(tmp_path / "t.tif", LABELS, photometric="minisblack")
    data = (tmp_path / "t.tif").read_bytes()
    (tmp_path / "t.tif").write_bytes(data[:-200])
    with pytest.raises(Unusable, match="truncated|past the end"):
        tiff.read(tmp_path / "t.tif")
    looped = bytearray(_tiff_bytes(2, 2, [b"\x00" * 4], pages=2))
    first = struct.unpack_from("<I", looped, 4)[0]
    entries = struct.unpack_from("<H", looped, first)[0]
    second = struct.unpack_from("<I", looped, first + 2 + 12 * entries)[0]
    entries2 = struct.unpack_from("<H", looped, second)[0]
    struct.pack_into("<I", looped, second + 2 + 12 * entries2, first)
    (tmp_path / "loop.tif").write_bytes(bytes(looped))
    with pytest.raises(Unusable, match="loop"):
        tiff.read(tmp_path / "loop.tif")


def test_tiff_slabs_decode_only_their_pages(tmp_path, monkeypatch):
    volume = np.random.default_rng(0).integers(0, 255, (30, 20, 10)).astype(np.uint8)
    tifffile.imwrite(tmp_path / "v.tif", volume, compression="zlib")
    decoded = []
    original = tiff.TiffArray._page
    monkeypatch.setattr(tiff.TiffArray, "_page", lambda self, i: decoded.append(i) or original(self, i))
    with open_slabs(tmp_path / "v.tif") as slabs:
        assert np.array_equal(slabs.read(10, 13), volume[10:13])
    assert decoded == [10, 11, 12]


# --------------------------------------------------------------------------------------------
# Fuzzing headers: valid small files with bytes changed


settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
settings.register_profile("fuzz", max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
_FORK = multiprocessing.get_context("fork")


def _tiff_seeds(folder: Path) -> dict[str, bytes]:
    rng = np.random.default_rng(5)
    volume = rng.integers(0, 4, (3, 9, 7)).astype(np.uint8)
    writers = {
        "deflate strips": lambda p: tifffile.imwrite(p, volume, compression="zlib", rowsperstrip=4, photometric="minisblack"),
        "lzma tiles": lambda p: tifffile.imwrite(
            p, np.repeat(volume, 2, axis=1).astype(np.uint16), tile=(16, 16), compression="lzma", photometric="minisblack"
        ),
        "big-endian predictor": lambda p: tifffile.imwrite(
            p, volume.astype(">i2"), byteorder=">", compression="zlib", predictor=2, photometric="minisblack"
        ),
        "imagej": lambda p: tifffile.imwrite(p, volume, imagej=True),
        "plain pages": lambda p: tifffile.imwrite(p, volume, metadata=None, photometric="minisblack"),
        "1-bit": lambda p: tifffile.imwrite(p, volume[0] > 1),
        "packbits": lambda p: p.write_bytes(
            _tiff_bytes(7, 3, [b"\x06" + bytes(range(7)) + b"\xf4\x05\x80\x00\x09"], compression=32773, rows=3)
        ),
    }
    seeds = {}
    for name, write in writers.items():
        path = folder / f"{len(seeds)}.tif"
        write(path)
        seeds[name] = path.read_bytes()
    return seeds


def _hdf5_seeds(folder: Path) -> dict[str, bytes]:
    data = (np.arange(6 * 7 * 5) % 11).astype(np.int16).reshape(6, 7, 5)
    seeds = {}
    for name, options in {
        "gzip shuffle fletcher32, a chunk missing": {
            "chunks": (3, 4, 5),
            "compression": "gzip",
            "shuffle": True,
            "fletcher32": True,
        },
        "gzip big-endian": {"chunks": (6, 7, 5), "compression": "gzip", "dtype": ">i4"},
        "lzf": {"chunks": (2, 7, 5), "compression": "lzf"},
        "contiguous": {},
    }.items():
        path = folder / f"{len(seeds)}.h5"
        options = dict(options)
        dtype = options.pop("dtype", data.dtype)
        with h5py.File(path, "w", libver="latest") as f:
            dataset = f.create_dataset("labels", shape=data.shape, dtype=dtype, **options)
            if "fletcher32" in options:  # chunk (1, 1, 0) is never written: it reads as the fill value
                dataset[0:3] = data[0:3]
                dataset[3:6, 0:4] = data[3:6, 0:4]
            else:
                dataset[...] = data
        seeds[name] = path.read_bytes()
    return seeds


def _mutate(data: bytes, draw) -> bytes:
    data = bytearray(data)
    header = draw(st.booleans())  # most structure sits in the first kilobytes
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, min(len(data), 2048) - 1 if header else len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    if draw(st.integers(0, 9)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


def _judge(kind: str, path: str, original) -> str:
    """Run in a forked child: our reader, then the library on the same bytes."""
    try:
        ours = hdf5.read(path)[0] if kind == "hdf5" else tiff.read(path)
    except Unusable as exc:
        message = str(exc)
        return "refused" if message.startswith("fuzzed") and "\n" not in message else f"bad message: {message!r}"
    try:
        if kind == "hdf5":
            with h5py.File(path, "r") as f:
                reference = f["labels"][()]
        else:
            with tifffile.TiffFile(path) as tif:
                reference = tif.series[0].asarray()
    except Exception:  # noqa: BLE001 - the library may refuse what we read identically to the original
        reference = None
    for expected in (reference, original):
        if (
            expected is not None
            and ours.shape == expected.shape
            and ours.dtype == expected.dtype.newbyteorder("=")
            and np.array_equal(ours, expected, equal_nan=ours.dtype.kind == "f")
        ):
            return "read"
    return f"wrong array: {ours.dtype}{ours.shape} vs library {None if reference is None else (reference.dtype, reference.shape)}"


def _child(connection, kind, path, original):
    limit = 1 << 30
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmData"))
    resource.setrlimit(resource.RLIMIT_DATA, (used + limit, used + limit))
    try:
        verdict = _judge(kind, path, original)
    except MemoryError:
        verdict = "out of memory"
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        verdict = f"raised {type(exc).__name__}: {exc}"
    connection.send(verdict)
    connection.close()


def _verdict(kind: str, path: Path, original, seconds: float = 60) -> str:
    receiver, sender = _FORK.Pipe(duplex=False)
    process = _FORK.Process(target=_child, args=(sender, kind, str(path), original))
    process.start()
    sender.close()
    if not receiver.poll(seconds):
        process.kill()
        process.join()
        return "timed out"
    verdict = receiver.recv()
    process.join()
    return verdict


class _Seeds(dict):
    def __repr__(self) -> str:  # hypothesis prints its arguments when a case fails
        return f"<{len(self)} seed files>"


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seeds")
    found = _Seeds()
    for kind, make in (("tiff", _tiff_seeds), ("hdf5", _hdf5_seeds)):
        for name, data in make(folder).items():
            path = folder / f"seed.{'tif' if kind == 'tiff' else 'h5'}"
            path.write_bytes(data)
            original = hdf5.read(path)[0] if kind == "hdf5" else tiff.read(path)
            found[(kind, name)] = (data, original)
    return found


@pytest.mark.parametrize("kind", ["tiff", "hdf5"])
@given(data=st.data())
def test_mutated_headers_read_right_or_are_refused(seeds, tmp_path_factory, kind, data):
    names = sorted(name for k, name in seeds if k == kind)
    name = data.draw(st.sampled_from(names))
    seed, original = seeds[(kind, name)]
    path = tmp_path_factory.mktemp("fuzz") / f"fuzzed.{'tif' if kind == 'tiff' else 'h5'}"
    path.write_bytes(_mutate(seed, data.draw))
    verdict = _verdict(kind, path, original)
    assert verdict in ("read", "refused"), f"{name}: {verdict}"
