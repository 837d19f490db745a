"""A corpus of hostile and broken submissions, across the suites, run through the command line
exactly as a platform runs it. For every kind:

- the exit status is 2, and either the whole submission is rejected or the broken case is
  recorded as a failure in metrics.json while the rest is scored (``outcome``);
- the last stderr line names the problem and the file, in the participant's terms, and is not
  a traceback;
- no ground-truth file name or path appears in stdout, stderr or any file written (the phase
  folder and its files carry a marker that must never leak);
- nothing is written outside the output folder: the submission and phase folders are
  unchanged, the working directory stays empty and the scratch space is cleaned up.

The kinds, and which outcome each gets, are listed in the README ("What participants see
when a submission is rejected").
"""

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile

from conftest import FIXTURES, ROOT, validate_metrics

MARKER = "gtsecret"  # in every ground-truth folder and file name: must never reach the participant
REJECTED, CASE_FAILURE = "rejected", "case failure"


# --------------------------------------------------------------------------------------------
# Phases


def cellmap_phase(root: Path, extra: str = "") -> Path:
    source = FIXTURES / "cellmap" / "cases" / "a_perfect_instance"
    phase = root / f"{MARKER}-phase"
    shutil.copytree(source / "truth.zarr", phase / f"{MARKER}-truth.zarr")
    shutil.copy(source / "manifest.csv", phase / f"{MARKER}-manifest.csv")
    (phase / "phase.yaml").write_text(f"suite: cellmap\ntruth: {MARKER}-truth.zarr\nmanifest: {MARKER}-manifest.csv\n{extra}")
    return phase


def cellmap_submission(root: Path) -> Path:
    folder = root / "input"
    shutil.copytree(FIXTURES / "cellmap" / "cases" / "a_perfect_instance" / "submission.zarr", folder / "submission.zarr")
    return folder


SPACING, ORIGIN = (1.0, 1.0, 2.0), (0.0, 0.0, 0.0)


