"""Bounded fuzzing of everything that parses participant bytes: the archive unpacker, each
reader and each bounded decoder. Whatever the bytes, the only acceptable failure is the
readers' refusal, ``errors.Unusable`` (which the intake turns into a clear message, exit 2):
any other exception is a bug of ours and fails the test. Nothing may be written outside the
target folder. Readers run in forked workers, as in production, so a crash inside a C
library shows up as a failed case, not a dead grader.

Deterministic in CI (profile "ci"); ``HYPOTHESIS_PROFILE=fuzz`` runs many more examples."""

import io
import os
import tarfile
import zipfile

import h5py
import numpy as np
import SimpleITK as sitk
import tifffile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation import contract, runner
from evaluation.archive import Limits, extract
from evaluation.contract import Task
from evaluation.errors import Unusable
from evaluation.readers import codecs, images, zarr_store

settings.register_profile("ci", max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
settings.register_profile("fuzz", max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _valid_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.zarr/.zgroup", '{"zarr_format": 2}')
        archive.writestr("x.zarr/crop1/a/0.0.0", os.urandom(300) + bytes(3000))
    return buffer.getvalue()


def _valid_tar(mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        data = bytes(5000)
        info = tarfile.TarInfo("dir/file.bin")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _valid_tgz() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = bytes(5000)
        info = tarfile.TarInfo("dir/file.bin")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _mutate(data: bytes, draw) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        position = draw(st.integers(0, len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return bytes(data)


SEEDS = {".zip": _valid_zip(), ".tar.gz": _valid_tgz(), ".tar.xz": _valid_tar("w:xz"), ".tar.bz2": _valid_tar("w:bz2")}


@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_unpacker_survives_any_bytes(tmp_path_factory, suffix, data):
    folder = tmp_path_factory.mktemp("fuzz")
    payload = _mutate(SEEDS[suffix], data.draw) if data.draw(st.booleans()) else data.draw(st.binary(max_size=2000))
    archive = folder / f"upload{suffix}"
    archive.write_bytes(payload)
    before = set(folder.parent.iterdir())
    try:
        extract(archive, folder / "out", Limits(max_total_bytes=1 << 20, max_entries=100))
    except Unusable:
        pass
    assert set(folder.parent.iterdir()) == before  # nothing created next to the target


def _reader_seeds(folder) -> dict[str, bytes]:
    volume = np.arange(60, dtype=np.uint8).reshape(3, 4, 5)
    seeds = {}
    for suffix in (".mha", ".nii.gz", ".nrrd"):
        sitk.WriteImage(sitk.GetImageFromArray(volume), str(folder / f"s{suffix}"))
    tifffile.imwrite(folder / "s.tif", volume, photometric="minisblack")
    np.save(folder / "s.npy", volume)
    with h5py.File(folder / "s.h5", "w") as f:
        f["data"] = volume
    for path in folder.iterdir():
        seeds[images.suffix(path)] = path.read_bytes()
    return seeds


def _read(payload: dict) -> dict:
    try:
        images.read(__import__("pathlib").Path(payload["path"]))
    except Unusable as exc:
        return {"rejected": str(exc)}
    return {"read": True}


@settings(max_examples=int(os.environ.get("FUZZ_READER_EXAMPLES", 25)))
@given(st.data())
def test_readers_survive_any_bytes(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("seeds")
    seeds = _reader_seeds(folder)
    tasks = []
    for suffix, seed in sorted(seeds.items()):
        path = folder / f"fuzzed{suffix}"
        path.write_bytes(_mutate(seed, data.draw))
        tasks.append(Task(suffix, {"path": str(path)}))
    outcomes = runner.run(tasks, _read, contract.Resources(workers=2, memory_bytes=1 << 30, time_limit=60))
    for suffix, outcome in outcomes.items():
        assert outcome.ok, f"{suffix}: {outcome.kind}: {outcome.message}"


@given(
    st.dictionaries(
        st.sampled_from(["shape", "chunks", "dtype", "compressor", "filters", "fill_value", "order", "zarr_format"]),
        st.one_of(
            st.integers(-5, 70),
            st.text(max_size=6),
            st.lists(st.integers(-2, 9), max_size=4),
            st.none(),
            st.fixed_dictionaries({"id": st.sampled_from(["blosc", "pickle", "zlib", "json2", "x"])}),
        ),
    )
)
def test_zarr_metadata_of_any_shape_is_refused_cleanly(tmp_path_factory, metadata):
    import json

    folder = tmp_path_factory.mktemp("zarr") / "a"
    folder.mkdir()
    (folder / ".zarray").write_text(json.dumps(metadata))
    try:
        array = zarr_store.open_array(folder, "crop1/a")
        zarr_store.read_array(array, "crop1/a")
    except Unusable:
        pass


# --------------------------------------------------------------------------------------------
# Each bounded decoder: any bytes end in its output, or in ``Unusable``


def _codec_seeds() -> dict[str, tuple[bytes, int]]:
    import bz2
    import gzip
    import lzma
    import zlib

    import numcodecs

    raw = bytes(range(256)) * 16 + bytes(4096)
    return {
        "zlib": (zlib.compress(raw), len(raw)),
        "gzip": (gzip.compress(raw) + gzip.compress(b"x"), len(raw) + 1),
        "deflate": (zlib.compress(raw)[2:-4], len(raw)),
        "bz2": (bz2.compress(raw), len(raw)),
        "xz": (lzma.compress(raw), len(raw)),
        "blosc": (numcodecs.Blosc("lz4").encode(raw), len(raw)),
        "zstd": (numcodecs.Zstd(3).encode(raw), len(raw)),
        "lz4": (numcodecs.LZ4().encode(raw), len(raw)),
        "packbits": (b"\x7f" + raw[:128] + b"\x81\x00" + b"\x80" * 3, 256),
    }


CODEC_SEEDS = _codec_seeds()


def _decode(name: str, data: bytes, limit: int):
    if name in codecs.STREAM_CODECS:
        return codecs.decode(name, data, limit, members=4, padding=name == "gzip")
    if name == "packbits":
        return codecs.packbits(data, limit)
    return getattr(codecs, name)(data, limit, False)


@settings(max_examples=int(os.environ.get("FUZZ_CODEC_EXAMPLES", 60)))
@given(st.sampled_from(sorted(CODEC_SEEDS)), st.data())
def test_decoders_refuse_any_bytes_with_unusable_only(name, data):
    seed, limit = CODEC_SEEDS[name]
    payload = _mutate(seed, data.draw) if data.draw(st.booleans()) else data.draw(st.binary(max_size=600))
    limit = data.draw(st.sampled_from([limit, limit // 3, 1]))
    try:
        out = _decode(name, payload, limit)
    except Unusable:
        return
    assert len(out) <= limit
