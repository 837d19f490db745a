"""MetaImage, NRRD, NIfTI and PNG files can only be read from themselves (``itk_formats``).

Every attack points at a "ground-truth" file made by the test, and an open detector (Linux
inotify on the target's folder, which sees opens by any process) proves the target is never
opened, while the same file read by SimpleITK without the check does open it (so each test
shows its attack is real). Files SimpleITK writes itself read as before. Fuzz targets build
headers from the formats' grammars and check the property against the real library:
whenever the check accepts a file, SimpleITK with the forced ImageIO opens no other file.

``FUZZ_ITK_EXAMPLES`` sets the examples per fuzz target (default 40, derandomized); with it
set, examples are random.
"""

import gzip
import os
import resource
import shutil
import signal
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.opens import Opens
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evaluation import contract, runner
from evaluation.contract import Task
from evaluation.errors import PhaseError, Unusable, organizer_file
from evaluation.readers import images, itk_formats

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the open detector uses Linux inotify")

_EXAMPLES = int(os.environ.get("FUZZ_ITK_EXAMPLES", 40))
_SETTINGS = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    derandomize="FUZZ_ITK_EXAMPLES" not in os.environ,
    suppress_health_check=list(HealthCheck),
)


def FUZZ(test):  # noqa: N802 - a decorator like hypothesis' own
    """Bounded examples; no per-test time limit when more are asked for."""
    test = _SETTINGS(test)
    return pytest.mark.timeout(0)(test) if "FUZZ_ITK_EXAMPLES" in os.environ else test


TRUTH = (np.arange(6 * 8 * 8) * 7 % 5).astype(np.uint8).reshape(6, 8, 8)  # (z, y, x); ITK size 8 8 6


# --------------------------------------------------------------------------------------------
# Running ITK in a child


def _in_child(action, timeout: float = 60.0) -> int:
    """Run ``action`` in a forked child (a crash or hang in ITK cannot take the tests down);
    returns the child's exit status (0: action returned, 1: it raised)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1), os.dup2(devnull, 2)
            resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
            action()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise TimeoutError("SimpleITK did not finish")
        time.sleep(0.002)


def _itk_read(path: Path, io: str | None = "forced") -> int:
    """SimpleITK reading ``path`` without any check, in a child: with the ImageIO of the suffix
    ("forced"), a named one, or (None) the one SimpleITK's factory picks from the content."""

    def action():
        reader = sitk.ImageFileReader()
        if io is not None:
            reader.SetImageIO(itk_formats.image_io(path) if io == "forced" else io)
        reader.SetFileName(str(path))
        reader.ReadImageInformation()
        reader.Execute()

    return _in_child(action)


def test_open_detector_sees_opens_and_only_opens(tmp_path):
    watched, other = tmp_path / "watched", tmp_path / "other"
    watched.mkdir(), other.mkdir()
    (watched / "truth.raw").write_bytes(b"x" * 10)
    (other / "else.raw").write_bytes(b"y")
    with Opens(watched) as opens:
        assert opens.names() == set()
        os.stat(watched / "truth.raw"), os.path.exists(watched / "truth.raw"), os.listdir(other)
        (other / "else.raw").read_bytes()
        assert opens.names() == set()  # stat, existence and other folders are not opens here
        (watched / "truth.raw").read_bytes()
        assert opens.names() == {"truth.raw"}
        assert _in_child(lambda: open(watched / "truth.raw", "rb").close()) == 0
        assert opens.names() == {"truth.raw"}  # a child process's open is seen too
        image = sitk.GetImageFromArray(TRUTH)
        sitk.WriteImage(image, str(other / "t.mha"))
        header = (other / "t.mha").read_bytes().replace(b"ElementDataFile = LOCAL", b"ElementDataFile = ../watched/truth.raw")
        (other / "t.mha").write_bytes(header)
        assert _itk_read(other / "t.mha") != 0  # too short to be the image, but ITK opened it
        assert "truth.raw" in opens.names()


# --------------------------------------------------------------------------------------------
# Attacks: a submission folder beside the phase folder, every target in phase/labels


class Layout:
    def __init__(self, root: Path):
        self.root, self.labels, self.sub = root, root / "phase" / "labels", root / "sub"
        self.labels.mkdir(parents=True)
        self.sub.mkdir()
        image = sitk.GetImageFromArray(TRUTH)
        sitk.WriteImage(image, str(self.labels / "case_1.mha"))
        sitk.WriteImage(image, str(self.labels / "case_1.nii.gz"))
        sitk.WriteImage(image, str(self.labels / "case_2.nhdr"))  # detached: case_2.nhdr + case_2.raw
        (self.labels / "case_1.raw").write_bytes(TRUTH.tobytes())
        for z in range(TRUTH.shape[0]):
            (self.labels / f"slice_{z}.raw").write_bytes(TRUTH[z].tobytes())


META_HEAD = "ObjectType = Image\nNDims = 3\nDimSize = 8 8 6\nElementType = MET_UCHAR\nHeaderSize = -1\n"
NRRD_HEAD = "NRRD0004\ntype: uint8\ndimension: 3\nsizes: 8 8 6\nencoding: raw\n"
SLICES = "".join(f"../phase/labels/slice_{z}.raw\n" for z in range(6))
LOCAL_MESSAGE = r"must hold its own pixel data \(ElementDataFile = LOCAL\)"
DETACHED_MESSAGE = "detached NRRD header is not accepted"


def _meta(layout, text):
    return text.replace("ABS", str(layout.labels))


