"""The hostile-submission corpus: what a participant trying to cheat or break the grader
uploads, one ``Kind`` per attempt, across the suites and file formats.

Every kind builds a phase (whose folder and file names carry ``MARKER``, which must never
reach the participant) and a submission, and says what must come of it:

- ``REJECTED``: exit 2, nothing scored;
- ``CASE_FAILURE``: exit 2, the broken case listed under ``failures``, the others scored;
- ``SCORED``: legitimate data in an unusual form (big-endian, nothing stored, ...): exit 0;
- ``PHASE_FAULT``: an upload the phase itself cannot score (its case needs more memory than it
  gives the grader): exit 1, the organizer's problem, named in the last line of a local run.

``words`` must all appear in the last stderr line (the participant's message). The classes:
reading other files (the ground truth) through a file's own references; choosing one's own
ground truth; small files that decode huge; uploads that hang a reader; and participant data
that used to end in an internal error (exit 1). ``test_hostile_corpus.py`` runs them all.
"""

import bz2
import io
import json
import lzma
import os
import shutil
import socket
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import h5py
import numpy as np
import SimpleITK as sitk
import tifffile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MARKER = "gtsecret"  # in every ground-truth folder and file name
REJECTED, CASE_FAILURE, SCORED, PHASE_FAULT = "rejected", "case failure", "scored", "the phase's fault"
MEMORY_LIMIT_MB = 1500  # what every corpus phase tells the grader it has (phase option memory_limit_mb)


@dataclass(frozen=True)
class Kind:
    name: str
    phase: Callable[[Path], Path]
    submission: Callable[[Path], Path]
    words: tuple[str, ...] = ()
    outcome: str = REJECTED
    check: Callable[[dict], None] | None = None  # further checks of a scored metrics.json


def _phase_file(phase: Path, text: str) -> Path:
    (phase / "phase.yaml").write_text(text + f"memory_limit_mb: {MEMORY_LIMIT_MB}\n")
    return phase


# --------------------------------------------------------------------------------------------
# Phases: CellMap (zarr), multiclass (ITK label maps), annotators (TIFF masks), FISBe (zarr
# truth, HDF5/TIFF/zarr predictions), tomography fuel cell (any volume format)


CELLMAP_CASE = FIXTURES / "cellmap" / "cases" / "a_perfect_instance"


def cellmap_phase(root: Path, extra: str = "") -> Path:
    phase = root / f"{MARKER}-phase"
    shutil.copytree(CELLMAP_CASE / "truth.zarr", phase / f"{MARKER}-truth.zarr")
    shutil.copy(CELLMAP_CASE / "manifest.csv", phase / f"{MARKER}-manifest.csv")
    return _phase_file(phase, f"suite: cellmap\ntruth: {MARKER}-truth.zarr\nmanifest: {MARKER}-manifest.csv\n{extra}")


def cellmap_submission(root: Path) -> Path:
    folder = root / "input"
    shutil.copytree(CELLMAP_CASE / "submission.zarr", folder / "submission.zarr")
    return folder


SPACING, ORIGIN = (1.0, 1.0, 2.0), (0.0, 0.0, 0.0)


def itk_image(array: np.ndarray, path: Path, spacing=SPACING, origin=ORIGIN, direction=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing[: array.ndim])
    image.SetOrigin(origin[: array.ndim])
    if direction is not None:
        image.SetDirection(direction)
    sitk.WriteImage(image, str(path))
    return path


def truth_map(index: int) -> np.ndarray:
    labels = np.zeros((6, 8, 8), np.uint8)
    labels[1:5, 2:6, 1 + index : 5 + index] = 1
    labels[2:4, 3:5, 2:4] = 2
    return labels


def multiclass_phase(root: Path, extra: str = "", truth_suffix: str = ".mha") -> Path:
    phase = root / f"{MARKER}-phase"
    for i in (1, 2):
        itk_image(truth_map(i), phase / f"{MARKER}-labels" / f"case_{i}{truth_suffix}")
    return _phase_file(phase, f"suite: multiclass\nclasses: 3\ntruth: {MARKER}-labels\n{extra}")


def multiclass_submission(root: Path, suffix: str = ".nii.gz") -> Path:
    folder = root / "input"
    for i in (1, 2):
        itk_image(truth_map(i), folder / f"case_{i}{suffix}")
    return folder


def segmentation_phase(root: Path, extra: str = "classes: [1, 2]\nmetrics: [dice, hd, hd_percentile, assd, nsd]\n") -> Path:
    """The multiclass cases (truth as MetaImage) scored by the generic segmentation suite."""
    phase = root / f"{MARKER}-phase"
    for i in (1, 2):
        itk_image(truth_map(i), phase / f"{MARKER}-labels" / f"case_{i}.mha")
    return _phase_file(phase, f"suite: segmentation\ntruth: {MARKER}-labels\n{extra}")


def autopet_phase(root: Path, extra: str = "preset: autopet4\n") -> Path:
    """The multiclass cases' truths as autoPET lesions (any non-zero voxel)."""
    phase = root / f"{MARKER}-phase"
    for i in (1, 2):
        itk_image(truth_map(i), phase / f"{MARKER}-labels" / f"case_{i}.mha")
    return _phase_file(phase, f"suite: segmentation\ntruth: {MARKER}-labels\n{extra}")


def autopet_steps(root: Path, missing: int | None = None) -> Path:
    """The autoPET interactive task's eleven click steps of both cases, one of case 1's left out."""
    folder = root / "input"
    for i in (1, 2):
        for step in range(11):
            if not (i == 1 and step == missing):
                itk_image(truth_map(i), folder / f"case_{i}_pred{step}.nii.gz")
    return folder


SEGMENTATION_INSTANCES = (48, 50, 50)


def segmentation_instance_phase(root: Path) -> Path:
    """Two cases of instance maps (three blocks) scored with matching and per-instance metrics."""
    phase = root / f"{MARKER}-phase"
    for i in (1, 2):
        itk_image(segmentation_instances(), phase / f"{MARKER}-labels" / f"case_{i}.mha")
    return _phase_file(
        phase,
        f"suite: segmentation\ntruth: {MARKER}-labels\ninput: instances\nmetrics: [dice]\n"
        "instance_metrics: [detection, panoptic, dice, hd_percentile]\n",
    )


def segmentation_instances() -> np.ndarray:
    labels = np.zeros(SEGMENTATION_INSTANCES, np.uint32)
    for k in range(3):
        labels[5:30, 5 + 14 * k : 15 + 14 * k, 10:40] = k + 1
    return labels


def segmentation_instance_submission(root: Path, case_1: np.ndarray | None = None) -> Path:
    folder = root / "input"
    for i in (1, 2):
        itk_image(segmentation_instances() if i == 2 or case_1 is None else case_1, folder / f"case_{i}.mha")
    return folder


def multiclass_with(write: Callable[[Path], None], name: str = "case_1") -> Callable[[Path], Path]:
    """The two-case multiclass submission with case 1 replaced by what ``write(folder)`` makes."""

    def build(root: Path) -> Path:
        folder = multiclass_submission(root)
        (folder / f"{name}.nii.gz").unlink()
        write(folder)
        return folder

    return build


def annotators_phase(root: Path) -> Path:
    phase = root / f"{MARKER}-phase"
    mask = np.zeros((32, 32), np.uint8)
    mask[8:24, 10:12] = 1
    for annotator in ("ann_A", "ann_B"):
        for image in ("img_1", "img_2"):
            (phase / f"{MARKER}-annotations" / annotator).mkdir(parents=True, exist_ok=True)
            tifffile.imwrite(phase / f"{MARKER}-annotations" / annotator / f"{image}.tif", mask)
    return _phase_file(phase, f"suite: annotators\nannotations: {MARKER}-annotations\neval_class: 1\ndilation: false\n")


def annotators_submission(root: Path, array=None, name="img_1_segPred.tif", others: bool = True) -> Path:
    """Predictions for img_1 (``array`` under ``name``) and, with ``others``, for img_2."""
    folder = root / "input"
    folder.mkdir(exist_ok=True)
    prediction = np.zeros((32, 32), np.uint8)
    prediction[8:24, 10:13] = 1
    if others:
        tifffile.imwrite(folder / "img_2_segPred.tif", prediction)
    tifffile.imwrite(folder / name, prediction if array is None else array)
    return folder


FISBE_SHAPE = (16, 32, 32)


def fisbe_instances() -> np.ndarray:
    """Two thin neurons: an (instances, z, y, x) stack."""
    stack = np.zeros((2, *FISBE_SHAPE), np.uint8)
    stack[0, 8, 4:28, 10] = 1
    stack[0, 4:12, 16, 10] = 1
    stack[1, 3:13, 20, 4:28] = 1
    return stack