def itk_image(array: np.ndarray, path: Path, spacing=SPACING, origin=ORIGIN, direction=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    if direction is not None:
        image.SetDirection(direction)
    sitk.WriteImage(image, str(path))
    return path


def truth_map(index: int) -> np.ndarray:
    labels = np.zeros((6, 8, 8), np.uint8)
    labels[1:5, 2:6, 1 + index:5 + index] = 1
    labels[2:4, 3:5, 2:4] = 2
    return labels


def multiclass_phase(root: Path, extra: str = "") -> Path:
    phase = root / f"{MARKER}-phase"
    for i in (1, 2):
        itk_image(truth_map(i), phase / f"{MARKER}-labels" / f"case_{i}.mha")
    (phase / "phase.yaml").write_text(f"suite: multiclass\nclasses: 3\ntruth: {MARKER}-labels\n{extra}")
    return phase


def multiclass_submission(root: Path, suffix: str = ".nii.gz") -> Path:
    folder = root / "input"
    for i in (1, 2):
        itk_image(truth_map(i), folder / f"case_{i}{suffix}")
    return folder


def annotators_phase(root: Path) -> Path:
    phase = root / f"{MARKER}-phase"
    mask = np.zeros((32, 32), np.uint8)
    mask[8:24, 10:12] = 1
    for annotator in ("ann_A", "ann_B"):
        (phase / f"{MARKER}-annotations" / annotator).mkdir(parents=True)
        tifffile.imwrite(phase / f"{MARKER}-annotations" / annotator / "img_1.tif", mask)
    (phase / "phase.yaml").write_text(f"suite: annotators\nannotations: {MARKER}-annotations\neval_class: 1\ndilation: false\n")
    return phase


def annotators_submission(root: Path, array=None, name="img_1_segPred.tif") -> Path:
    folder = root / "input"
    folder.mkdir()
    if array is None:
        array = np.zeros((32, 32), np.uint8)
        array[8:24, 10:13] = 1
    tifffile.imwrite(folder / name, array)
    return folder


# --------------------------------------------------------------------------------------------
# Archive builders


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


# --------------------------------------------------------------------------------------------
# Array and zarr mutations (CellMap)


def cellmap_with(root: Path, mutate: Callable[[Path], None]) -> Path:
    folder = cellmap_submission(root)
    mutate(folder / "submission.zarr" / "crop101")
    return folder


def edit_zarray(label_folder: Path, **changes) -> None:
    meta = json.loads((label_folder / ".zarray").read_text())
    meta.update(changes)
    (label_folder / ".zarray").write_text(json.dumps(meta))


def replace_array(label_folder: Path, array: np.ndarray, attrs: dict | None = None) -> None:
    import zarr

    shutil.rmtree(label_folder)
    created = zarr.open_array(str(label_folder), mode="w", shape=array.shape, dtype=array.dtype,
                              chunks=tuple(max(1, s) for s in array.shape), zarr_format=2)
    if array.size:
        created[...] = array
    created.attrs.update(attrs if attrs is not None else {"voxel_size": [8.0, 8.0, 8.0], "translation": [800.0, 1600.0, 2400.0]})


def huge_declared(label_folder: Path) -> None:
    """Metadata for an array 10^4 times larger than the crop (its chunks are never read)."""
    edit_zarray(label_folder, shape=[48 * 22, 48 * 22, 48 * 21], chunks=[48, 48, 48])


def corrupt_chunks(label_folder: Path) -> None:
    for chunk in label_folder.rglob("*"):
        if chunk.is_file() and not chunk.name.startswith("."):
            chunk.write_bytes(b"\x00garbage" * 7)


# --------------------------------------------------------------------------------------------
# Grand-Challenge layouts (multiclass phase)


def grand_challenge(root: Path, mutate_jobs=None, write=True) -> Path:
    folder = root / "input"
    jobs = []
    for i in (1, 2):
        pk = f"job-{i}"
        if write:
            itk_image(truth_map(i), folder / pk / "output" / "images" / "seg" / f"{i}a7c1e2.mha")
        socket = {"slug": "seg", "kind": "Segmentation", "super_kind": "Image", "relative_path": "images/seg"}
        jobs.append({"pk": pk, "inputs": [{"interface": {**socket, "slug": "ct", "relative_path": "images/ct"}, "image": {"name": f"case_{i}.mha"}}],
                     "outputs": [{"interface": socket, "image": {"name": "x.mha"}}]})
    if mutate_jobs:
        mutate_jobs(jobs)
    folder.mkdir(exist_ok=True)
    (folder / "predictions.json").write_text(json.dumps(jobs) if not isinstance(jobs, str) else jobs)
    return folder


# --------------------------------------------------------------------------------------------
# The corpus


@dataclass(frozen=True)
class Kind:
    name: str
    phase: Callable[[Path], Path]
    submission: Callable[[Path], Path]
    words: tuple[str, ...]
    outcome: str = REJECTED


def _multiclass_with(name: str, array: np.ndarray, suffix=".nii.gz", **geometry):
    def build(root: Path) -> Path:
        folder = multiclass_submission(root, suffix=".nii.gz")
        (folder / "case_1.nii.gz").unlink()
        if suffix == ".npy":
            np.save(folder / f"case_1{suffix}", array)
        else:
            itk_image(array, folder / f"case_1{suffix}", **geometry)
        return folder
    return build


def _truncated(suffix: str, writer) -> Callable[[Path], Path]:
    """A file of the right shape with the last part of its bytes cut off."""
    def build(root: Path) -> Path:
        folder = multiclass_submission(root)
        (folder / "case_1.nii.gz").unlink()
        path = folder / f"case_1{suffix}"
        writer(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - max(150, len(data) // 3)])
        return folder
    return build


def _write_tiff(path):
    tifffile.imwrite(path, truth_map(1), photometric="minisblack")


def _write_h5(path):
    with h5py.File(path, "w") as f:
        f.create_dataset("labels", data=truth_map(1))


def _write_mha(path):
    itk_image(truth_map(1), path)


def _huge_npy_header(root: Path) -> Path:
    """An .npy whose header declares 10^4 times the image's voxels (the data is never read)."""
    folder = multiclass_submission(root)
    (folder / "case_1.nii.gz").unlink()
    with open(folder / "case_1.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": (600, 800, 800)})
        f.write(bytes(1000))
    return folder


def _pickled_npy(root: Path) -> Path:
    folder = multiclass_submission(root)
    (folder / "case_1.nii.gz").unlink()
    np.save(folder / "case_1.npy", np.array([{"not": "an image"}], dtype=object), allow_pickle=True)
    return folder


def _external_mha(root: Path) -> Path:
    """A MetaImage header whose data file is the ground truth's."""
    folder = multiclass_submission(root)
    (folder / "case_1.nii.gz").unlink()
    header = ("ObjectType = Image\nNDims = 3\nDimSize = 8 8 6\nElementSpacing = 1 1 2\nElementType = MET_UCHAR\n"
              f"ElementDataFile = ../{MARKER}-phase/{MARKER}-labels/case_1.mha\n")
    (folder / "case_1.mha").write_text(header)
    return folder


def _symlink_to_truth(root: Path) -> Path:
    folder = multiclass_submission(root)
    (folder / "case_1.nii.gz").unlink()
    (folder / "case_1.mha").symlink_to(root / f"{MARKER}-phase" / f"{MARKER}-labels" / "case_1.mha")
    return folder


def _duplicate_case(root: Path) -> Path:
    folder = multiclass_submission(root)
    itk_image(truth_map(1), folder / "case_1.mha")
    return folder


def _extra_case(root: Path) -> Path:
    folder = multiclass_submission(root)
    itk_image(truth_map(1), folder / "case_9.nii.gz")
    return folder


def _missing_case(root: Path) -> Path:
    folder = multiclass_submission(root)
    (folder / "case_2.nii.gz").unlink()
    return folder


def _many_entries(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    with zipfile.ZipFile(folder / "submission.zip", "w", zipfile.ZIP_STORED) as z:
        for i in range(100_000):
            z.writestr(f"crop101/mito/{i}", b"")
    return folder


def _non_utf8_names(root: Path) -> Path:
    folder = root / "input"
    folder.mkdir()
    with tarfile.open(folder / "submission.tar", "w", encoding="latin-1") as tar:
        info = tarfile.TarInfo("crop\xe9\xff/\xe0b")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return folder


def _zip_bomb_ratio(root: Path) -> Path:
    return raw_zip(root, [("crop101/mito/0.0.0", bytes(48 << 20))])


def _phase_options(extra: str):
    return lambda root: cellmap_phase(root, extra)


KINDS = [
    # archives
    Kind("zip path traversal", cellmap_phase, lambda r: zipped_cellmap(r, extra=[("../../escaped.txt", "x")]), ("../../escaped.txt", "outside")),
    Kind("zip absolute path", cellmap_phase, lambda r: zipped_cellmap(r, extra=[("/tmp/escaped.txt", "x")]), ("/tmp/escaped.txt", "absolute")),
    Kind("zip backslash traversal", cellmap_phase, lambda r: zipped_cellmap(r, extra=[("..\\..\\escaped.txt", "x")]), ("escaped.txt", "outside")),
    Kind("zip symlink", cellmap_phase, lambda r: zipped_cellmap(r, symlink="/etc/passwd"), ("crop101/mito/link", "symbolic link")),
    Kind("tar symlink", cellmap_phase, lambda r: tar_with(r, tar_link("crop101/evil", tarfile.SYMTYPE, "/etc/passwd")), ("crop101/evil", "link")),
    Kind("tar hard link", cellmap_phase, lambda r: tar_with(r, tar_link("crop101/hard", tarfile.LNKTYPE, "/etc/shadow")), ("crop101/hard", "link")),
    Kind("tar device file", cellmap_phase, lambda r: tar_with(r, tar_link("crop101/dev", tarfile.CHRTYPE, "")), ("crop101/dev", "special file")),
    Kind("zip bomb (ratio)", cellmap_phase, _zip_bomb_ratio, ("crop101/mito/0.0.0", "zip bomb")),
    Kind("zip bomb (absolute size)", _phase_options("archive: {max_total_bytes: 1000000}\n"),
         lambda r: raw_zip(r, [("crop101/mito/0.0.0", os.urandom(2_000_000))], zipfile.ZIP_STORED), ("2.0 MB", "1.0 MB")),
    Kind("100 000 tiny entries", _phase_options("archive: {max_entries: 50000}\n"), _many_entries, ("100000 entries",)),
    Kind("nested zip", cellmap_phase, lambda r: raw_zip(r, [("inner.zip", (FIXTURES.parent / "example-submission" / "submission.zip").read_bytes())]), ("inner.zip", "another archive")),
    Kind("empty zip", cellmap_phase, lambda r: raw_zip(r, []), ("holds no zarr",)),
    Kind("not a zip", cellmap_phase, lambda r: single_file(r, "submission.zip", b"this is not an archive"), ("submission.zip", "not a readable zip")),
    Kind("truncated zip", cellmap_phase, lambda r: single_file(r, "submission.zip", (FIXTURES.parent / "example-submission" / "submission.zip").read_bytes()[:9000]), ("submission.zip",)),
    Kind("non-UTF-8 names", cellmap_phase, _non_utf8_names, ("no test crop",)),
    Kind("dot-dot-like names", cellmap_phase, lambda r: raw_zip(r, [("..crop101/...", "x"), ("crop101..x/a", "y")]), ("no test crop",)),
    Kind("two archives", cellmap_phase, lambda r: _two_archives(r), ("2 archives",)),
    Kind("empty folder", cellmap_phase, lambda r: (r / "input").mkdir() or r / "input", ("empty",)),
    # zarr arrays (CellMap): a broken label fails that label, the others are scored
    Kind("wrong ndim", cellmap_phase, lambda r: cellmap_with(r, lambda c: replace_array(c / "mito", np.zeros((48, 48), np.uint32))), ("crop101/mito", "2 dimensions"), CASE_FAILURE),
    Kind("zero-sized axis", cellmap_phase, lambda r: cellmap_with(r, lambda c: replace_array(c / "mito", np.zeros((48, 0, 48), np.uint32))), ("crop101/mito", "empty axis"), CASE_FAILURE),
    Kind("volume 10^4x the crop", cellmap_phase, lambda r: cellmap_with(r, lambda c: huge_declared(c / "mito")), ("crop101/mito", "times larger"), CASE_FAILURE),
    Kind("corrupted zarr chunks", cellmap_phase, lambda r: cellmap_with(r, lambda c: corrupt_chunks(c / "mito")), ("crop101/mito", "cannot be read"), CASE_FAILURE),
    Kind("bad .zarray JSON", cellmap_phase, lambda r: cellmap_with(r, lambda c: (c / "mito" / ".zarray").write_text("{shape: [48")), ("crop101/mito", "not valid JSON"), CASE_FAILURE),
    Kind("bad .zarray fields", cellmap_phase, lambda r: cellmap_with(r, lambda c: edit_zarray(c / "mito", shape="big", chunks=[0])), ("crop101/mito", "not a readable zarr array"), CASE_FAILURE),
    Kind("object dtype", cellmap_phase, lambda r: cellmap_with(r, lambda c: edit_zarray(c / "mito", dtype="|O", filters=[{"id": "vlen-utf8"}])), ("crop101/mito", "vlen-utf8"), CASE_FAILURE),
    Kind("pickle codec", cellmap_phase, lambda r: cellmap_with(r, lambda c: edit_zarray(c / "mito", filters=[{"id": "pickle"}])), ("crop101/mito", "pickle"), CASE_FAILURE),
    Kind("string voxel size", cellmap_phase, lambda r: cellmap_with(r, lambda c: replace_array(c / "mito", np.zeros((48, 48, 48), np.uint32), {"voxel_size": "8nm"})), ("crop101/mito", "voxel_size"), CASE_FAILURE),
    Kind("no crop groups", cellmap_phase, lambda r: cellmap_with(r, lambda c: c.rename(c.parent / "volume1")), ("no test crop",)),
    Kind("several zarrs", cellmap_phase, lambda r: cellmap_with(r, lambda c: shutil.copytree(c.parent, c.parent.parent / "second.zarr")), ("2 zarr folders",)),
    # label maps (multiclass): a broken file fails its case
    Kind("missing case", multiclass_phase, _missing_case, ("case_2", "no prediction")),
    Kind("duplicate case", multiclass_phase, _duplicate_case, ("case_1", "twice")),
    Kind("extra unknown case", multiclass_phase, _extra_case, ("case_9",)),
    Kind("shape mismatch", multiclass_phase, _multiclass_with("s", truth_map(1)[:, :, :5]), ("case_1.nii.gz", "shape"), CASE_FAILURE),
    Kind("spacing mismatch", multiclass_phase, _multiclass_with("s", truth_map(1), spacing=(1.0, 1.0, 3.0)), ("case_1.nii.gz", "spacing"), CASE_FAILURE),
    Kind("origin mismatch", multiclass_phase, _multiclass_with("o", truth_map(1), origin=(0.0, 0.0, 40.0)), ("case_1.nii.gz", "origin"), CASE_FAILURE),
    Kind("direction mismatch", multiclass_phase, _multiclass_with("d", truth_map(1), direction=(1, 0, 0, 0, -1, 0, 0, 0, -1)), ("case_1.nii.gz", "direction"), CASE_FAILURE),
    Kind("float non-integer labels", multiclass_phase, _multiclass_with("f", truth_map(1) * 0.5), ("case_1.nii.gz", "non-integer"), CASE_FAILURE),
    Kind("NaN labels", multiclass_phase, _multiclass_with("n", np.where(truth_map(1) > 0, np.nan, 0).astype(np.float32), suffix=".npy"), ("case_1.npy", "non-integer"), CASE_FAILURE),
    Kind("Inf labels", multiclass_phase, _multiclass_with("i", np.where(truth_map(1) > 1, np.inf, 0).astype(np.float32), suffix=".npy"), ("case_1.npy", "non-integer"), CASE_FAILURE),
    Kind("negative labels", multiclass_phase, _multiclass_with("m", truth_map(1).astype(np.int16) - 1), ("case_1.nii.gz", "-1"), CASE_FAILURE),
    Kind("ids near 2^63", multiclass_phase, _multiclass_with("h", truth_map(1).astype(np.uint64) * np.uint64(2**62), suffix=".npy"), ("case_1.npy", str(2**62)), CASE_FAILURE),
    Kind("complex data type", multiclass_phase, _multiclass_with("c", truth_map(1).astype(np.complex64), suffix=".npy"), ("case_1.npy", "complex"), CASE_FAILURE),
    Kind("label map 10^4x the image", multiclass_phase, _huge_npy_header, ("case_1.npy", "more voxels"), CASE_FAILURE),
    Kind("pickled .npy", multiclass_phase, _pickled_npy, ("case_1.npy", "pickled"), CASE_FAILURE),
    Kind("truncated TIFF", multiclass_phase, _truncated(".tif", _write_tiff), ("case_1.tif",), CASE_FAILURE),
    Kind("truncated HDF5", multiclass_phase, _truncated(".h5", _write_h5), ("case_1.h5",), CASE_FAILURE),
    Kind("truncated MHA", multiclass_phase, _truncated(".mha", _write_mha), ("case_1.mha",), CASE_FAILURE),
    Kind("MHA reading another file", multiclass_phase, _external_mha, ("case_1.mha", "ElementDataFile = LOCAL"), CASE_FAILURE),
    Kind("symlink to the ground truth", multiclass_phase, _symlink_to_truth, ("case_1.mha", "symbolic link")),
    # Grand-Challenge job lists
    Kind("predictions.json not JSON", multiclass_phase, lambda r: _gc_text(r, "[{"), ("predictions.json", "JSON")),
    Kind("predictions.json not a job list", multiclass_phase, lambda r: _gc_text(r, '{"jobs": 1}'), ("predictions.json", "list")),
    Kind("job names an unknown image", multiclass_phase, lambda r: grand_challenge(r, lambda jobs: jobs[1]["inputs"][0]["image"].update(name="case_7.mha")), ("case_7",)),
    Kind("job pk outside /input", multiclass_phase, lambda r: grand_challenge(r, lambda jobs: jobs[0].update(pk="../../etc")), ("predictions.json", "pk")),
    Kind("output path outside /input", multiclass_phase, lambda r: grand_challenge(r, lambda jobs: jobs[0]["outputs"][0]["interface"].update(relative_path="../../../gtsecret-phase")), ("predictions.json", "relative_path")),
    Kind("job output missing", multiclass_phase, lambda r: grand_challenge(r, write=False), ("job-1", "expected one image")),
    # multi-annotator masks
    Kind("annotator mask size mismatch", annotators_phase, lambda r: annotators_submission(r, np.zeros((16, 32), np.uint8)), ("img_1_segPred.tif", "shape"), CASE_FAILURE),
    Kind("prediction for an unknown image", annotators_phase, lambda r: annotators_submission(r, name="img_9_segPred.tif"), ("img_9",)),
]


def _two_archives(root: Path) -> Path:
    folder = zipped_cellmap(root)
    shutil.copy(folder / "submission.zip", folder / "second.zip")
    return folder


def _gc_text(root: Path, text: str) -> Path:
    folder = grand_challenge(root)
    (folder / "predictions.json").write_text(text)
    return folder


def test_the_corpus_is_large_enough():
    assert len({k.name for k in KINDS}) == len(KINDS) >= 40


# --------------------------------------------------------------------------------------------
# Running one kind


def snapshot(folder: Path) -> dict[str, tuple]:
    return {str(p.relative_to(folder)): (p.is_symlink(), p.stat().st_size if p.is_file() and not p.is_symlink() else 0, p.stat(follow_symlinks=False).st_mtime_ns)
            for p in folder.rglob("*")}


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_hostile_submission(kind, tmp_path):
    phase = kind.phase(tmp_path)
    submission = kind.submission(tmp_path)
    before = {"phase": snapshot(phase), "input": snapshot(submission)}
    workdir, scratch, output = tmp_path / "cwd", tmp_path / "scratch", tmp_path / "output"
    workdir.mkdir()
    scratch.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "--input", str(submission), "--ground-truth", str(phase), "--output", str(output)],
        capture_output=True, text=True, timeout=600, cwd=workdir,
        env={**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)},
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""

    assert done.returncode == 2, f"exit {done.returncode}: {done.stderr[-1500:]}"
    assert last.startswith("Submission rejected: "), last
    assert "Traceback" not in last and not last.startswith("  File ")
    for word in kind.words:
        assert word in last, f"{word!r} not in {last!r}"

    written = {p: p.read_bytes() for p in output.rglob("*") if p.is_file()} if output.exists() else {}
    for text in [done.stdout, done.stderr, *(b.decode("latin-1") for b in written.values())]:
        assert MARKER not in text and str(phase) not in text

    if kind.outcome == CASE_FAILURE:
        metrics = json.loads((output / "metrics.json").read_text())
        validate_metrics(metrics)
        assert metrics["failures"] and all(f["kind"] == "submission" for f in metrics["failures"])
        assert metrics["case"], "the other cases must still be scored"

    assert snapshot(phase) == before["phase"] and snapshot(submission) == before["input"]
    assert not any(workdir.iterdir()) and not any(scratch.iterdir())