# kind -> (file name, contents(layout), message, targets opened without the check)
ATTACKS = {
    "mha equals, relative": (
        "case_1.mha",
        lambda l: META_HEAD + "ElementDataFile = ../phase/labels/case_1.mha\n",
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha colon, decoy LOCAL below": (
        "case_1.mha",
        lambda l: META_HEAD + "ElementDataFile: ../phase/labels/case_1.mha\nElementDataFile = LOCAL\n",
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha absolute": (
        "case_1.mha",
        lambda l: _meta(l, META_HEAD + "ElementDataFile = ABS/case_1.mha\n"),
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha LIST": (
        "case_1.mha",
        lambda l: META_HEAD + "ElementDataFile = LIST\n" + SLICES,
        LOCAL_MESSAGE,
        {f"slice_{z}.raw" for z in range(6)},
    ),
    "mha %d pattern": (
        "case_1.mha",
        lambda l: META_HEAD + "ElementDataFile = ../phase/labels/slice_%d.raw 0 5 1\n",
        LOCAL_MESSAGE,
        {f"slice_{z}.raw" for z in range(6)},
    ),
    "mha CR line end": (
        "case_1.mha",
        lambda l: META_HEAD + "ElementDataFile = ../phase/labels/case_1.mha\r",
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha CR-only header": (
        "case_1.mha",
        lambda l: (META_HEAD + "ElementDataFile: ../phase/labels/case_1.mha\n").replace("\n", "\r"),
        "incomplete|carriage return",
        set(),
    ),  # MetaIO cannot parse it either
    "mha CRLF": (
        "case_1.mha",
        lambda l: (META_HEAD + "ElementDataFile = ../phase/labels/case_1.mha\n").replace("\n", "\r\n"),
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha key after 70 KB": (
        "case_1.mha",
        lambda l: (
            "Foo\nElementDataFile = LOCAL\n"
            + META_HEAD
            + "".join(f"Note{i} = {'n' * 60}\n" for i in range(1100))
            + "ElementDataFile = ../phase/labels/case_1.mha\n"
        ),
        LOCAL_MESSAGE,
        {"case_1.mha"},
    ),
    "mha key after a 70 KB comment": (
        "case_1.mha",
        lambda l: META_HEAD + "Comment = " + "c" * 70000 + "\nElementDataFile = ../phase/labels/case_1.mha\n",
        "longer than",
        set(),
    ),  # MetaIO gives up at 499 characters
    "nrrd data file": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "data file: ../phase/labels/case_1.raw\n",
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd datafile": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "datafile: ../phase/labels/case_1.raw\n",
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd DATA FILE": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "DATA FILE: ../phase/labels/case_1.raw\n",
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd DataFile": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "DataFile: ../phase/labels/case_1.raw\n\n",
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd absolute": (
        "case_1.nrrd",
        lambda l: _meta(l, NRRD_HEAD + "data file: ABS/case_1.raw\n"),
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd CR-only": (
        "case_1.nrrd",
        lambda l: (NRRD_HEAD + "data file: ../phase/labels/case_1.raw\n\n").replace("\n", "\r"),
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd after 70 KB of comments": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "".join(f"# {'c' * 68}\n" for _ in range(1000)) + "data file: ../phase/labels/case_1.raw\n",
        DETACHED_MESSAGE,
        {"case_1.raw"},
    ),
    "nrrd LIST": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "data file: LIST\n" + SLICES,
        DETACHED_MESSAGE,
        {f"slice_{z}.raw" for z in range(6)},
    ),
    "nrrd %d pattern": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD + "data file: ../phase/labels/slice_%d.raw 0 5 1\n",
        DETACHED_MESSAGE,
        {f"slice_{z}.raw" for z in range(6)},
    ),
    "nrrd detached .nhdr content": (
        "case_1.nrrd",
        lambda l: (
            (l.labels / "case_2.nhdr").read_text().replace("data file: case_2.raw", "data file: ../phase/labels/case_2.raw")
        ),
        DETACHED_MESSAGE,
        {"case_2.raw"},
    ),
    "nrrd gzip and byte skip": (
        "case_1.nrrd",
        lambda l: NRRD_HEAD.replace("raw", "gzip") + "byte skip: 352\ndata file: ../phase/labels/case_1.nii.gz\n",
        DETACHED_MESSAGE,
        {"case_1.nii.gz"},
    ),
}


@pytest.mark.parametrize("kind", sorted(ATTACKS))
def test_reference_to_another_file_is_refused_and_never_opened(tmp_path, kind):
    name, contents, message, opened_without_check = ATTACKS[kind]
    layout = Layout(tmp_path)
    path = layout.sub / name
    path.write_bytes(contents(layout).encode("latin-1"))
    with Opens(layout.labels) as opens:
        with pytest.raises(Unusable, match=message):
            images.read(path, display=name)
        with pytest.raises(Unusable, match=message):
            images.read(path, display=name, max_voxels=10**9)
        with pytest.raises(Unusable, match=message):
            images.probe_shape(path, display=name)
        assert opens.names() == set()  # nothing in the phase folder was opened
        _itk_read(path)  # the same file, read without the check
        assert opens.names() == opened_without_check


def test_the_measured_attack_scores_the_truth_without_the_check(tmp_path):
    """The reproduction from the report: unchecked, SimpleITK returns the ground truth."""
    layout = Layout(tmp_path)
    path = layout.sub / "case_1.mha"
    path.write_text(ATTACKS["mha colon, decoy LOCAL below"][1](layout))
    assert (sitk.GetArrayFromImage(sitk.ReadImage(str(path))) == TRUTH).all()
    with pytest.raises(Unusable, match=LOCAL_MESSAGE):
        images.read(path)


def _nifti_bytes(
    array: np.ndarray,
    order: str = "<",
    magic: bytes = b"n+1\0",
    vox_offset: float = 352.0,
    datatype: int | None = None,
    dim0: int | None = None,
    sizeof_hdr: int = 348,
) -> bytes:
    """A NIfTI-1 file written field by field (no direction: qform and sform codes 0)."""
    codes = {
        np.dtype(np.uint8): 2,
        np.dtype(np.int16): 4,
        np.dtype(np.int32): 8,
        np.dtype(np.float32): 16,
        np.dtype(np.float64): 64,
        np.dtype(np.uint16): 512,
    }
    header = bytearray(348)
    dims = array.shape[::-1]
    struct.pack_into(order + "i", header, 0, sizeof_hdr)
    struct.pack_into(order + "8h", header, 40, len(dims) if dim0 is None else dim0, *dims, *([1] * (7 - len(dims))))
    struct.pack_into(order + "hh", header, 70, codes[array.dtype] if datatype is None else datatype, array.dtype.itemsize * 8)
    struct.pack_into(order + "8f", header, 76, 1, *([1.0] * 7))
    struct.pack_into(order + "f", header, 108, vox_offset)
    header[344:348] = magic
    return bytes(header) + bytes(4) + array.astype(array.dtype.newbyteorder(order)).tobytes()