def fisbe_phase(root: Path) -> Path:
    import zarr

    phase = root / f"{MARKER}-phase"
    for sample in ("s0", "s1"):
        group = zarr.open_group(str(phase / f"{sample}.zarr"), mode="w", zarr_format=2)
        group.create_array("volumes/gt_instances", data=fisbe_instances(), chunks=(1, *FISBE_SHAPE))
    return _phase_file(phase, "suite: fisbe\n")


def fisbe_labels() -> np.ndarray:
    return (fisbe_instances() * np.arange(1, 3, dtype=np.int32)[:, None, None, None]).max(axis=0)


def fisbe_submission(root: Path, s0: Callable[[Path], None] | None = None) -> Path:
    """Predictions for s0 and s1 (label images in HDF5); ``s0(folder)`` writes a different s0."""
    folder = root / "input"
    folder.mkdir()
    for sample in ("s0", "s1"):
        if sample == "s0" and s0 is not None:
            s0(folder)
            continue
        with h5py.File(folder / f"{sample}.hdf", "w") as f:
            f.create_dataset("volumes/labels", data=fisbe_labels(), compression="gzip")
    return folder


TOMO_TOTAL, TOMO_START, TOMO_STOP, TOMO_PLANE = 10, 2, 8, (4, 8)


def tomo_phase(root: Path) -> Path:
    phase = root / f"{MARKER}-phase"
    regions = np.repeat(np.array([1, 1, 2, 2, 3, 4, 0, 0], np.uint8)[None, None, :], 4, axis=1).repeat(
        TOMO_STOP - TOMO_START, axis=0
    )
    for step in ("A", "B"):
        (phase / step).mkdir(parents=True)
        water = np.zeros((TOMO_TOTAL, *TOMO_PLANE), np.uint8)
        water[:, 0, :] = 1
        np.save(phase / step / f"{MARKER}-water.npy", water)
        np.save(phase / step / f"{MARKER}-regions.npy", regions)
    return _phase_file(
        phase,
        "suite: tomo_fuelcell\ntime_steps: [A, B]\n"
        f"slices: {{start: {TOMO_START}, stop: {TOMO_STOP}, total: {TOMO_TOTAL}}}\n"
        f"truth: '{{step}}/{MARKER}-water.npy'\nregion_labels: '{{step}}/{MARKER}-regions.npy'\n",
    )


def tomo_submission(root: Path, a: Callable[[Path], None] | None = None) -> Path:
    folder = root / "input"
    folder.mkdir()
    plain = np.zeros((TOMO_TOTAL, *TOMO_PLANE), np.uint8)
    plain[:, 0, :4] = 1
    np.save(folder / "B.npy", plain)
    if a is None:
        np.save(folder / "A.npy", plain)
    else:
        a(folder)
    return folder


def truth_file(root: Path, relative: str = f"{MARKER}-labels/case_1.mha") -> Path:
    return root / f"{MARKER}-phase" / relative


# --------------------------------------------------------------------------------------------
# Archives


def zip_of(folder: Path, archive: Path, extra: list[tuple] = (), symlink: str | None = None) -> None:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(folder).as_posix())
        for name, data in extra:
            z.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo("crop101/mito/link")
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, symlink)


def zipped_cellmap(root: Path, **kwargs) -> Path:
    source = cellmap_submission(root / "source") / "submission.zarr"
    folder = root / "input"
    folder.mkdir()
    zip_of(source, folder / "submission.zip", **kwargs)
    return folder


