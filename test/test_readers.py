"""Readers: real files of every supported format, geometry, and refusal of files that would
make the grader read something else (external data, links, pickles)."""

import h5py
import numpy as np
import pytest
import SimpleITK as sitk
import tifffile
import zarr

from evaluation.errors import SubmissionError, Unusable
from evaluation.readers import images
from evaluation.submission import Submission

LABELS = np.arange(24, dtype=np.uint16).reshape(2, 3, 4)


def _mha(path, array=LABELS, spacing=(0.5, 0.6, 2.0), origin=(1.0, 2.0, 3.0)):
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    sitk.WriteImage(image, str(path))
    return path


@pytest.mark.parametrize("name", ["a.mha", "a.nii.gz", "a.nrrd"])
def test_itk_formats_report_geometry_in_array_order(tmp_path, name):
    volume = images.read(_mha(tmp_path / name))
    assert (volume.array == LABELS).all()
    assert volume.spacing == pytest.approx((2.0, 0.6, 0.5))
    assert volume.origin == pytest.approx((3.0, 2.0, 1.0))
    assert volume.direction == pytest.approx(tuple(np.eye(3).ravel()))


def test_tiff_npy_hdf5_and_zarr(tmp_path):
    tifffile.imwrite(tmp_path / "a.tif", LABELS)
    np.save(tmp_path / "a.npy", LABELS)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["volumes/labels"] = LABELS
    group = zarr.open_group(str(tmp_path / "a.zarr"), mode="w", zarr_format=2)
    group.create_array("labels", shape=LABELS.shape, dtype=LABELS.dtype)[...] = LABELS
    for name in ("a.tif", "a.npy", "a.h5", "a.zarr"):
        assert (images.read(tmp_path / name).array == LABELS).all(), name


def test_metaimage_with_external_data_is_refused(tmp_path):
    header = "ObjectType = Image\nNDims = 3\nDimSize = 4 3 2\nElementType = MET_USHORT\nElementDataFile = /etc/secret.raw\n"
    (tmp_path / "a.mha").write_text(header)
    with pytest.raises(Unusable, match="ElementDataFile = LOCAL"):
        images.read(tmp_path / "a.mha")


def test_pickled_numpy_is_never_loaded(tmp_path):
    np.save(tmp_path / "a.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(Unusable, match="pickled"):
        images.read(tmp_path / "a.npy")


def test_hdf5_links_and_ambiguity_are_refused(tmp_path):
    with h5py.File(tmp_path / "secret.h5", "w") as f:
        f["truth"] = LABELS
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["pred"] = h5py.ExternalLink(str(tmp_path / "secret.h5"), "truth")
    with pytest.raises(Unusable, match="link"):
        images.read(tmp_path / "a.h5", key="pred")
    with h5py.File(tmp_path / "two.h5", "w") as f:
        f["a"], f["b"] = LABELS, LABELS
    with pytest.raises(Unusable, match="2 datasets"):
        images.read(tmp_path / "two.h5")
    assert (images.read(tmp_path / "two.h5", key="b").array == LABELS).all()


def test_truncated_file_is_a_submission_error(tmp_path):
    path = _mha(tmp_path / "a.mha", np.zeros((40, 40, 40), np.uint8))
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(Unusable, match="a.mha"):
        images.read(path)


def test_geometry_mismatches_are_named():
    truth = images.Volume(LABELS, spacing=(2.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), direction=tuple(np.eye(3).ravel()))
    images.check_geometry(images.Volume(LABELS.copy(), (2.0, 1.0, 1.0)), truth, "case1")  # unknown origin: not compared
    with pytest.raises(Unusable, match="shape"):
        images.check_geometry(images.Volume(LABELS[:1]), truth, "case1")
    with pytest.raises(Unusable, match="spacing"):
        images.check_geometry(images.Volume(LABELS, spacing=(1.0, 1.0, 1.0)), truth, "case1")
    with pytest.raises(Unusable, match="origin"):
        images.check_geometry(images.Volume(LABELS, origin=(0.0, 0.0, 5.0)), truth, "case1")
    flipped = tuple(np.diag([1.0, -1.0, 1.0]).ravel())
    with pytest.raises(Unusable, match="direction"):
        images.check_geometry(images.Volume(LABELS, direction=flipped), truth, "case1")


def test_case_files_by_stem_and_duplicates(tmp_path):
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "case_1.npy", LABELS)
    _mha(tmp_path / "sub" / "case_2.nii.gz")
    (tmp_path / "metadata").write_text("written by the platform")
    assert sorted(Submission(tmp_path).case_files()) == ["case_1", "case_2"]
    tifffile.imwrite(tmp_path / "sub" / "case_1.tif", LABELS)
    with pytest.raises(SubmissionError, match="appears twice"):
        Submission(tmp_path).case_files()