def test_nifti_header_and_image_pairs_are_refused(tmp_path):
    """Magic 'ni1' and Analyze (no magic) name a .hdr/.img pair. In a .nii the NIfTI library
    reads the file itself (the names decide, nifti_set_type_from_names), so these are refused
    as not single-file NIfTI rather than because ITK follows them; the .img is never opened."""
    for magic, message in ((b"ni1\0", "only single-file NIfTI-1"), (bytes(4), "Analyze")):
        folder = tmp_path / magic.hex()
        folder.mkdir()
        (folder / "case_1.nii").write_bytes(_nifti_bytes(TRUTH, magic=magic))
        (folder / "case_1.img").write_bytes(TRUTH.tobytes())
        (folder / "case_1.hdr").write_bytes(_nifti_bytes(TRUTH, magic=magic)[:348])
        with Opens(folder) as opens:
            with pytest.raises(Unusable, match=message):
                images.read(folder / "case_1.nii")
            with pytest.raises(Unusable, match=message):
                images.probe_shape(folder / "case_1.nii")
            assert opens.names(ignore=("case_1.nii",)) == set()
            _itk_read(folder / "case_1.nii")
            assert opens.names(ignore=("case_1.nii",)) == set()


def test_nii_gz_with_a_nii_of_the_same_name_beside_it_is_refused(tmp_path):
    """nifti_findimgname tries NAME.nii before NAME.nii.gz: the .nii beside would be read."""
    layout = Layout(tmp_path)
    shutil.copy(layout.labels / "case_1.nii.gz", layout.sub / "case_1.nii.gz")
    decoy = np.zeros_like(TRUTH)
    (layout.sub / "case_1.nii").write_bytes(_nifti_bytes(decoy))
    with Opens(layout.sub) as opens:
        with pytest.raises(Unusable, match="would read the file case_1.nii beside it"):
            images.read(layout.sub / "case_1.nii.gz")
        assert opens.names(ignore=("case_1.nii.gz",)) == set()
        _itk_read(layout.sub / "case_1.nii.gz")
        assert opens.names(ignore=("case_1.nii.gz",)) == {"case_1.nii"}
    (layout.sub / "case_1.nii").unlink()
    assert (images.read(layout.sub / "case_1.nii.gz").array == TRUTH).all()


def test_nifti_mixed_case_extension_is_refused(tmp_path):
    """A mixed-case extension is no extension to the NIfTI library, which then looks for
    NAME.nii, NAME.nii.gz, NAME.hdr ... (the grader's suffix matching ignores case)."""
    (tmp_path / "case_1.Nii").write_bytes(_nifti_bytes(TRUTH))
    (tmp_path / "case_1.Nii.nii").write_bytes(_nifti_bytes(np.zeros_like(TRUTH)))
    with Opens(tmp_path) as opens:
        with pytest.raises(Unusable, match="mixed-case extension"):
            images.read(tmp_path / "case_1.Nii")
        assert opens.names(ignore=("case_1.Nii",)) == set()
        _itk_read(tmp_path / "case_1.Nii")
        assert "case_1.Nii.nii" in opens.names()
    (tmp_path / "CASE_2.NII").write_bytes(_nifti_bytes(TRUTH))
    assert (images.read(tmp_path / "CASE_2.NII").array == TRUTH).all()  # all upper case is valid


@pytest.mark.parametrize("content", ["hdf5", "dicom", "nrrd", "mha", "nifti2", "png"])
def test_nii_holding_another_format_is_refused(tmp_path, content):
    """SimpleITK's factory chooses the reader by content: a .nii that is an HDF5 or DICOM file
    is read as one. The NIfTI reader is forced and the NIfTI-1 header checked instead."""
    image = sitk.GetImageFromArray(TRUTH if content not in ("dicom", "png") else TRUTH[0])
    if content == "nifti2":
        header = bytearray(544)
        struct.pack_into("<i8sh", header, 0, 540, b"n+2\0\r\n\x1a\n", 2)
        (tmp_path / "x.nii").write_bytes(bytes(header) + TRUTH.tobytes())
    else:
        sitk.WriteImage(image, str(tmp_path / f"x.{content.replace('dicom', 'dcm')}"))
        shutil.copy(tmp_path / f"x.{content.replace('dicom', 'dcm')}", tmp_path / "x.nii")
    with pytest.raises(Unusable, match="NIfTI"):
        images.read(tmp_path / "x.nii")
    if content in ("hdf5", "dicom"):
        assert sitk.ReadImage(str(tmp_path / "x.nii")).GetSize()[0] == 8  # the factory reads it


def test_png_signature_is_checked(tmp_path):
    sitk.WriteImage(sitk.GetImageFromArray(TRUTH), str(tmp_path / "x.mha"))
    shutil.copy(tmp_path / "x.mha", tmp_path / "x.png")
    with pytest.raises(Unusable, match="not a PNG file"):
        images.read(tmp_path / "x.png")


# --------------------------------------------------------------------------------------------
# What the parses accept and refuse besides references


def _write_mha(path: Path, header: str, pixels: bytes = TRUTH.tobytes()) -> Path:
    path.write_bytes(header.encode("latin-1") + pixels)
    return path