def tar_with(root: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    folder = root / "input"
    folder.mkdir()
    with tarfile.open(folder / "submission.tar.gz", "w:gz") as tar:
        tar.addfile(member, io.BytesIO(data) if data else None)
    return folder


def tar_link(name: str, kind: bytes, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def single_file(root: Path, name: str, data: bytes) -> Path:
    folder = root / "input"
    folder.mkdir()
    (folder / name).write_bytes(data)
    return folder


def raw_zip(root: Path, entries, compression=zipfile.ZIP_DEFLATED) -> Path:
    folder = root / "input"
    folder.mkdir()
    with zipfile.ZipFile(folder / "submission.zip", "w", compression) as z:
        for name, data in entries:
            z.writestr(name, data)
    return folder


def _many_entries(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    with zipfile.ZipFile(folder / "submission.zip", "w", zipfile.ZIP_STORED) as z:
        for i in range(100_000):
            z.writestr(f"crop101/mito/{i}", b"")
    return folder


def _non_utf8_tar(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    with tarfile.open(
        folder / "submission.tar", "w", format=tarfile.GNU_FORMAT, encoding="latin-1"
    ) as tar:  # raw bytes, no PAX UTF-8
        info = tarfile.TarInfo("crop\xe9\xff/\xe0b")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return folder


def _two_archives(root: Path) -> Path:
    folder = zipped_cellmap(root)
    shutil.copy(folder / "submission.zip", folder / "second.zip")
    return folder


def _deep_zip(root: Path) -> Path:
    return raw_zip(root, [("/".join(["d"] * 1500) + "/x", "x")])


# --------------------------------------------------------------------------------------------
# Folder trees


def _fifo_at(relative: str, base: Callable[[Path], Path] = cellmap_submission) -> Callable[[Path], Path]:
    """The submission with a named pipe at ``relative`` (replacing any file there)."""

    def build(root: Path) -> Path:
        folder = base(root)
        target = folder / relative
        if target.exists():
            target.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(target)
        return folder

    return build


def _socket_in(root: Path) -> Path:
    folder = cellmap_submission(root)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "submission.zarr" / "crop101" / "sock"))
    server.close()
    return folder


def _symlink_at(
    relative: str, target: Callable[[Path], Path], base: Callable[[Path], Path] = cellmap_submission
) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        folder = base(root)
        link = folder / relative
        if link.is_dir():
            shutil.rmtree(link)
        elif link.exists():
            link.unlink()
        link.symlink_to(target(root))
        return folder

    return build


def _deep_folders(root: Path) -> Path:
    folder = cellmap_submission(root)
    deep = folder / "submission.zarr" / "crop101"
    for _ in range(1500):  # os.makedirs recurses once per level
        deep = deep / "d"
        deep.mkdir()
    return folder


def _non_utf8_folder(root: Path) -> Path:
    folder = multiclass_submission(root)
    odd = os.path.join(os.fsencode(folder), b"caf\xe9\xff")
    os.mkdir(odd)
    itk_image(truth_map(1), folder / "extra.nii.gz")  # ITK aborts on a name it cannot encode: move it there after
    os.rename(os.fsencode(folder / "extra.nii.gz"), os.path.join(odd, b"extra.nii.gz"))
    return folder


def _control_characters_in_name(root: Path) -> Path:
    folder = multiclass_submission(root)
    itk_image(truth_map(1), folder / "case_9\x1b[31m\x07.nii.gz")
    return folder


# --------------------------------------------------------------------------------------------
# Zarr arrays (CellMap)


def cellmap_with(mutate: Callable[[Path], None]) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        folder = cellmap_submission(root)
        mutate(folder / "submission.zarr" / "crop101")
        return folder

    return build


def edit_zarray(label_folder: Path, **changes) -> None:
    meta = json.loads((label_folder / ".zarray").read_text())
    meta.update(changes)
    (label_folder / ".zarray").write_text(json.dumps(meta))


GEOMETRY = {"voxel_size": [8.0, 8.0, 8.0], "translation": [800.0, 1600.0, 2400.0]}


def replace_array(label_folder: Path, array: np.ndarray, attrs: dict | None = None, chunks=None, **options) -> None:
    import zarr

    shutil.rmtree(label_folder, ignore_errors=True)
    created = zarr.open_array(
        str(label_folder),
        mode="w",
        shape=array.shape,
        dtype=array.dtype,
        chunks=chunks or tuple(max(1, s) for s in array.shape),
        zarr_format=2,
        **options,
    )
    if array.size:
        created[...] = array
    created.attrs.update(attrs if attrs is not None else GEOMETRY)


def with_attrs(**attrs) -> Callable[[Path], None]:
    def mutate(crop: Path) -> None:
        (crop / "mito" / ".zattrs").write_text(json.dumps({**GEOMETRY, **attrs}))

    return mutate


def huge_declared(label_folder: Path) -> None:
    """Metadata for an array 10^4 times larger than the crop (its chunks are never read)."""
    edit_zarray(label_folder, shape=[48 * 22, 48 * 22, 48 * 21], chunks=[48, 48, 48])


def corrupt_chunks(label_folder: Path) -> None:
    for chunk in label_folder.rglob("*"):
        if chunk.is_file() and not chunk.name.startswith("."):
            chunk.write_bytes(b"\x00garbage" * 7)


def truth_mito() -> np.ndarray:
    import zarr

    return zarr.open_array(str(CELLMAP_CASE / "truth.zarr" / "crop101" / "mito"), mode="r")[...]


def deflate_zeros(total: int, wbits: int) -> bytes:
    """A valid zlib (wbits 15) or gzip (31) stream of ``total`` zero bytes (a multiple of 1 MiB),
    built from one fully flushed block repeated: megabytes that decode to gigabytes."""
    unit_size = 1 << 20
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = raw.compress(bytes(unit_size)) + raw.flush(zlib.Z_FULL_FLUSH)
    unit = raw.compress(bytes(unit_size)) + raw.flush(zlib.Z_FULL_FLUSH)
    count = total // unit_size
    body = first + unit * (count - 1) + raw.flush(zlib.Z_FINISH)
    zeros = bytes(unit_size)
    if wbits == 31:
        crc = 0
        for _ in range(count):
            crc = zlib.crc32(zeros, crc)
        return (
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body + crc.to_bytes(4, "little") + (total % 2**32).to_bytes(4, "little")
        )
    adler = 1
    for _ in range(count):
        adler = zlib.adler32(zeros, adler)
    return b"\x78\xda" + body + adler.to_bytes(4, "big")


@cache
def bomb(codec: str, total: int = 2 << 30) -> bytes:
    """A chunk of a few KB to MB that decodes to ``total`` bytes (2 GiB: beyond the corpus's
    memory cap) with ``codec``'s own decoder."""
    if codec in ("zlib", "gzip"):
        return deflate_zeros(total, 15 if codec == "zlib" else 31)
    unit = 64 << 20
    if codec == "bz2":
        return bz2.compress(bytes(unit), 9) * (total // unit)  # multi-stream: bz2.decompress reads all
    if codec == "lzma":
        return lzma.compress(bytes(unit)) * (total // unit)  # concatenated .xz streams
    raise ValueError(codec)


def zarr_bomb(codec: str) -> Callable[[Path], None]:
    """crop101/mito (48^3 uint8 in 32^3 chunks) with one chunk that decodes to 2 GiB."""

    def mutate(crop: Path) -> None:
        replace_array(crop / "mito", truth_mito().astype(np.uint8), GEOMETRY, chunks=(32, 32, 32))
        edit_zarray(crop / "mito", compressor={"id": codec})
        for chunk in (crop / "mito").glob("[0-9]*"):
            chunk.unlink()
        (crop / "mito" / "0.0.0").write_bytes(bomb(codec))

    return mutate


def one_voxel_chunks(crop: Path) -> None:
    """A 192^3 array in 1-voxel chunks, none stored: 7 million chunk coordinates."""
    shutil.rmtree(crop / "mito")
    (crop / "mito").mkdir()
    (crop / "mito" / ".zarray").write_text(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": [192, 192, 192],
                "chunks": [1, 1, 1],
                "dtype": "<u4",
                "compressor": None,
                "fill_value": 0,
                "filters": None,
                "order": "C",
            }
        )
    )
    (crop / "mito" / ".zattrs").write_text(json.dumps({"voxel_size": [2.0, 2.0, 2.0], "translation": [800.0, 1600.0, 2400.0]}))


def big_endian_mito(crop: Path) -> None:
    replace_array(crop / "mito", truth_mito().astype(">u4"), GEOMETRY, chunks=(32, 32, 32))


def deep_json(file_name: str) -> Callable[[Path], None]:
    def mutate(crop: Path) -> None:
        (crop / "mito" / file_name).write_text("[" * 100_000 + "]" * 100_000)

    return mutate


def zarr_v3(crop: Path, document: dict) -> None:
    shutil.rmtree(crop / "mito")
    (crop / "mito").mkdir()
    (crop / "mito" / "zarr.json").write_text(json.dumps(document))


V3_ARRAY = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [48, 48, 48],
    "data_type": "uint32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [48, 48, 48]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": 0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "attributes": GEOMETRY,
}


# --------------------------------------------------------------------------------------------
# Label maps (multiclass): files that name other files, declare huge sizes, or are not files


MHA_HEADER = (
    "ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\nCompressedData = False\n"
    "Offset = 0 0 0\nElementSpacing = 1 1 2\nDimSize = 8 8 6\nElementType = MET_UCHAR\n"
)


def mha_pointing(data_file_line: str, newline: str = "\n", padding: str = "") -> Callable[[Path], None]:
    """A MetaImage header whose pixel data is another file (the ground truth's)."""

    def write(folder: Path) -> None:
        text = MHA_HEADER + padding + data_file_line + "\n"
        (folder / "case_1.mha").write_bytes(text.replace("\n", newline).encode())

    return write


def _truth_relative(folder: Path, suffix: str = ".mha") -> str:
    return os.path.relpath(folder.parent / f"{MARKER}-phase" / f"{MARKER}-labels" / f"case_1{suffix}", folder)


def mha_relative(separator: str = " = ", decoy: bool = False, newline: str = "\n", padding: str = "") -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        line = f"ElementDataFile{separator}{_truth_relative(folder)}" + ("\nElementDataFile = LOCAL" if decoy else "")
        mha_pointing(line, newline, padding)(folder)

    return write


def mha_absolute(folder: Path) -> None:
    mha_pointing(f"ElementDataFile = {(folder.parent / f'{MARKER}-phase' / f'{MARKER}-labels' / 'case_1.mha').resolve()}")(folder)


def mha_list(folder: Path) -> None:
    mha_pointing(f"ElementDataFile = LIST\n{_truth_relative(folder)}")(folder)


def mha_pattern(folder: Path) -> None:
    target = _truth_relative(folder).replace("case_1", "case_%d")
    mha_pointing(f"ElementDataFile = {target} 1 1 1")(folder)


NRRD_HEADER = "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 8 8 6\nspacings: 2 1 1\nendian: little\n"


def nrrd_pointing(
    field: str, encoding: str = "raw", newline: str = "\n", padding: str = "", skip: str = "", truth_suffix: str = ".mha"
) -> Callable[[Path], None]:
    def write(folder: Path) -> None:
        text = NRRD_HEADER + padding + f"encoding: {encoding}\n" + skip + f"{field}: {_truth_relative(folder, truth_suffix)}\n\n"
        (folder / "case_1.nrrd").write_bytes(text.replace("\n", newline).encode())

    return write


def nifti_pair(folder: Path) -> None:
    """A NIfTI-1 header with the two-file magic 'ni1': its pixels would come from case_1.img."""
    itk_image(truth_map(1), folder / "case_1.nii")
    data = bytearray((folder / "case_1.nii").read_bytes())
    data[344:348] = b"ni1\x00"
    (folder / "case_1.nii").write_bytes(bytes(data[:352]))
    (folder / "case_1.img").write_bytes(bytes(data[352:]))


def nii_holding_metaimage(folder: Path) -> None:
    text = MHA_HEADER + f"ElementDataFile = {_truth_relative(folder)}\n"
    (folder / "case_1.nii").write_text(text)


def mha_declaring(shape: tuple[int, int, int]) -> Callable[[Path], None]:
    """A MetaImage whose header declares ``shape`` (x, y, z) and holds a few bytes."""

    def write(folder: Path) -> None:
        header = MHA_HEADER.replace("DimSize = 8 8 6", "DimSize = " + " ".join(map(str, shape))) + "ElementDataFile = LOCAL\n"
        (folder / "case_1.mha").write_bytes(header.encode() + bytes(1000))

    return write


def nrrd_declaring(folder: Path) -> None:
    header = NRRD_HEADER.replace("sizes: 8 8 6", "sizes: 1600 1600 1600") + "encoding: gzip\n\n"
    (folder / "case_1.nrrd").write_bytes(header.encode() + gzip_zeros(1 << 20))


def gzip_zeros(size: int) -> bytes:
    import gzip

    return gzip.compress(bytes(size))


def nifti_declaring(folder: Path) -> None:
    itk_image(truth_map(1), folder / "case_1.nii")
    data = bytearray((folder / "case_1.nii").read_bytes())
    dims = np.array([3, 1600, 1600, 1600, 1, 1, 1, 1], np.int16)
    data[40:56] = dims.tobytes()
    (folder / "case_1.nii").write_bytes(bytes(data))


def zarr_case_declaring(chunks: int) -> Callable[[Path], None]:
    """A 300-byte zarr label map declaring 1500^3 voxels (no chunk stored, fill value 1)."""

    def write(folder: Path) -> None:
        (folder / "case_1.zarr").mkdir()
        (folder / "case_1.zarr" / ".zarray").write_text(
            json.dumps(
                {
                    "zarr_format": 2,
                    "shape": [1500, 1500, 1500],
                    "chunks": [chunks] * 3,
                    "dtype": "|u1",
                    "compressor": None,
                    "fill_value": 1,
                    "filters": None,
                    "order": "C",
                }
            )
        )

    return write


def tiff_bomb(codec: str) -> Callable[[Path], None]:
    """A one-strip 8 x 8 x 6 TIFF whose strip decodes to 2 GiB."""

    def write(folder: Path) -> None:
        path = folder / "case_1.tif"
        tifffile.imwrite(path, truth_map(1), compression=codec)
        payload = bomb("zlib" if codec == "zlib" else "lzma")
        with tifffile.TiffFile(path) as tif:
            page = tif.pages[0]
            offsets, counts = page.tags["StripOffsets"], page.tags["StripByteCounts"]
            at_offsets, at_counts = offsets.valueoffset, counts.valueoffset
        data = bytearray(path.read_bytes())
        end = len(data)
        data[at_offsets : at_offsets + 4] = end.to_bytes(4, "little")
        data[at_counts : at_counts + 4] = len(payload).to_bytes(4, "little")
        path.write_bytes(bytes(data) + payload)

    return write


def npy_big_endian(folder: Path) -> None:
    np.save(folder / "case_1.npy", truth_map(1).astype(">u2"))


def npy_huge_header(folder: Path) -> None:
    with open(folder / "case_1.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": (600, 800, 800)})
        f.write(bytes(1000))