def test_shape_is_probed_before_loading(tmp_path):
    """A file larger than the image it predicts is refused from its header alone."""
    big = np.zeros((40, 50, 60), np.uint8)
    itk = sitk.GetImageFromArray(big)
    sitk.WriteImage(itk, str(tmp_path / "a.mha"))
    np.save(tmp_path / "a.npy", big)
    tifffile.imwrite(tmp_path / "a.tif", big, photometric="minisblack")
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["x"] = big
    for name in ("a.mha", "a.npy", "a.tif", "a.h5"):
        assert images.probe_shape(tmp_path / name) == (40, 50, 60), name
        with pytest.raises(Unusable, match=r"has shape \(40, 50, 60\), more voxels"):
            images.read(tmp_path / name, max_voxels=1000)
        assert images.read(tmp_path / name, max_voxels=big.size).array.shape == big.shape


def test_truncated_tiff_is_refused_not_read_as_blank(tmp_path):
    """tifffile fills missing pages of a truncated file with zeros; the reader refuses it."""
    tifffile.imwrite(tmp_path / "a.tif", LABELS, photometric="minisblack")
    data = (tmp_path / "a.tif").read_bytes()
    (tmp_path / "a.tif").write_bytes(data[: len(data) - 150])
    with pytest.raises(Unusable, match="a.tif"):
        images.read(tmp_path / "a.tif")


def test_every_format_is_one_registry_entry(tmp_path):
    """One ``Format`` per reader, each suffix once; the suffixes every caller lists (and the
    order messages name them in) are the registry's; every format probes, reads and (where
    it can) opens the same array."""
    from evaluation.readers import formats, itk_formats, label_stacks

    assert len(formats.SUFFIXES) == len(set(formats.SUFFIXES))
    assert (
        images.SUFFIXES
        == formats.SUFFIXES
        == (".mha", ".nii", ".nii.gz", ".nrrd", ".png", ".tif", ".tiff", ".h5", ".hdf5", ".hdf", ".npy", ".zarr")
    )
    assert set(itk_formats.SUFFIXES) <= set(formats.SUFFIXES)
    assert all(formats.find(tmp_path / f"x{s}").open is not None for s in label_stacks.SUFFIXES)
    assert formats.find(tmp_path / "x.NII.GZ").name.startswith("SimpleITK") and formats.find(tmp_path / "x.txt") is None
    with pytest.raises(Unusable, match=r"unsupported file type '\.txt'; use one of \.mha, \.nii"):
        formats.of(tmp_path / "x.txt", "x.txt")
    paths = [_mha(tmp_path / "a.mha"), tmp_path / "a.tif", tmp_path / "a.npy", tmp_path / "a.h5", tmp_path / "a.zarr"]
    tifffile.imwrite(paths[1], LABELS)
    np.save(paths[2], LABELS)
    with h5py.File(paths[3], "w") as f:
        f["labels"] = LABELS
    zarr.open_array(str(paths[4]), mode="w", shape=LABELS.shape, dtype=LABELS.dtype, zarr_format=3)[...] = LABELS
    for path in paths:
        found = formats.find(path)
        assert found.probe(path, None, path.name) == LABELS.shape, path.name
        assert (found.read(path, None, path.name).array == LABELS).all(), path.name
        if found.open is not None:
            with found.open(path, path.name) as array:
                assert array.shape == LABELS.shape and array.ndim == 3 and len(array) == 2
                assert (array.read() == LABELS).all() and (array[1, 1:3] == LABELS[1, 1:3]).all(), path.name


@pytest.mark.parametrize("fortran", [False, True])
def test_npy_regions_come_from_positioned_reads(tmp_path, fortran):
    from evaluation.readers import npy

    data = np.arange(5 * 6 * 7, dtype=">i4").reshape(5, 6, 7)
    np.save(tmp_path / "a.npy", np.asfortranarray(data) if fortran else data)
    with npy.NpyArray(tmp_path / "a.npy", "a.npy") as array:
        assert array.dtype == np.dtype(">i4") and array.stored(...)
        for region in [..., (slice(1, 4),), (2,), (slice(0, 5), 3, slice(2, 6)), (4, 5, 6)]:
            got = array.read(region)
            assert np.array_equal(got, data[region]) and got.dtype.isnative, region