@pytest.mark.parametrize(
    "header, message",
    [
        (META_HEAD + "ElementDataFile = LOCAL\x00\n", "NUL"),
        (META_HEAD.replace("Image", "Imagé") + "ElementDataFile = LOCAL\n", "plain ASCII"),
        (META_HEAD + "Comment = " + "x" * 450 + "\nElementDataFile = LOCAL\n", "longer than 400"),
        (META_HEAD + "elementdatafile = ../x\nElementDataFile = LOCAL\n", "name its data file once"),
        (META_HEAD + "Element Data File = ../x\nElementDataFile = LOCAL\n", "name its data file once"),
        (META_HEAD + "ElementDataFile = LOCAL\nElementDataFile = ../x\n", "name its data file once"),
        (META_HEAD.replace("8 8 6", "8 8 x6") + "ElementDataFile = LOCAL\n", "malformed number in DimSize"),
        (META_HEAD.replace("NDims = 3", "NDims = 3.5") + "ElementDataFile = LOCAL\n", "NDims"),
        (META_HEAD.replace("NDims = 3\n", "") + "ElementDataFile = LOCAL\n", "incomplete"),
        (META_HEAD + "ElementDataFile = LOCAL #\n", LOCAL_MESSAGE),
        (
            META_HEAD.replace("HeaderSize = -1\n", "CompressedData = True\nCompressedDataSize = 100000\n")
            + "ElementDataFile = LOCAL\n",
            "compressed bytes",
        ),
    ],
)
def test_metaimage_headers_the_parse_cannot_be_sure_of_are_refused(tmp_path, header, message):
    with pytest.raises(Unusable, match=message):
        images.read(_write_mha(tmp_path / "a.mha", header))


@pytest.mark.parametrize(
    "header",
    [
        META_HEAD + "ElementDataFile = LOCAL\n",
        META_HEAD + "ElementDataFile = Local   \n",
        META_HEAD + "ElementDataFile\t:\tlocal\n",
        META_HEAD.replace("\n", "\r\n") + "ElementDataFile = LOCAL\r\n",
        "  " + META_HEAD.replace("=", ":").replace("\n", "\n\t") + "ElementDataFile=LOCAL\n",
        META_HEAD.replace("DimSize = 8 8 6", "DimSize = 8\n8\n6") + "ElementDataFile = LOCAL\n",
        META_HEAD + "".join(f"Note{i} = {'n' * 60}\n" for i in range(1100)) + "ElementDataFile = LOCAL\n",
    ],
)
def test_metaimage_headers_metaio_reads_locally_are_accepted(tmp_path, header):
    volume = images.read(_write_mha(tmp_path / "a.mha", header))
    assert (volume.array == TRUTH).all()


def test_metaimage_emulation_follows_met_read():
    parse = itk_formats.parse_metaimage
    # the first ElementDataFile ends the header; ':' separates like '='; keys are case-sensitive
    header = parse(
        b"NDims = 3\nDimSize: 1 2 3\nelementdatafile = a\nElementType = MET_UCHAR\nElementDataFile: b\nElementDataFile = LOCAL\n"
    )
    assert header.complete and header.data_file == b"b"
    assert [r[0] for r in header.records] == [b"NDims", b"DimSize", b"elementdatafile", b"ElementType", b"ElementDataFile"]
    # a key without a separator takes its value from the next '=' or ':', even on a later line
    header = parse(b"NDims = 3\nDimSize = 1 2 3\nElementType = MET_UCHAR\nFoo\nElementDataFile = LOCAL\nElementDataFile = x\n")
    assert header.complete and header.data_file == b"x"
    # numbers of an array are read across line ends; the rest of the line is skipped
    header = parse(b"NDims = 3\nDimSize = 1\n2\n3 ElementDataFile = x\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n")
    assert header.complete and header.data_file == b"LOCAL" and header.values[b"DimSize"] == [1, 2, 3]
    # CR ends a key but not a value: the value runs to the next LF
    header = parse(b"NDims = 3\nDimSize = 1 2 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\rjunk\n")
    assert header.data_file == b"LOCAL\rjunk"
    # arrays before NDims make MET_Read fail; so does a missing required field
    assert not parse(b"DimSize = 1 2 3\nNDims = 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n").complete
    assert not parse(b"NDims = 3\nElementType = MET_UCHAR\nElementDataFile = LOCAL\n").complete
    # a value longer than MetaIO's 499-character buffer is cut there
    header = parse(b"NDims = 3\nDimSize = 1 2 3\nElementType = MET_UCHAR\nElementDataFile = " + b"p" * 600 + b"\n")
    assert header.data_file == b"p" * 499


def test_nrrd_parse_follows_teem():
    parse = itk_formats.parse_nrrd
    header = parse(b"NRRD0004\r\ntype: uint8\rDATAFILE: x\n# c\nk:=v\nbad line\n\nDATA")
    assert header.magic == b"NRRD0004" and header.end == len(b"NRRD0004\r\ntype: uint8\rDATAFILE: x\n# c\nk:=v\nbad line\n\n")
    assert header.lines == [
        ("field", "type", b"uint8"),
        ("field", "data file", b"x"),
        ("comment", None, b"# c"),
        ("keyvalue", None, b"k:=v"),
        ("error", None, b"bad line"),
    ]
    assert parse(b"NRRD0004\ntype: uint8\n").end is None  # no empty line: header runs to EOF
    assert parse(b"NRRD0004\ndata file : x\n\n").lines == [("error", None, b"data file : x")]  # teem rejects it too


@pytest.mark.parametrize(
    "header, message",
    [
        (NRRD_HEAD + "data_file: x\n\n", "detached"),
        (NRRD_HEAD + "datafile:=x\n\n", "detached"),
        (NRRD_HEAD + "type: uint8\n\n", "twice"),
        (NRRD_HEAD + "nonsense\n\n", "not a field"),
        (NRRD_HEAD.replace("raw", "bzip2") + "\n", "encoding"),
        (NRRD_HEAD.replace("raw", "zip") + "\n", "encoding"),
        (NRRD_HEAD + "content: \x00\n\n", "NUL"),
        (NRRD_HEAD, "empty line"),
        (NRRD_HEAD.replace("NRRD0004", "NRRD0009") + "\n", "not a NRRD file"),
        (NRRD_HEAD + "byte skip: -2\n\n", "byte skip"),
        (NRRD_HEAD.replace("8 8 6", "80 80 60") + "\n", "truncated"),
    ],
)
def test_nrrd_headers_teem_would_refuse_or_we_cannot_be_sure_of_are_refused(tmp_path, header, message):
    path = tmp_path / "a.nrrd"
    path.write_bytes(header.encode("latin-1") + TRUTH.tobytes())
    with pytest.raises(Unusable, match=message):
        images.read(path)