# --------------------------------------------------------------------------------------------
# FISBe predictions (HDF5, TIFF)


def _private(folder: Path, name: str) -> Path:
    """A file of the organizer's beside the FISBe samples (in a subfolder, not a sample)."""
    private = folder.parent / f"{MARKER}-phase" / f"{MARKER}-private"
    private.mkdir(exist_ok=True)
    return private / name


def hdf5_external_link(level: str) -> Callable[[Path], None]:
    """s0.hdf whose ``volumes/labels`` reaches another file through an external link at the
    last level or at ``volumes``."""

    def write(folder: Path) -> None:
        target = _private(folder, "other.hdf")
        with h5py.File(target, "w") as f:
            f.create_dataset("volumes/labels", data=fisbe_labels())
        relative = os.path.relpath(target, folder)
        with h5py.File(folder / "s0.hdf", "w") as f:
            if level == "last":
                f["volumes/labels"] = h5py.ExternalLink(relative, "volumes/labels")
            else:
                f["volumes"] = h5py.ExternalLink(relative, "volumes")

    return write


def hdf5_soft_link(folder: Path) -> None:
    with h5py.File(folder / "s0.hdf", "w") as f:
        f.create_dataset("elsewhere/labels", data=fisbe_labels())
        f["volumes/labels"] = h5py.SoftLink("/elsewhere/labels")


def hdf5_virtual(folder: Path) -> None:
    target = _private(folder, "other.hdf")
    with h5py.File(target, "w") as f:
        f.create_dataset("labels", data=fisbe_labels())
    layout = h5py.VirtualLayout(shape=FISBE_SHAPE, dtype=np.int32)
    layout[...] = h5py.VirtualSource(os.path.relpath(target, folder), "labels", shape=FISBE_SHAPE)
    with h5py.File(folder / "s0.hdf", "w") as f:
        f.create_virtual_dataset("volumes/labels", layout, fillvalue=0)


def hdf5_external_storage(folder: Path) -> None:
    target = _private(folder, "raw.bin")
    target.write_bytes(fisbe_labels().tobytes())
    with h5py.File(folder / "s0.hdf", "w") as f:
        f.create_dataset(
            "volumes/labels",
            shape=FISBE_SHAPE,
            dtype=np.int32,
            external=[(os.path.relpath(target, folder), 0, h5py.h5f.UNLIMITED)],
        )


def hdf5_deflate_bomb(folder: Path) -> None:
    """s0.hdf with one 16 x 32 x 32 chunk whose deflate stream decodes to 2 GiB."""
    with h5py.File(folder / "s0.hdf", "w") as f:
        dataset = f.create_dataset("volumes/labels", data=fisbe_labels(), chunks=FISBE_SHAPE, compression="gzip")
        dataset.id.write_direct_chunk((0, 0, 0), bomb("zlib"))


def hdf5_big_endian(folder: Path) -> None:
    with h5py.File(folder / "s0.hdf", "w") as f:
        f.create_dataset("volumes/labels", data=fisbe_labels().astype(">i4"), compression="gzip")


def hdf5_million_channels(folder: Path) -> None:
    """A (10^6, z, y, x) channel stack with nothing stored: ten thousand times more channels
    than instances exist."""
    with h5py.File(folder / "s0.hdf", "w") as f:
        f.create_dataset(
            "volumes/labels", shape=(1_000_000, *FISBE_SHAPE), dtype=np.uint8, chunks=(1, *FISBE_SHAPE), compression="gzip"
        )


def tiff_pages(path: Path, pages: int, height: int, width: int, strip: bytes, compression: int = 8) -> None:
    """A little-endian TIFF of ``pages`` uint8 pages that all share one strip: megabytes of
    header that declare gigabytes of image."""
    entries = [
        (256, 4, width),
        (257, 4, height),
        (258, 3, 8),
        (259, 3, compression),
        (262, 3, 1),
        (273, 4, 8),
        (277, 3, 1),
        (278, 4, height),
        (279, 4, len(strip)),
    ]
    ifd_size = 2 + 12 * len(entries) + 4
    first = 8 + len(strip)
    out = bytearray(b"II*\x00" + first.to_bytes(4, "little") + strip)
    for page in range(pages):
        out += len(entries).to_bytes(2, "little")
        for tag, kind, value in entries:
            out += (
                tag.to_bytes(2, "little") + kind.to_bytes(2, "little") + (1).to_bytes(4, "little") + value.to_bytes(4, "little")
            )
        following = first + (page + 1) * ifd_size if page + 1 < pages else 0
        out += following.to_bytes(4, "little")
    path.write_bytes(bytes(out))


def fisbe_tiff_declaring(folder: Path) -> None:
    """A TIFF of a few KB whose 200 pages declare 3.2 GB of labels (deflate of zeros)."""
    tiff_pages(folder / "s0.tif", 200, 4000, 4000, zlib.compress(bytes(4000 * 4000), 9))


def tiff_many_pages(folder: Path) -> None:
    """10^5 pages of 1 x 1 voxels: the page count, not the data, is the load."""
    tiff_pages(folder / "s0.tif", 100_000, 1, 1, zlib.compress(b"\x00"))


# --------------------------------------------------------------------------------------------
# Grand-Challenge job lists (multiclass phase)


def grand_challenge(root: Path, mutate_jobs=None, write=True) -> Path:
    folder = root / "input"
    jobs = []
    for i in (1, 2):
        pk = f"job-{i}"
        if write:
            itk_image(truth_map(i), folder / pk / "output" / "images" / "seg" / f"{i}a7c1e2.mha")
        socket_ = {"slug": "seg", "kind": "Segmentation", "super_kind": "Image", "relative_path": "images/seg"}
        jobs.append(
            {
                "pk": pk,
                "inputs": [
                    {"interface": {**socket_, "slug": "ct", "relative_path": "images/ct"}, "image": {"name": f"case_{i}.mha"}}
                ],
                "outputs": [{"interface": socket_, "image": {"name": "x.mha"}}],
            }
        )
    if mutate_jobs:
        mutate_jobs(jobs)
    folder.mkdir(exist_ok=True)
    (folder / "predictions.json").write_text(json.dumps(jobs) if not isinstance(jobs, str) else jobs)
    return folder


