"""Slab readers and the TomoChallenge intake (packed or plain, binarised, windowed)."""

import numpy as np
import pytest
from helpers.tomo import write_volume

from evaluation.errors import PhaseError, Unusable, organizer_file
from evaluation.readers.slabs import map_slabs, open_slabs, slab_bounds
from evaluation.readers.tomo_volumes import Window, binarize, open_binary

VOLUME = np.arange(5 * 6 * 4, dtype=np.uint16).reshape(5, 6, 4)


@pytest.mark.parametrize("suffix", [".npy", ".h5", ".zarr", ".tif", ".mha"])
def test_slabs_read_like_the_whole_volume(suffix, tmp_path):
    path = write_volume(tmp_path / f"v{suffix}", VOLUME)
    with open_slabs(path) as slabs:
        assert slabs.shape == VOLUME.shape
        for z0, z1 in ((0, 5), (1, 3), (4, 5), (2, 2)):
            assert np.array_equal(slabs.read(z0, z1), VOLUME[z0:z1])


def test_fortran_order_npy(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(VOLUME))
    with open_slabs(tmp_path / "f.npy") as slabs:
        assert np.array_equal(slabs.read(1, 4), VOLUME[1:4])


def test_truncated_and_pickled_npy_are_refused(tmp_path):
    np.save(tmp_path / "t.npy", VOLUME)
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-10])
    with pytest.raises(Unusable, match="shorter than its header"):
        open_slabs(tmp_path / "t.npy")
    np.save(tmp_path / "o.npy", np.array([None, 1], dtype=object), allow_pickle=True)
    with pytest.raises(Unusable, match="holds object values"):
        open_slabs(tmp_path / "o.npy")
    with pytest.raises(PhaseError), organizer_file():  # the organiser's files fail as phase errors
        open_slabs(tmp_path / "o.npy")


def test_binarize_is_greater_than_one_half():
    assert binarize(np.array([-1, 0, 1, 2], np.int8)).tolist() == [0, 0, 1, 1]
    assert binarize(np.array([0, 255], np.uint8)).tolist() == [0, 1]
    assert binarize(np.array([0.5, 0.50001, np.nan, -np.inf, np.inf], np.float32)).tolist() == [0, 1, 0, 0, 1]
    assert binarize(np.array([True, False])).tolist() == [1, 0]


def test_open_binary_packed_plain_and_window(tmp_path):
    rng = np.random.default_rng(0)
    truth = rng.random((6, 4, 8)) > 0.5
    packed = write_volume(tmp_path / "p.packed.h5", truth)
    volume = open_binary(packed, (6, 4, 8), "p.h5")
    assert volume.packed and volume.description == "conformance case"
    assert np.array_equal(volume.slab(1, 6), truth[1:6])
    stack = np.zeros((10, 4, 8), np.float32)
    stack[3:9] = truth
    plain = write_volume(tmp_path / "s.npy", stack)
    windowed = open_binary(plain, (6, 4, 8), "s.npy", Window(3, 9, 10))
    assert not windowed.packed and np.array_equal(windowed.slab(0, 6), truth)
    with pytest.raises(Unusable, match=r"s.npy: has shape \(10, 4, 8\); expected \(6, 4, 8\) or \(3, 2, 4\)"):
        open_binary(plain, (6, 4, 8), "s.npy")


def test_slab_bounds_and_map():
    assert slab_bounds(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert slab_bounds(7, 3, align=2) == [(0, 4), (4, 7)]
    assert map_slabs(lambda a, b: b - a, slab_bounds(10, 3), threads=2) == [3, 3, 3, 1]