def test_nrrd_cr_only_and_gzip_byte_skip_inside_the_file_are_read(tmp_path):
    path = tmp_path / "a.nrrd"
    path.write_bytes((NRRD_HEAD + "\n").replace("\n", "\r").encode() + TRUTH.tobytes())
    assert (images.read(path).array == TRUTH).all()
    payload = gzip.compress(b"s" * 10 + TRUTH.tobytes())
    path.write_bytes((NRRD_HEAD.replace("raw", "gzip") + "byte skip: 10\n\n").encode() + payload)
    assert (images.read(path).array == TRUTH).all()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(vox_offset=float("nan")), "vox_offset"),
        (dict(dim0=9), "dim"),
        (dict(datatype=32), "datatype"),
        (dict(sizeof_hdr=1000), "header size"),
        (dict(magic=b"n+2\0"), "only single-file NIfTI-1"),
        (dict(vox_offset=100000.0), "truncated"),
    ],
)
def test_nifti_headers_out_of_bounds_are_refused(tmp_path, change, message):
    (tmp_path / "a.nii").write_bytes(_nifti_bytes(TRUTH, **change))
    with pytest.raises(Unusable, match=message):
        images.read(tmp_path / "a.nii")


def test_nifti_gz_that_is_not_gzip_is_refused(tmp_path):
    (tmp_path / "a.nii.gz").write_bytes(_nifti_bytes(TRUTH))
    with pytest.raises(Unusable, match="not a gzip-compressed NIfTI"):
        images.read(tmp_path / "a.nii.gz")


def test_big_nifti_gz_header_is_read_through_a_bounded_gzip_read(tmp_path):
    big = np.zeros((300, 300, 300), np.uint8)  # 27 MB inflated, a few KB on disk
    (tmp_path / "a.nii.gz").write_bytes(gzip.compress(_nifti_bytes(big)))
    header = itk_formats.check(tmp_path / "a.nii.gz")
    assert header.fields["nbytes"] == big.size and header.encoding == "deflate"
    assert images.probe_shape(tmp_path / "a.nii.gz") == big.shape
    with pytest.raises(Unusable, match="more voxels"):
        images.read(tmp_path / "a.nii.gz", max_voxels=1000)


# --------------------------------------------------------------------------------------------
# Sizes are known and bounded before pixels are decoded


def test_sizes_are_bounded_before_decoding(tmp_path):
    huge = META_HEAD.replace("8 8 6", "100000 100000 100000") + "ElementDataFile = LOCAL\n"
    with pytest.raises(Unusable, match="truncated"):
        images.read(_write_mha(tmp_path / "a.mha", huge))
    compressed = huge.replace("HeaderSize = -1", "CompressedData = True")
    with pytest.raises(Unusable, match="compressed bytes can hold"):
        images.read(_write_mha(tmp_path / "b.mha", compressed, pixels=b"x" * 100))
    path = tmp_path / "c.nrrd"
    path.write_bytes(
        (NRRD_HEAD.replace("raw", "gzip").replace("8 8 6", "100000 100000 100000") + "\n").encode() + gzip.compress(b"")
    )
    with pytest.raises(Unusable, match="compressed bytes can hold"):
        images.read(path)
    path = tmp_path / "d.nii"
    path.write_bytes(_nifti_bytes(TRUTH)[:-1])
    with pytest.raises(Unusable, match="truncated"):
        images.read(path)
    info = itk_formats.info(_write_mha(tmp_path / "e.mha", META_HEAD + "ElementDataFile = LOCAL\n"))
    assert (info.shape, info.dtype, info.components, info.voxels, info.nbytes) == ((6, 8, 8), np.uint8, 1, 384, 384)


def test_max_voxels_refuses_from_the_header(tmp_path, monkeypatch):
    path = tmp_path / "a.nii.gz"
    sitk.WriteImage(sitk.GetImageFromArray(TRUTH), str(path))
    executed = []
    monkeypatch.setattr(sitk.ImageFileReader, "Execute", lambda self: executed.append(1))
    with pytest.raises(Unusable, match=r"has shape \(6, 8, 8\), more voxels than the 383"):
        images.read(path, max_voxels=383)
    with pytest.raises(Unusable, match="more voxels"):
        itk_formats.read(path, max_voxels=383)
    assert executed == []


def test_multi_component_pixels_are_refused_before_decoding(tmp_path):
    rgb = sitk.GetImageFromArray(np.zeros((4, 5, 3), np.uint8), isVector=True)
    sitk.WriteImage(rgb, str(tmp_path / "a.png"))
    assert itk_formats.info(tmp_path / "a.png").components == 3
    with pytest.raises(Unusable, match="3 components per pixel"):
        images.read(tmp_path / "a.png")


def test_organizer_files_raise_phase_errors(tmp_path):
    layout = Layout(tmp_path)
    path = layout.sub / "truth.mha"
    path.write_text(META_HEAD + "ElementDataFile = ../phase/labels/case_1.mha\n")
    with pytest.raises(PhaseError, match="ElementDataFile = LOCAL"), organizer_file():
        itk_formats.info(path, "truth.mha")
    from evaluation.suites.annotators.inputs import annotation_voxels

    with Opens(layout.labels) as opens:
        assert annotation_voxels(str(path)) == path.stat().st_size * 4  # the estimate's fallback
        assert opens.names() == set()
    assert annotation_voxels(str(layout.labels / "case_1.mha")) == TRUTH.size


def test_symlinks_and_bad_names_are_refused(tmp_path):
    layout = Layout(tmp_path)
    (layout.sub / "a.mha").symlink_to(layout.labels / "case_1.mha")
    with pytest.raises(Unusable, match="symbolic link"):
        itk_formats.check(layout.sub / "a.mha")
    with pytest.raises(Unusable, match="UTF-8"):
        itk_formats.check(layout.sub / "b\udcff.mha")