def _gc_text(text: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        folder = grand_challenge(root)
        (folder / "predictions.json").write_text(text)
        return folder

    return build


def _gc_relative_path(value: str) -> Callable[[Path], Path]:
    return lambda root: grand_challenge(root, lambda jobs: jobs[0]["outputs"][0]["interface"].update(relative_path=value))


# --------------------------------------------------------------------------------------------
# Choosing one's own ground truth


def _own_ground_truth(root: Path) -> Path:
    """An upload shaped like CodaBench's mount: ref/ holding a phase made from the upload's
    own prediction, res/ holding that prediction."""
    folder = root / "input"
    shutil.copytree(CELLMAP_CASE / "submission.zarr", folder / "ref" / "truth.zarr")
    shutil.copy(CELLMAP_CASE / "manifest.csv", folder / "ref" / "manifest.csv")
    (folder / "ref" / "phase.yaml").write_text("suite: cellmap\n")
    shutil.copytree(CELLMAP_CASE / "submission.zarr", folder / "res" / "submission.zarr")
    return folder


def _own_phase_file(root: Path) -> Path:
    folder = multiclass_submission(root)
    (folder / "phase.yaml").write_text("suite: multiclass\nclasses: 3\ntruth: .\n")
    return folder


# --------------------------------------------------------------------------------------------
# The corpus


def _cellmap_fails(name, mutate, words) -> Kind:
    return Kind(name, cellmap_phase, cellmap_with(mutate), words, CASE_FAILURE)


def _multiclass_fails(name, write, words, phase=multiclass_phase) -> Kind:
    return Kind(name, phase, multiclass_with(write), words, CASE_FAILURE)


def _fisbe_fails(name, write, words) -> Kind:
    return Kind(name, fisbe_phase, lambda r: fisbe_submission(r, write), words, CASE_FAILURE)


def _mask_of(array: np.ndarray) -> Callable[[Path], None]:
    return lambda folder: np.save(folder / "case_1.npy", array)


def _itk(array, suffix=".nii.gz", **geometry) -> Callable[[Path], None]:
    return lambda folder: itk_image(array, folder / f"case_1{suffix}", **geometry)


def _truncated(suffix: str, writer) -> Callable[[Path], None]:
    """A file of the right shape with the last part of its bytes cut off."""

    def write(folder: Path) -> None:
        path = folder / f"case_1{suffix}"
        writer(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - max(150, len(data) // 3)])

    return write


def _write_h5(path):
    with h5py.File(path, "w") as f:
        f.create_dataset("labels", data=truth_map(1))


def _scores_like_native(metrics: dict) -> None:
    assert not metrics["failures"]


def _mito_scored(metrics: dict) -> None:
    entry = metrics["case"]["crop101"]["mito"]
    assert entry.get("status") != "failed" and entry["is_missing"] is False, entry


LARGE_CASE = (200, 200, 200)


def _large_segmentation_phase(root: Path) -> Path:
    phase = root / f"{MARKER}-phase"
    (phase / f"{MARKER}-labels").mkdir(parents=True)
    np.save(phase / f"{MARKER}-labels" / "case_1.npy", np.zeros(LARGE_CASE, np.uint8))
    (phase / "phase.yaml").write_text(f"suite: segmentation\ntruth: {MARKER}-labels\nclasses: [1]\nmemory_limit_mb: 256\n")
    return phase


def _large_segmentation_submission(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    np.save(folder / "case_1.npy", np.zeros(LARGE_CASE, np.uint8))
    return folder


def _models(root: Path, *names: str) -> Path:
    folder = root / "input"
    for name in names:
        shutil.copytree(multiclass_submission(root / f"model-{len(name)}-{name[:8]}"), folder / name)
    return folder


def _ranked_model_keeps_its_columns(metrics: dict) -> None:
    aggregates, board = metrics["aggregates"], metrics["leaderboard"]
    ranked = aggregates["models"][aggregates["best_model"]]
    assert board["pooled_mean_dice_fg_nanmean"] == ranked["pooled"]["mean_dice_fg_nanmean"]
    assert board["pooled/mean_dice_fg_nanmean"] == aggregates["models"]["pooled"]["mean_dice_fg_nanmean"]


def _annotators_long_model(root: Path) -> Path:
    folder = root / "input"
    for model in ("model_a", "model_" + "b" * 243):
        (root / model[:16]).mkdir()
        shutil.copytree(annotators_submission(root / model[:16]), folder / model)
    return folder


def _sixteen_annotator_models(root: Path) -> Path:
    folder = root / "input"
    (root / "one").mkdir()
    one = annotators_submission(root / "one")
    for k in range(16):
        shutil.copytree(one, folder / f"predictions_m{k:02d}")
    return folder


def _many_tar_entries(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    with tarfile.open(folder / "submission.tar.gz", "w:gz") as tar:
        for i in range(30_000):
            tar.addfile(tarfile.TarInfo(f"d{i // 100}/f{i}"))
    return folder


def _salted_cellmap(root: Path) -> Path:
    """The perfect submission with 400 isolated voxels of new ids in crop101/mito's background:
    far more components than the truth's instances allow (the reference's ratio cutoff)."""
    import zarr

    folder = cellmap_submission(root)
    array = zarr.open_array(str(folder / "submission.zarr" / "crop101" / "mito"), mode="r+")
    values = array[...]
    z, y, x = np.nonzero(np.ones((24, 24, 24), bool))
    free = [(2 * a, 2 * b, 2 * c) for a, b, c in zip(z, y, x) if not values[2 * a, 2 * b, 2 * c]][:400]
    for k, (a, b, c) in enumerate(free):
        values[a, b, c] = int(values.max()) + 1 + k
    array[...] = values
    return folder


def _pathological_crop_is_named(metrics: dict) -> None:
    assert metrics["census"]["units"] == {"skipped_too_many_instances": ["crop101/mito"]}


KINDS = [
    # --- archives
    Kind(
        "zip path traversal",
        cellmap_phase,
        lambda r: zipped_cellmap(r, extra=[("../../escaped.txt", "x")]),
        ("../../escaped.txt", "outside"),
    ),
    Kind(
        "zip absolute path",
        cellmap_phase,
        lambda r: zipped_cellmap(r, extra=[("/tmp/escaped.txt", "x")]),
        ("/tmp/escaped.txt", "absolute"),
    ),
    Kind(
        "zip backslash traversal",
        cellmap_phase,
        lambda r: zipped_cellmap(r, extra=[("..\\..\\escaped.txt", "x")]),
        ("escaped.txt", "outside"),
    ),
    Kind(
        "zip symlink", cellmap_phase, lambda r: zipped_cellmap(r, symlink="/etc/passwd"), ("crop101/mito/link", "symbolic link")
    ),
    Kind(
        "tar symlink",
        cellmap_phase,
        lambda r: tar_with(r, tar_link("crop101/evil", tarfile.SYMTYPE, "/etc/passwd")),
        ("crop101/evil", "link"),
    ),
    Kind(
        "tar hard link",
        cellmap_phase,
        lambda r: tar_with(r, tar_link("crop101/hard", tarfile.LNKTYPE, "/etc/shadow")),
        ("crop101/hard", "link"),
    ),
    Kind(
        "tar device file",
        cellmap_phase,
        lambda r: tar_with(r, tar_link("crop101/dev", tarfile.CHRTYPE, "")),
        ("crop101/dev", "special file"),
    ),
    Kind(
        "tar FIFO entry",
        cellmap_phase,
        lambda r: tar_with(r, tar_link("crop101/pipe", tarfile.FIFOTYPE, "")),
        ("crop101/pipe", "special file"),
    ),
    Kind(
        "zip bomb (ratio)",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/mito/0.0.0", bytes(48 << 20))]),
        ("crop101/mito/0.0.0", "zip bomb"),
    ),
    Kind(
        "zip bomb (absolute size)",
        lambda r: cellmap_phase(r, "archive: {max_total_bytes: 1000000}\n"),
        lambda r: raw_zip(r, [("crop101/mito/0.0.0", os.urandom(2_000_000))], zipfile.ZIP_STORED),
        ("2.0 MB", "1.0 MB"),
    ),
    Kind(
        "100 000 tiny entries", lambda r: cellmap_phase(r, "archive: {max_entries: 50000}\n"), _many_entries, ("100000 entries",)
    ),
    Kind(
        "nested zip",
        cellmap_phase,
        lambda r: raw_zip(
            r, [("inner.zip", (FIXTURES.parent.parent / "examples" / "cellmap" / "submission" / "submission.zip").read_bytes())]
        ),
        ("inner.zip", "another archive"),
    ),
    Kind("empty zip", cellmap_phase, lambda r: raw_zip(r, []), ("holds no zarr",)),
    Kind(
        "not a zip",
        cellmap_phase,
        lambda r: single_file(r, "submission.zip", b"this is not an archive"),
        ("submission.zip", "not a readable zip"),
    ),
    Kind(
        "truncated zip",
        cellmap_phase,
        lambda r: single_file(
            r,
            "submission.zip",
            (FIXTURES.parent.parent / "examples" / "cellmap" / "submission" / "submission.zip").read_bytes()[:9000],
        ),
        ("submission.zip",),
    ),
    Kind("non-UTF-8 names in a tar", cellmap_phase, _non_utf8_tar, ("not valid UTF-8",)),
    Kind(
        "dot-dot-like names",
        cellmap_phase,
        lambda r: raw_zip(r, [("..crop101/...", "x"), ("crop101..x/a", "y")]),
        ("no test crop",),
    ),
    Kind("two archives", cellmap_phase, _two_archives, ("2 archives",)),
    Kind("empty folder", cellmap_phase, lambda r: (r / "input").mkdir() or r / "input", ("empty",)),
    Kind(
        "zip entries clash: file, then folder",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/mito", "x"), ("crop101/mito/0.0.0", "y")]),
        ("crop101/mito/0.0.0", "clashes"),
    ),
    Kind(
        "zip entries clash: folder, then file",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/mito/0.0.0", "y"), ("crop101/mito", "x")]),
        ("crop101/mito", "clashes"),
    ),
    Kind(
        "zip entry twice",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/mito/0.0.0", "y"), ("crop101/mito/0.0.0", "x")]),
        ("crop101/mito/0.0.0", "clashes"),
    ),
    Kind(
        "zip entry with a 4 KB name",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/" + "n" * 4096, "x")]),
        ("longer than 255 bytes", "..."),
    ),
    Kind("zip path beyond PATH_MAX", cellmap_phase, lambda r: raw_zip(r, [("/".join(["p" * 200] * 30), "x")]), ("too long",)),
    Kind("zip 1500 folders deep", cellmap_phase, _deep_zip, ("nested more than 64",)),
    Kind(
        "zip entry with control characters",
        cellmap_phase,
        lambda r: raw_zip(r, [("crop101/\x1b[2J\x07../../x", "x")]),
        ("\\x1b[2J\\x07", "outside"),
    ),
    # --- folder trees: only regular files and folders, UTF-8 names, bounded depth
    Kind(
        "symlink to the ground truth",
        multiclass_phase,
        lambda r: _symlink_at("case_1.mha", truth_file, multiclass_submission)(r),
        ("case_1.mha", "symbolic link"),
    ),
    Kind(
        "symlinked crop folder",
        cellmap_phase,
        _symlink_at("submission.zarr/crop101", lambda r: r / f"{MARKER}-phase" / f"{MARKER}-truth.zarr" / "crop101"),
        ("crop101", "symbolic link"),
    ),
    Kind(
        "symlinked zarr chunk",
        cellmap_phase,
        _symlink_at(
            "submission.zarr/crop101/mito/0/0/0",
            lambda r: r / f"{MARKER}-phase" / f"{MARKER}-truth.zarr" / "crop101" / "mito" / "0" / "0" / "0",
        ),
        ("mito/0/0/0", "symbolic link"),
    ),
    Kind(
        "symlinked .zattrs",
        cellmap_phase,
        _symlink_at(
            "submission.zarr/crop101/mito/.zattrs",
            lambda r: r / f"{MARKER}-phase" / f"{MARKER}-truth.zarr" / "crop101" / "mito" / ".zattrs",
        ),
        (".zattrs", "symbolic link"),
    ),
    Kind("FIFO as a zarr chunk", cellmap_phase, _fifo_at("submission.zarr/crop101/mito/0/0/0"), ("mito/0/0/0", "named pipe")),
    Kind("FIFO as .zattrs", cellmap_phase, _fifo_at("submission.zarr/crop101/mito/.zattrs"), (".zattrs", "named pipe")),
    Kind("FIFO as .zarray", cellmap_phase, _fifo_at("submission.zarr/crop101/mito/.zarray"), (".zarray", "named pipe")),
    Kind("FIFO as a case file", multiclass_phase, _fifo_at("case_1.mha", multiclass_submission), ("case_1.mha", "named pipe")),
    Kind(
        "FIFO as predictions.json",
        multiclass_phase,
        _fifo_at("predictions.json", grand_challenge),
        ("predictions.json", "named pipe"),
    ),
    Kind("socket in the submission", cellmap_phase, _socket_in, ("sock", "socket")),
    Kind("folders 1500 deep", cellmap_phase, _deep_folders, ("nested more than 64",)),
    Kind("non-UTF-8 folder name", multiclass_phase, _non_utf8_folder, ("not valid UTF-8", "\\udce9")),
    Kind("control characters in a file name", multiclass_phase, _control_characters_in_name, ("\\x1b[31m\\x07",)),
    # --- choosing one's own ground truth
    Kind("upload shaped like CodaBench's ref/ and res/", cellmap_phase, _own_ground_truth, ("2 zarr folders",)),
    Kind("upload holding a phase.yaml", multiclass_phase, _own_phase_file, outcome=SCORED, check=_scores_like_native),
    # --- zarr arrays (CellMap): a broken label fails that label, the others are scored
    _cellmap_fails(
        "wrong ndim", lambda c: replace_array(c / "mito", np.zeros((48, 48), np.uint32)), ("crop101/mito", "2 dimensions")
    ),
    _cellmap_fails(
        "zero-sized axis", lambda c: replace_array(c / "mito", np.zeros((48, 0, 48), np.uint32)), ("crop101/mito", "empty axis")
    ),
    _cellmap_fails("volume 10^4x the crop", lambda c: huge_declared(c / "mito"), ("crop101/mito", "times larger")),
    _cellmap_fails("corrupted zarr chunks", lambda c: corrupt_chunks(c / "mito"), ("crop101/mito", "cannot be read")),
    _cellmap_fails(
        "bad .zarray JSON", lambda c: (c / "mito" / ".zarray").write_text("{shape: [48"), ("crop101/mito", "not valid JSON")
    ),
    _cellmap_fails("bad .zarray fields", lambda c: edit_zarray(c / "mito", shape="big", chunks=[0]), ("crop101/mito", "shape")),
    _cellmap_fails(
        "object dtype", lambda c: edit_zarray(c / "mito", dtype="|O", filters=[{"id": "vlen-utf8"}]), ("crop101/mito",)
    ),
    _cellmap_fails(
        "structured dtype", lambda c: edit_zarray(c / "mito", dtype=[["a", "<u4"], ["b", "<u4"]]), ("crop101/mito", "data type")
    ),
    _cellmap_fails("pickle codec", lambda c: edit_zarray(c / "mito", filters=[{"id": "pickle"}]), ("crop101/mito", "pickle")),
    _cellmap_fails(
        "string voxel size",
        lambda c: replace_array(c / "mito", np.zeros((48, 48, 48), np.uint32), {"voxel_size": "8nm"}),
        ("crop101/mito", "voxel_size"),
    ),
    _cellmap_fails(".zarray nested 100 000 deep", deep_json(".zarray"), ("crop101/mito", "nested")),
    _cellmap_fails(".zattrs nested 100 000 deep", deep_json(".zattrs"), ("crop101/mito", "nested")),
    _cellmap_fails(
        "zarr.json nested 100 000 deep",
        lambda c: (shutil.rmtree(c / "mito"), (c / "mito").mkdir(), deep_json("zarr.json")(c)),
        ("crop101/mito", "nested"),
    ),
    _cellmap_fails(
        "zarr v3 unknown codec",
        lambda c: zarr_v3(c, {**V3_ARRAY, "codecs": [{"name": "bytes"}, {"name": "evil.codec"}]}),
        ("crop101/mito", "evil.codec"),
    ),
    _cellmap_fails(
        "zarr v3 storage transformer",
        lambda c: zarr_v3(c, {**V3_ARRAY, "storage_transformers": [{"name": "x"}]}),
        ("crop101/mito", "storage transformers"),
    ),
    _cellmap_fails("bz2 chunk decoding to 2 GiB", zarr_bomb("bz2"), ("crop101/mito",)),
    _cellmap_fails("gzip chunk decoding to 2 GiB", zarr_bomb("gzip"), ("crop101/mito",)),
    _cellmap_fails("zlib chunk decoding to 2 GiB", zarr_bomb("zlib"), ("crop101/mito",)),
    _cellmap_fails("lzma chunk decoding to 2 GiB", zarr_bomb("lzma"), ("crop101/mito",)),
    _cellmap_fails(
        "chunk grid far larger than the array",
        lambda c: edit_zarray(c / "mito", chunks=[1500, 1500, 1500]),
        ("crop101/mito", "chunk"),
    ),
    _cellmap_fails(
        "sharded zarr with a billion inner chunks",
        lambda c: zarr_v3(
            c,
            {
                **V3_ARRAY,
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
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1024, 1024, 1024]}},
            },
        ),
        ("crop101/mito",),
    ),
    _cellmap_fails("voxel size 20 times the crop's", with_attrs(voxel_size=[160.0, 160.0, 160.0]), ("crop101/mito", "resampled")),
    # upsampled 15 times: only the crop's region of the resampled array is ever evaluated (issue
    # 14), in bounded memory; it used to be refused for the memory of the whole resampled array
    Kind(
        "voxel size 15 times the crop's",
        cellmap_phase,
        cellmap_with(with_attrs(voxel_size=[120.0, 120.0, 120.0])),
        outcome=SCORED,
        check=_mito_scored,
    ),
    _cellmap_fails("voxel size 0", with_attrs(voxel_size=[8.0, 0.0, 8.0]), ("crop101/mito", "positive")),
    _cellmap_fails("negative voxel size", with_attrs(voxel_size=[8.0, -8.0, 8.0]), ("crop101/mito", "positive")),
    _cellmap_fails("voxel size 1e-300", with_attrs(voxel_size=[8.0, 1e-300, 8.0]), ("crop101/mito", "256 times")),
    _cellmap_fails("voxel size 1e300", with_attrs(voxel_size=[8.0, 1e300, 8.0]), ("crop101/mito", "256 times")),
    _cellmap_fails("translation 1e300", with_attrs(translation=[800.0, 1e300, 2400.0]), ("crop101/mito", "translation")),
    Kind("no crop groups", cellmap_phase, cellmap_with(lambda c: c.rename(c.parent / "volume1")), ("no test crop",)),
    Kind(
        "several zarrs",
        cellmap_phase,
        cellmap_with(lambda c: shutil.copytree(c.parent, c.parent.parent / "second.zarr")),
        ("2 zarr folders",),
    ),
    Kind(
        "192^3 array in 1-voxel chunks, none stored",
        cellmap_phase,
        cellmap_with(one_voxel_chunks),
        outcome=SCORED,
        check=_mito_scored,
    ),
    Kind("big-endian instance labels", cellmap_phase, cellmap_with(big_endian_mito), outcome=SCORED, check=_mito_scored),
    # --- label maps (multiclass): a broken file fails its case
    Kind("missing case", multiclass_phase, multiclass_with(lambda f: None, "case_2"), ("case_2", "no prediction")),
    Kind(
        "duplicate case",
        multiclass_phase,
        lambda r: (lambda f: (itk_image(truth_map(1), f / "case_1.mha"), f)[1])(multiclass_submission(r)),
        ("case_1", "twice"),
    ),
    Kind(
        "extra unknown case",
        multiclass_phase,
        lambda r: (lambda f: (itk_image(truth_map(1), f / "case_9.nii.gz"), f)[1])(multiclass_submission(r)),
        ("case_9",),
    ),
    _multiclass_fails("shape mismatch", _itk(truth_map(1)[:, :, :5]), ("case_1.nii.gz", "shape")),
    _multiclass_fails("spacing mismatch", _itk(truth_map(1), spacing=(1.0, 1.0, 3.0)), ("case_1.nii.gz", "spacing")),
    _multiclass_fails("origin mismatch", _itk(truth_map(1), origin=(0.0, 0.0, 40.0)), ("case_1.nii.gz", "origin")),
    _multiclass_fails(
        "direction mismatch", _itk(truth_map(1), direction=(1, 0, 0, 0, -1, 0, 0, 0, -1)), ("case_1.nii.gz", "direction")
    ),
    _multiclass_fails("float non-integer labels", _itk(truth_map(1) * 0.5), ("case_1.nii.gz", "non-integer")),
    _multiclass_fails(
        "NaN labels", _mask_of(np.where(truth_map(1) > 0, np.nan, 0).astype(np.float32)), ("case_1.npy", "non-integer")
    ),
    _multiclass_fails(
        "Inf labels", _mask_of(np.where(truth_map(1) > 1, np.inf, 0).astype(np.float32)), ("case_1.npy", "non-integer")
    ),
    _multiclass_fails("negative labels", _itk(truth_map(1).astype(np.int16) - 1), ("case_1.nii.gz", "-1")),
    _multiclass_fails("ids near 2^63", _mask_of(truth_map(1).astype(np.uint64) * np.uint64(2**62)), ("case_1.npy", str(2**62))),
    _multiclass_fails("complex data type", _mask_of(truth_map(1).astype(np.complex64)), ("case_1.npy", "complex")),
    _multiclass_fails("label map 10^4x the image", npy_huge_header, ("case_1.npy", "more voxels")),
    _multiclass_fails(
        "pickled .npy",
        lambda f: np.save(f / "case_1.npy", np.array([{"not": "an image"}], dtype=object), allow_pickle=True),
        ("case_1.npy", "pickled"),
    ),
    _multiclass_fails(
        "truncated TIFF",
        _truncated(".tif", lambda p: tifffile.imwrite(p, truth_map(1), photometric="minisblack")),
        ("case_1.tif",),
    ),
    _multiclass_fails("truncated HDF5", _truncated(".h5", _write_h5), ("case_1.h5",)),
    _multiclass_fails("truncated MHA", _truncated(".mha", lambda p: itk_image(truth_map(1), p)), ("case_1.mha",)),
    _multiclass_fails("MHA reading another file", mha_relative(), ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA data file after ':'", mha_relative(": "), ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA data file with a LOCAL decoy below", mha_relative(": ", decoy=True), ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA data file by absolute path", mha_absolute, ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA data file LIST", mha_list, ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA data file pattern", mha_pattern, ("case_1.mha", "own pixel data")),
    _multiclass_fails("MHA with CR-only line endings", mha_relative(newline="\r"), ("case_1.mha",)),
    _multiclass_fails(
        "MHA data file after 70 KB of header",
        mha_relative(padding=("Comment = " + "x" * 60 + "\n") * 1200),
        ("case_1.mha", "own pixel data"),
    ),
    _multiclass_fails("NRRD detached data file", nrrd_pointing("data file"), ("case_1.nrrd",)),
    _multiclass_fails(
        "NRRD 'datafile' after 70 KB of comments",
        nrrd_pointing("datafile", padding=("# " + "c" * 60 + "\n") * 1200),
        ("case_1.nrrd", "detached"),
    ),
    _multiclass_fails("NRRD with CR-only line endings", nrrd_pointing("data file", newline="\r"), ("case_1.nrrd",)),
    _multiclass_fails(
        "NRRD gzip with byte skip into a NIfTI",
        nrrd_pointing("data file", encoding="gzip", skip="byte skip: 352\n", truth_suffix=".nii.gz"),
        ("case_1.nrrd",),
        phase=lambda r: multiclass_phase(r, truth_suffix=".nii.gz"),
    ),
    _multiclass_fails("NIfTI header/image pair", nifti_pair, ("case_1.nii",)),
    _multiclass_fails("NIfTI file holding a MetaImage header", nii_holding_metaimage, ("case_1.nii",)),
    _multiclass_fails(
        "MHA declaring 1600^3 voxels", mha_declaring((1600, 1600, 1600)), ("case_1.mha", "declares 4096000000 bytes")
    ),
    _multiclass_fails("NRRD declaring 1600^3 voxels", nrrd_declaring, ("case_1.nrrd", "declares 4096000000 bytes")),
    _multiclass_fails("NIfTI declaring 1600^3 voxels", nifti_declaring, ("case_1.nii", "declares 4096000000 bytes")),
    _multiclass_fails("zarr label map declaring 1500^3 voxels", zarr_case_declaring(64), ("case_1.zarr", "more voxels")),
    _multiclass_fails("zarr label map in one 1500^3 chunk", zarr_case_declaring(1500), ("case_1.zarr", "3375000000 bytes")),
    _multiclass_fails("TIFF LZMA strip decoding to 2 GiB", tiff_bomb("lzma"), ("case_1.tif",)),
    _multiclass_fails("TIFF deflate strip decoding to 2 GiB", tiff_bomb("zlib"), ("case_1.tif",)),
    Kind(
        "big-endian .npy label map", multiclass_phase, multiclass_with(npy_big_endian), outcome=SCORED, check=_scores_like_native
    ),
    # --- tomography: any format is checked against the grid from its header first
    Kind(
        "tomo MetaImage declaring 4 GB",
        tomo_phase,
        lambda r: tomo_submission(r, lambda f: mha_declaring((1280, 1280, 1080))(f) or (f / "case_1.mha").rename(f / "A.mha")),
        ("A.mha",),
        CASE_FAILURE,
    ),
    # --- FISBe predictions
    _fisbe_fails("HDF5 external link to another file", hdf5_external_link("last"), ("s0.hdf", "link")),
    _fisbe_fails("HDF5 external link on an intermediate group", hdf5_external_link("volumes"), ("s0.hdf", "link")),
    _fisbe_fails("HDF5 soft link", hdf5_soft_link, ("s0.hdf", "link")),
    _fisbe_fails("HDF5 virtual dataset", hdf5_virtual, ("s0.hdf",)),
    _fisbe_fails("HDF5 external storage", hdf5_external_storage, ("s0.hdf",)),
    _fisbe_fails("HDF5 deflate chunk decoding to 2 GiB", hdf5_deflate_bomb, ("s0.hdf",)),
    _fisbe_fails("FISBe TIFF declaring 3.2 GB", fisbe_tiff_declaring, ("s0.tif",)),
    _fisbe_fails("10^6 empty channels", hdf5_million_channels, ("s0.hdf", "(1000000, 16, 32, 32), more voxels")),
    _fisbe_fails("TIFF of 10^5 pages", tiff_many_pages, ("s0.tif", "pages")),
    Kind(
        "big-endian FISBe prediction",
        fisbe_phase,
        lambda r: fisbe_submission(r, hdf5_big_endian),
        outcome=SCORED,
        check=_scores_like_native,
    ),
    # --- Grand-Challenge job lists
    Kind("predictions.json not JSON", multiclass_phase, _gc_text("[{"), ("predictions.json", "JSON")),
    Kind("predictions.json not a job list", multiclass_phase, _gc_text('{"jobs": 1}'), ("predictions.json", "list")),
    Kind(
        "predictions.json nested 100 000 deep",
        multiclass_phase,
        _gc_text("[" * 100_000 + "]" * 100_000),
        ("predictions.json", "nested"),
    ),
    Kind(
        "job names an unknown image",
        multiclass_phase,
        lambda r: grand_challenge(r, lambda jobs: jobs[1]["inputs"][0]["image"].update(name="case_7.mha")),
        ("case_7",),
    ),
    Kind(
        "job pk outside /input",
        multiclass_phase,
        lambda r: grand_challenge(r, lambda jobs: jobs[0].update(pk="../../etc")),
        ("predictions.json", "pk"),
    ),
    Kind(
        "output path outside /input",
        multiclass_phase,
        _gc_relative_path(f"../../../{MARKER}-phase"),
        ("predictions.json", "relative_path"),
    ),
    Kind("NUL in an output path", multiclass_phase, _gc_relative_path("images/seg\x00x"), ("predictions.json", "relative_path")),
    Kind("job output missing", multiclass_phase, lambda r: grand_challenge(r, write=False), ("job-1", "expected one image")),
    # --- multi-annotator masks
    Kind(
        "annotator mask size mismatch",
        annotators_phase,
        lambda r: annotators_submission(r, np.zeros((16, 32), np.uint8)),
        ("img_1_segPred.tif", "shape"),
        CASE_FAILURE,
    ),
    Kind(
        "prediction for an unknown image",
        annotators_phase,
        lambda r: annotators_submission(r, name="img_9_segPred.tif", others=False),
        ("img_9",),
    ),
    Kind(
        "PNG declaring 10^10 pixels",
        annotators_phase,
        lambda r: _png_declaring(annotators_submission(r)),
        ("img_1_segPred.png",),
        CASE_FAILURE,
    ),
    # --- generic segmentation metrics: label maps checked against the truth's grid and classes
    _multiclass_fails(
        "segmentation: spacing mismatch",
        _itk(truth_map(1), spacing=(1.0, 1.0, 3.0)),
        ("case_1.nii.gz", "spacing"),
        phase=segmentation_phase,
    ),
    _multiclass_fails(
        "segmentation: shape mismatch", _itk(truth_map(1)[:, :, :5]), ("case_1.nii.gz", "shape"), phase=segmentation_phase
    ),
    _multiclass_fails(
        "segmentation: label that is no class",
        _itk(truth_map(1) * 3),
        ("case_1.nii.gz", "no class", "6"),
        phase=segmentation_phase,
    ),
    _multiclass_fails(
        "segmentation: 4-D label map", _mask_of(truth_map(1)[None]), ("case_1.npy", "shape"), phase=segmentation_phase
    ),
    _multiclass_fails(
        "segmentation: fractional labels", _itk(truth_map(1) * 0.5), ("case_1.nii.gz", "non-integer"), phase=segmentation_phase
    ),
    _multiclass_fails(
        "segmentation: MetaImage header declaring 1600^3 voxels",
        mha_declaring((1600, 1600, 1600)),
        ("case_1.mha", "declares 4096000000 bytes"),
        phase=segmentation_phase,
    ),
    Kind(
        "segmentation: 120 000 instances in one class",
        segmentation_instance_phase,
        lambda r: segmentation_instance_submission(
            r, np.arange(np.prod(SEGMENTATION_INSTANCES), dtype=np.uint32).reshape(SEGMENTATION_INSTANCES)
        ),
        ("case_1.mha", "instances"),
        CASE_FAILURE,
    ),
    Kind(
        "segmentation: instance ids near 2^32",
        segmentation_instance_phase,
        lambda r: segmentation_instance_submission(r, (segmentation_instances() * np.uint32(1 << 30)).astype(np.uint32)),
        outcome=SCORED,
        check=_scores_like_native,
    ),
    # --- autoPET presets: probability maps read as nibabel reads them, click steps named per case
    _multiclass_fails(
        "autoPET: float NIfTI cut short",
        _truncated(".nii.gz", lambda path: itk_image(truth_map(1).astype(np.float32) * 0.75, path)),
        ("case_1.nii.gz", "truncated"),
        phase=autopet_phase,
    ),
    _multiclass_fails(
        "autoPET: NaN in a probability map",
        _itk(np.where(truth_map(1) > 0, np.nan, 0).astype(np.float32)),
        ("case_1.nii.gz", "NaN"),
        phase=autopet_phase,
    ),
    _multiclass_fails(
        "autoPET: negative values", _itk(truth_map(1).astype(np.int16) - 1), ("case_1.nii.gz", "negative"), phase=autopet_phase
    ),
    Kind(
        "autoPET interactive: a click step missing",
        lambda r: autopet_phase(r, "preset: autopet4-interactive\nmissing_cases: reject\n"),
        lambda r: autopet_steps(r, missing=3),
        ("case_1", "case_1_pred3", "11 click steps"),
    ),
    # Round four: names a participant chooses, archives counted with their folders, a rule of
    # the reference a participant can use, and memory the phase itself needs.
    Kind(
        "multiclass: a model folder named after a leaderboard column ('pooled')",
        lambda r: multiclass_phase(r, "max_models: 3\n"),
        lambda r: _models(r, "m1", "pooled"),
        outcome=SCORED,
        check=_ranked_model_keeps_its_columns,
    ),
    Kind(
        "multiclass: a model folder name of 240 bytes",
        lambda r: multiclass_phase(r, "max_models: 3\n"),
        lambda r: _models(r, "m1", "m" * 240),
        ("model folder", "240 bytes long"),
    ),
    Kind(
        "annotators: a model id of 243 bytes",
        annotators_phase,
        _annotators_long_model,
        ("model folder", "bytes long"),
    ),
    Kind(
        "annotators: 16 model folders (the most a phase takes by default), reports on",
        annotators_phase,
        _sixteen_annotator_models,
        outcome=SCORED,
    ),
    Kind(
        "zip of 30 000 empty files in 300 folders, 30 000 entries allowed",
        lambda r: cellmap_phase(r, "archive: {max_entries: 30000}\n"),
        lambda r: raw_zip(r, [(f"d{i // 100}/f{i}", b"") for i in range(30_000)], zipfile.ZIP_STORED),
        ("30000 files in 300 folders",),
    ),
    Kind(
        "tar.gz of 30 000 empty files in 300 folders, 30 000 entries allowed",
        lambda r: cellmap_phase(r, "archive: {max_entries: 30000}\n"),
        _many_tar_entries,
        ("more than 30000 files and folders",),
    ),
    Kind(
        "segmentation: exactly the truth's shape and smallest type, the phase's case over its memory",
        _large_segmentation_phase,
        _large_segmentation_submission,
        ("Case case_1 failed", "the phase's case needs", "smallest prediction"),
        PHASE_FAULT,
    ),
    Kind(
        "CellMap head: salt noise makes the badly predicted crop pathological",
        lambda r: cellmap_phase(r, "version: head\n"),
        _salted_cellmap,
        outcome=SCORED,
        check=_pathological_crop_is_named,
    ),
]


def _png_declaring(folder: Path) -> Path:
    """A PNG header declaring 100000 x 100000 pixels, with a few bytes of data."""
    (folder / "img_1_segPred.tif").unlink()
    itk_image(np.zeros((32, 32), np.uint8), folder / "img_1_segPred.png")
    data = bytearray((folder / "img_1_segPred.png").read_bytes())
    data[16:24] = (100_000).to_bytes(4, "big") * 2  # IHDR width and height
    ihdr = bytes(data[12:29])
    data[29:33] = zlib.crc32(ihdr).to_bytes(4, "big")
    (folder / "img_1_segPred.png").write_bytes(bytes(data))
    return folder