# --------------------------------------------------------------------------------------------
# Files SimpleITK writes read exactly as before


def _before(path: Path) -> images.Volume:
    """What images._read_sitk returned before the change: sitk.ReadImage, geometry reversed."""
    image = sitk.ReadImage(str(path))
    dimension = image.GetDimension()
    direction = np.asarray(image.GetDirection()).reshape(dimension, dimension)[::-1, ::-1]
    return images.Volume(
        sitk.GetArrayFromImage(image), tuple(image.GetSpacing())[::-1], tuple(image.GetOrigin())[::-1], tuple(direction.ravel())
    )


def _same(got: images.Volume, expected: images.Volume) -> None:
    assert got.array.dtype == expected.array.dtype and got.array.dtype.isnative
    assert got.array.shape == expected.array.shape and (got.array == expected.array).all()
    assert (got.spacing, got.origin, got.direction) == (expected.spacing, expected.origin, expected.direction)


LEGIT = [
    (suffix, dtype, ndim, compress)
    for suffix in (".mha", ".nrrd", ".nii", ".nii.gz")
    for dtype in (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.float32, np.float64)
    for ndim in (2, 3)
    for compress in (False, True)
    if not (suffix.startswith(".nii") and compress)
]
LEGIT += [(".png", dtype, 2, False) for dtype in (np.uint8, np.uint16)]


@pytest.mark.parametrize("suffix, dtype, ndim, compress", LEGIT)
def test_files_written_by_simpleitk_read_as_before(tmp_path, suffix, dtype, ndim, compress):
    rng = np.random.default_rng(ndim)
    shape = (5, 7, 9)[-ndim:]
    array = (rng.integers(0, 100, shape) - (50 if np.dtype(dtype).kind in "if" else 0)).astype(dtype)
    image = sitk.GetImageFromArray(array)
    if suffix != ".png":
        image.SetSpacing((0.5, 0.75, 2.0)[:ndim])
        image.SetOrigin((1.0, -2.0, 3.5)[:ndim])
        image.SetDirection(tuple(np.eye(ndim)[::-1].ravel()) if ndim == 2 else (0, 1, 0, 1, 0, 0, 0, 0, -1))
    path = tmp_path / f"a{suffix}"
    sitk.WriteImage(image, str(path), useCompression=compress)
    got = images.read(path)
    _same(got, _before(path))
    assert (got.array == array).all()
    assert images.probe_shape(path) == array.shape
    assert images.read(path, max_voxels=array.size).array.shape == array.shape


def _byteswapped_metaimage(tmp_path, flag: bytes, new: bytes, dtype=np.int32) -> Path:
    array = (np.arange(6 * 8 * 8) * 1000 - 70000).astype(dtype).reshape(6, 8, 8)
    sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / "le.mha"))
    data = (tmp_path / "le.mha").read_bytes()
    header = data[: -array.nbytes]
    assert flag in header
    path = tmp_path / "be.mha"
    path.write_bytes(header.replace(flag, new) + array.astype(array.dtype.newbyteorder(">")).tobytes())
    return path, array


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.float32, np.float64])
def test_big_endian_files_come_back_as_native_arrays(tmp_path, dtype):
    path, array = _byteswapped_metaimage(tmp_path, b"BinaryDataByteOrderMSB = False", b"BinaryDataByteOrderMSB = True", dtype)
    got = images.read(path)
    assert got.array.dtype == np.dtype(dtype) and got.array.dtype.isnative and (got.array == array).all()
    sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / "le.nrrd"))
    data = (tmp_path / "le.nrrd").read_bytes()
    header = data[: -array.nbytes].replace(b"endian: little", b"endian: big")
    (tmp_path / "be.nrrd").write_bytes(header + array.astype(array.dtype.newbyteorder(">")).tobytes())
    got = images.read(tmp_path / "be.nrrd")
    assert got.array.dtype.isnative and (got.array == array).all()
    (tmp_path / "be.nii").write_bytes(_nifti_bytes(array, order=">"))
    (tmp_path / "le.nii").write_bytes(_nifti_bytes(array, order="<"))
    for name in ("be.nii", "le.nii"):
        got = images.read(tmp_path / name)
        assert got.array.dtype.isnative and (got.array == array).all(), name
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "be.nii.gz").write_bytes(gzip.compress(_nifti_bytes(array, order=">")))
    assert (images.read(tmp_path / "gz" / "be.nii.gz").array == array).all()


# --------------------------------------------------------------------------------------------
# Fuzz targets: headers from the formats' grammars, against the real library


def _fuzz_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    decoys, sub = root / "decoys", root / "sub"
    decoys.mkdir(), sub.mkdir()
    (decoys / "d.raw").write_bytes(bytes(range(256)) * 16)
    for z in range(6):
        (decoys / f"d_{z}.raw").write_bytes(bytes(64))
    (decoys / "d.raw.gz").write_bytes(gzip.compress(bytes(384)))
    return root, decoys, sub


def _decoy_values(decoys: Path) -> list[str]:
    return [
        "../decoys/d.raw",
        str(decoys / "d.raw"),
        "../decoys/d",
        "LIST",
        "LIST 2",
        "../decoys/d_%d.raw 0 5 1",
        str(decoys / "d_%d.raw"),
        "../decoys",
        "",
    ]


def _mostly(usual, *others, weight: int = 4):
    """``usual`` most of the time, else one of ``others``: the grammar stays close to files the
    library reads (so that it reads some, and follows some references) while exploring."""
    return st.sampled_from([usual] * weight + list(others))


_EOL = _mostly("\n", "\r\n", "\r")


@st.composite
def _metaimage_files(draw, decoys: Path):
    style = [draw(_mostly(" = ", "=", ": ", ":", " := ")), draw(_mostly("\n", "\r\n")), draw(_mostly("", " "))]

    def line(key, value):  # the file's style, with a rare odd separator, line end or indent
        sep, eol, indent = style
        if draw(st.integers(0, 9)) == 0:
            sep = draw(st.sampled_from([" = ", "=", ": ", ":", " := ", " =: ", "\t=\t", " == ", "", " ", "\n= "]))
        if draw(st.integers(0, 9)) == 0:
            eol = draw(st.sampled_from(["\n", "\r\n", "\r", "\n\n"]))
        if draw(st.integers(0, 9)) == 0:
            indent = draw(st.sampled_from(["", " ", "  ", "\t", "\n", "\v"]))
        return indent + key + sep + value + eol

    dims = draw(_mostly("8 8 6", "8\n8 6", "8 8\n6", "8  8\t6", "8 8", "8 8 6 1", "8 8 x", weight=12))
    lines = [
        ("ObjectType", "Image"),
        ("NDims", draw(_mostly("3", "2", "3.0", "0", weight=12))),
        ("DimSize", dims),
        ("ElementType", draw(_mostly("MET_UCHAR", "MET_UCHAR_ARRAY", "MET_FLOAT", weight=12))),
    ]
    extras = [
        ("HeaderSize", draw(_mostly("-1", "0", "10"))),
        ("BinaryData", "True"),
        ("CompressedData", "False"),
        ("ElementSpacing", "1 1 1"),
        ("Offset", "0 0 0"),
        ("TransformMatrix", "1 0 0 0 1 0 0 0 1"),
        ("Comment", "c" * draw(st.sampled_from([1, 100, 600]))),
        ("Unknown", "u"),
        ("Pad", "".join(f"\nNote{i} = {'n' * 60}" for i in range(draw(_mostly(10, 1, 1100))))),
    ]
    lines += draw(st.lists(st.sampled_from(extras), max_size=4))
    if draw(st.integers(0, 9)) == 0:
        lines = draw(st.permutations(lines))
    keys = [
        "ElementDataFile",
        "elementdatafile",
        "ElementDataFile ",
        " ElementDataFile",
        "Element DataFile",
        "ELEMENTDATAFILE",
        "ElementDataFileName",
        "\tElementDataFile",
        "ElementDataFile\n",
    ]
    decoy_values = _decoy_values(decoys)
    values = ["LOCAL", "Local", "local", "LOCAL ", "LOCAL\t", "lOCAL", "LOCAL x"] + decoy_values
    for _ in range(draw(_mostly(0, 1, 2))):  # decoy keys anywhere
        lines.insert(draw(st.integers(0, len(lines))), (draw(st.sampled_from(keys)), draw(st.sampled_from(values))))
    lines.append(
        (draw(_mostly("ElementDataFile", *keys, weight=30)), draw(st.sampled_from(["LOCAL"] * 8 + decoy_values[:2] * 4 + values)))
    )
    if draw(st.integers(0, 5)) == 0:  # a decoy line right below the header
        lines.append((draw(st.sampled_from(keys)), draw(st.sampled_from(values))))
    text = "".join(line(key, value) for key, value in lines)
    if draw(st.integers(0, 3)) == 0:
        text += "".join(f"../decoys/d_{z}.raw{style[1]}" for z in range(6))
    return text.encode("latin-1") + bytes(draw(_mostly(384, 0, 4096)))


@st.composite
def _nrrd_files(draw, decoys: Path):
    odd = lambda: draw(st.integers(0, 9)) == 0  # noqa: E731 - a rare deviation from the file's style
    magic = draw(_mostly("NRRD0004", "NRRD0005", "NRRD0001", "NRRD00.01", "NRRD0009", "nrrd0004", weight=20))
    encoding = draw(_mostly("raw", "gzip", "gz", "ascii", "RAW", "bzip2", "raw ", weight=8))
    fields = [
        ("type", "uint8"),
        ("dimension", "3"),
        ("sizes", draw(_mostly("8 8 6", "8 8", "8 8 6 1", weight=20))),
        ("encoding", encoding),
    ]
    fields += draw(
        st.lists(
            st.sampled_from(
                [
                    ("endian", "little"),
                    ("byte skip", "-1"),
                    ("byteskip", "0"),
                    ("line skip", "0"),
                    ("space origin", "(0,0,0)"),
                    ("content", "x: y"),
                    ("type", "uint8"),
                ]
            ),
            max_size=2,
        )
    )
    keys = ["data file", "datafile", "DATA FILE", "Data File", "DataFile", "data_file", " data file", "data file ", "data-file"]
    values = _decoy_values(decoys)
    for _ in range(draw(_mostly(1, 0, 2, weight=2))):
        position = len(fields) if draw(st.booleans()) else draw(st.integers(0, len(fields)))
        fields.insert(position, (draw(_mostly("data file", *keys, weight=6)), draw(st.sampled_from(values))))
    separator, eol = draw(_mostly(": ", ":  ", ": \t")), draw(_EOL)
    lines = []
    for key, value in fields:
        lines.append(key + (draw(st.sampled_from([":", " : ", ":=", ": "])) if odd() else separator) + value)
        if odd():
            lines.append(draw(st.sampled_from(["# comment", "key:=value", "\n".join(["#" + "c" * 69] * 1000), "", "junk"])))
    text = eol.join([magic] + lines) + eol
    if any(value.startswith("LIST") for _, value in fields) and draw(st.booleans()):
        text += eol.join(f"../decoys/d_{z}.raw" for z in range(6)) + eol
    if draw(_mostly(True, False)):
        text += eol
    pixels = gzip.compress(bytes(384)) if encoding.startswith("gz") else bytes(draw(_mostly(384, 0, 1000)))
    return text.encode("latin-1") + pixels


def _accepted(path: Path) -> bool:
    try:
        itk_formats.info(path)
    except Unusable:
        return False
    return True


def _check_property(path: Path, decoys: Path, predicted_safe: bool | None) -> None:
    """The check accepts only files SimpleITK reads without opening another file; and where the
    emulated parse is certain that the header keeps its data local, SimpleITK opens nothing."""
    with Opens(decoys, path.parent) as opens:
        accepted = _accepted(path)
        assert opens.names(ignore=(path.name,)) == set(), "the check itself opened another file"
        status = _itk_read(path)
        opened = opens.names(ignore=(path.name,))
    event(f"accepted={accepted} opened_other={bool(opened)} parse_says_local={predicted_safe} itk_ok={status == 0}")
    assert not (accepted and opened), f"accepted, but SimpleITK opened {opened}"
    if predicted_safe:
        assert not opened, f"the parse said local, but SimpleITK opened {opened}"


def _metaimage_predicts_local(data: bytes) -> bool | None:
    try:
        header = itk_formats.parse_metaimage(data)
    except itk_formats._Doubt:
        return None
    return not header.complete or header.data_file in [n.encode() for n in itk_formats.LOCAL_NAMES]


def _nrrd_predicts_local(data: bytes) -> bool | None:
    try:
        header = itk_formats.parse_nrrd(data)
    except itk_formats._Doubt:
        return None
    if header.magic not in itk_formats._NRRD_MAGICS:
        return True
    return not any(kind == "field" and name == "data file" for kind, name, _ in header.lines)


@FUZZ
@given(st.data())
def test_fuzz_metaimage_headers(tmp_path_factory, data):
    root, decoys, sub = _fuzz_folders(tmp_path_factory)
    content = data.draw(_metaimage_files(decoys))
    path = sub / "case.mha"
    path.write_bytes(content)
    _check_property(path, decoys, _metaimage_predicts_local(content))


@FUZZ
@given(st.data())
def test_fuzz_nrrd_headers(tmp_path_factory, data):
    root, decoys, sub = _fuzz_folders(tmp_path_factory)
    content = data.draw(_nrrd_files(decoys))
    path = sub / "case.nrrd"
    path.write_bytes(content)
    _check_property(path, decoys, _nrrd_predicts_local(content))


@FUZZ
@given(
    st.sampled_from(["<", ">"]),
    _mostly(b"n+1\0", b"ni1\0", b"n+2\0", b"n+9\0", bytes(4), b"n+1 ", b"xyzw", weight=7),
    _mostly(352.0, 348.0, 0.0, -1.0, 400.0, 1e10, float("nan"), weight=7),
    _mostly(3, 0, 8, -1, weight=6),
    _mostly(348, 540, 0, weight=6),
    _mostly("case.nii", "case.nii.gz", "CASE.NII", "case.Nii", "case.NII.gz", "CASE.NII.GZ", weight=2),
    st.sets(
        st.sampled_from(
            [
                "case.img",
                "case.hdr",
                "case.nii",
                "CASE.NII",
                "case.Nii.nii",
                "case.nii.gz.nii",
                "case.img.gz",
                "case.NII.gz.nii",
                "CASE.NII.GZ.nii",
            ]
        )
    ),
)
def test_fuzz_nifti_headers(tmp_path_factory, order, magic, vox_offset, dim0, sizeof_hdr, name, siblings):
    root, decoys, sub = _fuzz_folders(tmp_path_factory)
    content = _nifti_bytes(TRUTH, order=order, magic=magic, vox_offset=vox_offset, dim0=dim0, sizeof_hdr=sizeof_hdr)
    for sibling in siblings - {name}:
        (sub / sibling).write_bytes(_nifti_bytes(TRUTH, order=order))
    path = sub / name
    path.write_bytes(gzip.compress(content) if name.lower().endswith(".gz") else content)
    _check_property(path, decoys, None)


def _valid_files(folder: Path) -> dict[str, bytes]:
    seeds = {}
    image3, image2 = sitk.GetImageFromArray(TRUTH), sitk.GetImageFromArray(TRUTH[0].astype(np.uint16) * 300)
    for name, image, compress in (
        ("a.mha", image3, False),
        ("b.mha", image3, True),
        ("a.nrrd", image3, False),
        ("b.nrrd", image3, True),
        ("a.nii", image3, False),
        ("a.nii.gz", image3, False),
        ("a.png", image2, False),
    ):
        sitk.WriteImage(image, str(folder / name), useCompression=compress)
        seeds[name] = (folder / name).read_bytes()
    return seeds


def _read_task(payload: dict) -> dict:
    try:
        volume = images.read(Path(payload["path"]), max_voxels=payload.get("max_voxels"))
    except Unusable as exc:
        return {"refused": str(exc)}
    return {"shape": list(volume.array.shape)}


@pytest.mark.slow
@FUZZ
@given(st.data())
def test_fuzz_mutated_valid_files_read_or_refuse(tmp_path_factory, data):
    """Bytes of valid files changed at random: the reader returns an image or raises a
    SubmissionError, nothing else (workers are forked: a crash fails its task)."""
    folder = tmp_path_factory.mktemp("mutants")
    tasks = []
    for name, seed in sorted(_valid_files(folder).items()):
        mutant = bytearray(seed)
        header_end = min(len(mutant), 400)
        for _ in range(data.draw(st.integers(1, 6))):
            position = data.draw(st.integers(0, header_end - 1) if data.draw(st.booleans()) else st.integers(0, len(mutant) - 1))
            mutant[position] = data.draw(st.sampled_from([0, 10, 13, 32, 58, 61, 0xFF, data.draw(st.integers(0, 255))]))
        if data.draw(st.integers(0, 3)) == 0:
            mutant = mutant[: data.draw(st.integers(0, len(mutant)))]
        (folder / f"m_{name}").mkdir()
        path = folder / f"m_{name}" / name  # alone: a.nii beside a.nii.gz would be refused
        path.write_bytes(bytes(mutant))
        tasks.append(Task(name, {"path": str(path), "max_voxels": 10**7}))
    outcomes = runner.run(tasks, _read_task, contract.Resources(workers=2, memory_bytes=1 << 30, time_limit=60))
    for name, outcome in outcomes.items():
        assert outcome.ok, f"{name}: {outcome.kind}: {outcome.message}"
        event("refused" if "refused" in (outcome.value or {}) else "read")
