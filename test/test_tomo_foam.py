"""tomo_foam pieces against independently known values: the kit's reference label volumes
and hashes, the packing golden, a brute-force voxeliser, hand-computed counts and scores."""

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest
from helpers.grading import ROOT, run_cli, validate_metrics
from helpers.tomo import EXPECTED, PHANTOMS, TOMO, case, foam_phase, geometry, write_spheres, write_volume

from evaluation.metrics.means import harmonic_mean
from evaluation.readers import bitpack
from evaluation.suites.tomo_foam.phantom import Grid, Rasterizer, Spheres, axis_centres, expanded, material_volume, void_labels
from evaluation.suites.tomo_foam.scores import FoamCounts, foam_boundary, foam_scores, slab_counts
from evaluation.suites.tomo_foam.scoring import count_phantom
from evaluation.suites.tomo_foam.truth import Expansion

# --------------------------------------------------------------------------------------------
# Ground truth


@pytest.mark.parametrize("name", PHANTOMS)
def test_rasterised_truth_is_the_reference_volume(name):
    data = case(name)
    labels = Rasterizer(Spheres.from_records(data["spheres"]), Grid(**geometry(name))).slab(0, geometry(name)["nz"])
    assert labels.dtype == np.uint8
    assert np.array_equal(labels, data["gt"])
    assert hashlib.sha256(labels.tobytes()).hexdigest() == EXPECTED["phantoms"][name]["gt_ref_sha256"]
    counts = {str(k): int(v) for k, v in enumerate(np.bincount(labels.ravel())) if v}
    assert counts == EXPECTED["phantoms"][name]["gt_ref_label_counts"]


def test_slabs_of_the_truth_tile_the_volume():
    name = "foamB_zoom"
    raster = Rasterizer(Spheres.from_records(case(name)["spheres"]), Grid(**geometry(name)))
    pieces = [raster.slab(z0, z1) for z0, z1 in ((0, 7), (7, 8), (8, 40))]
    assert np.array_equal(np.concatenate(pieces), case(name)["gt"])


def test_void_classes_compare_in_float32():
    # 0.1 and 0.025 are not float32 numbers: the reference compares float32 radii with the
    # float32 thresholds, so float32(0.1) itself is large and the float32 just below is not.
    r = np.array(
        [
            np.float32(0.1),
            np.nextafter(np.float32(0.1), np.float32(0)),
            np.float32(0.025),
            np.nextafter(np.float32(0.025), np.float32(0)),
            0.2,
            0.006,
        ],
        dtype=np.float32,
    )
    assert void_labels(r).tolist() == [2, 3, 3, 4, 2, 4]


def test_axis_centres_follow_genvol_rounding():
    # genvol: c + (i + 0.5)·vs − n·vs/2 + 0 − vs/2 + vs/2, evaluated left to right in double
    # with vs, n·vs and vs/2 rounded to float32. 1280 · float32(3/1280) is not exact in float32,
    # so the challenge grid is not symmetric about 0 by a few ulps.
    vs = float(np.float32(3 / 1280))
    half = float(np.float32(1280 * np.float32(vs))) / 2
    by_hand = [((((0.0 + (i + 0.5) * vs) - half) + 0.0) - vs / 2) + vs / 2 for i in (0, 639, 640, 1279)]
    x = axis_centres(1280, 3 / 1280)
    assert [x[0], x[639], x[640], x[1279]] == by_hand
    assert x[639] != -x[640]
    shifted = axis_centres(4, 0.5, centre=0.7)  # the centre is float32 too
    assert shifted[0] == ((((float(np.float32(0.7)) + 0.25) - 1.0) + 0.0) - 0.25) + 0.25


def brute_force(spheres: Spheres, grid: Grid) -> np.ndarray:
    """Every voxel against every sphere in long double, first sphere in list order wins."""
    ld = np.longdouble
    x = axis_centres(grid.nx, grid.voxel_size, grid.cx).astype(ld)
    y = axis_centres(grid.ny, grid.voxel_size, grid.cy).astype(ld)
    z = axis_centres(grid.nz, grid.voxel_size).astype(ld)
    Z, Y, X = np.meshgrid(z, y, x, indexing="ij")
    out = np.where(np.sqrt(X * X + Y * Y) > 1, 0, 1).astype(np.uint8)
    claimed = out == 0
    for j in range(len(spheres)):
        r2 = ld(spheres.r[j] * spheres.r[j])
        inside = ((X - ld(spheres.x[j])) ** 2 + (Y - ld(spheres.y[j])) ** 2) + (Z - ld(spheres.z[j])) ** 2 < r2
        out[inside & ~claimed] = spheres.label[j]
        claimed |= inside
    return out[:, ::-1]


@pytest.mark.parametrize("seed", range(4))
def test_box_rasteriser_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = 60
    records = np.zeros((n, 5), np.float32)
    records[:, 0:2] = rng.uniform(-1.1, 1.1, (n, 2))
    records[:, 2] = rng.uniform(-0.5, 0.5, n)
    records[:, 3] = rng.uniform(0.005, 0.3, n)  # overlapping on purpose: first sphere must win
    grid = Grid(
        nx=int(rng.integers(20, 40)),
        ny=int(rng.integers(20, 40)),
        nz=int(rng.integers(5, 12)),
        voxel_size=float(rng.uniform(0.04, 0.08)),
        cx=float(rng.uniform(-0.5, 0.5)),
        cy=float(rng.uniform(-0.5, 0.5)),
    )
    spheres = Spheres.from_records(records.ravel())
    assert np.array_equal(Rasterizer(spheres, grid).slab(0, grid.nz), brute_force(spheres, grid))


def test_touching_sphere_and_cylinder_ties_are_strict():
    # A voxel centre exactly on a sphere surface is not inside it (d² < r² is strict), one
    # exactly on the cylinder surface is inside the sample (background only when > 1).
    grid = Grid(nx=4, ny=4, nz=2, voxel_size=0.5)
    x = axis_centres(4, 0.5)  # -0.75, -0.25, 0.25, 0.75
    records = np.array([x[2], x[1], axis_centres(2, 0.5)[0], 0.5, 0], np.float32)  # centre on a voxel, r = one voxel
    labels = Rasterizer(Spheres.from_records(records), grid).slab(0, 2)[:, ::-1]  # undo the y flip
    z0 = labels[0]
    assert z0[1, 2] == 2  # the centre voxel (r = 0.5 >= 0.1: large)
    assert z0[1, 3] == 1 and z0[2, 2] == 1  # neighbours at distance exactly r: foam
    empty = Spheres.from_records(np.zeros(0, np.float32))
    on_surface = Grid(nx=1, ny=1, nz=1, voxel_size=2.0, cx=1.0)  # one voxel centred at (1, 0)
    beyond = Grid(nx=1, ny=1, nz=1, voxel_size=2.0, cx=1.5)
    assert Rasterizer(empty, on_surface).slab(0, 1).tolist() == [[[1]]]
    assert Rasterizer(empty, beyond).slab(0, 1).tolist() == [[[0]]]


def test_expanding_phantom_scales_radii_and_voxel_size():
    records = np.array([[0.0, 0.0, 0.0, 0.2, 0], [0.5, 0.0, 0.5, 0.05, 0], [-0.5, 0.1, -0.4, 0.02, 0]], np.float32)
    spheres = Spheres.from_records(records.ravel())
    sizes = np.linspace(0.25, 1.0, 8).astype(np.float32)
    grid = Grid(nx=16, ny=16, nz=8, voxel_size=0.15, cx=0.3, cy=0.3)
    time = Expansion(projection=2688, projections=3072).time
    assert time == 2688 / 3071
    grown, zoomed = expanded(spheres, sizes, time, grid)
    size = np.interp(time, np.linspace(0, 1, 8), sizes.astype(np.float64))
    assert np.array_equal(grown.r, (spheres.r.astype(np.float64) * size).astype(np.float32))
    assert grown.label.tolist() == [2, 3, 4]  # classes of the unscaled radii
    # material volume: cylinder section spanned by the voids minus the voids (by hand)
    z_lo, z_hi = -0.4 - 0.02, 0.5 + 0.05
    start = math.pi * (z_hi - z_lo) - sum(4 / 3 * math.pi * r**3 for r in (0.2, 0.05, 0.02))
    assert float(material_volume(spheres.z, spheres.r)) == pytest.approx(start, rel=1e-6)
    r_now = [float(r) for r in grown.r]  # the section the voids span shrinks with them
    now = math.pi * ((0.5 + r_now[1]) - (-0.4 - r_now[2])) - sum(4 / 3 * math.pi * r**3 for r in r_now)
    factor = (start / now) ** (1 / 3)
    assert zoomed.voxel_size == pytest.approx(0.15 / factor, rel=1e-6)
    assert (zoomed.cx, zoomed.cy) == (0.0, 0.0)  # the reference passes no centre here
    # with a flat size curve at 1 nothing changes but the (ignored) centre
    same, grid_same = expanded(spheres, np.ones(4, np.float32), time, Grid(nx=16, ny=16, nz=8, voxel_size=0.15))
    assert np.array_equal(
        Rasterizer(same, grid_same).slab(0, 8), Rasterizer(spheres, Grid(nx=16, ny=16, nz=8, voxel_size=0.15)).slab(0, 8)
    )


# --------------------------------------------------------------------------------------------
# Bit packing


def test_packing_matches_the_reference_layout():
    golden = EXPECTED["packing"]
    vol = np.load(TOMO / "pack_case.npz")["vol"]
    packed = bitpack.pack(vol)
    assert list(packed.shape) == golden["packed_shape"]
    assert packed.ravel().tolist() == golden["packed_values"]
    unpacked = bitpack.unpack(packed, 0, vol.shape[0], vol.shape[1:])
    assert np.array_equal(unpacked, (vol > 0.5).astype(np.uint8))
    assert int(unpacked.sum()) == golden["unpacked_sum"]
    for z0, z1 in ((1, 4), (3, 4), (5, 6), (0, 0)):  # slabs may start and end mid-block
        assert np.array_equal(bitpack.unpack(packed, z0, z1, vol.shape[1:]), unpacked[z0:z1])


def test_packing_bit_order_by_hand():
    vol = np.zeros((2, 2, 2), np.float32)
    vol[1, 0, 1] = 0.6  # bit 4·1 + 2·0 + 1 = 5
    vol[0, 1, 0] = np.nan  # NaN is not foam
    vol[0, 0, 0] = 0.5  # not > 0.5
    assert bitpack.pack(vol).tolist() == [[[32]]]


# --------------------------------------------------------------------------------------------
# Counting and scores


def test_boundary_by_hand():
    material = np.zeros((3, 3, 3), bool)
    material[1, 1, 1] = True
    edge = foam_boundary(material, ((False, False),) * 3)
    expected = np.zeros((3, 3, 3), bool)
    expected[1, 1, 1] = True
    for dz, dy, dx in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)):
        expected[1 + dz, 1 + dy, 1 + dx] = True
    assert np.array_equal(edge, expected)
    # the array border is no interface: a volume of one value has no boundary
    assert not foam_boundary(np.ones((2, 3, 4), bool), ((False, False),) * 3).any()


def test_counts_by_hand():
    # one row of 4 voxels: background, foam, foam, small void; prediction 1, 1, 0, 1
    labels = np.array([[[0, 1, 1, 4]]], np.uint8)
    pred = np.array([[[1, 1, 0, 1]]], np.uint8)
    c = FoamCounts.from_histogram(slab_counts(labels, pred, False, False)).spec_counts()
    assert (c["tp_foam"], c["fp_foam"], c["fn_foam"]) == (1, 1, 1)
    assert (c["n_small"], c["tp_small"], c["n_large"]) == (1, 0, 0)
    # boundary: every voxel (0|1 and 1|4 interfaces); foam side = the two foam voxels
    assert (c["n_boundary"], c["n_boundary_foam"]) == (4, 2)
    assert (c["tp_edge"], c["fp_edge"], c["fn_edge"]) == (1, 2, 1)
    s = foam_scores(FoamCounts.from_histogram(slab_counts(labels, pred, False, False)))
    assert s["dice_foam"] == 2 / 4 and s["dice_edge"] == 2 / 5
    assert s["sens_small"] == 0.0
    # no large or medium voids: 0/0 = NaN, and NaN wins over the zero in the harmonic mean
    assert math.isnan(s["sens_large"]) and math.isnan(s["sens_medium"]) and math.isnan(s["harm_mean"])


def test_harmonic_mean_special_values():
    assert harmonic_mean([1, 0.5, 1, 1, 0.5]) == 5 / 7
    assert harmonic_mean([1, 0, 1, 1, 1]) == 0.0
    assert math.isnan(harmonic_mean([1, 1, math.nan, 1, 0]))  # 1/0 + NaN is NaN in the reference
    assert harmonic_mean([0.5, 1, math.nan, 1], defined_only=True) == 3 / 4


@pytest.mark.parametrize("name", ["foamA", "foamC_nosmall"])
def test_slab_size_does_not_change_counts(name, monkeypatch):
    from evaluation.suites.tomo_foam import scoring

    data = case(name)
    shape = data["gt"].shape

    class Truth:
        def slab(self, z0, z1):
            return data["gt"][z0:z1]

    class Pred:
        def slab(self, z0, z1):
            return data["sub__noisy_p20"][z0:z1]

    whole = count_phantom(Truth(), Pred(), shape, threads=1)
    monkeypatch.setattr(scoring, "SLAB_VOXELS", 2 * shape[1] * shape[2])  # slabs of 2 slices
    sliced = count_phantom(Truth(), Pred(), shape, threads=2)
    assert np.array_equal(whole.n, sliced.n)
    expected = EXPECTED["phantoms"][name]["submissions"]["noisy_p20"]["spec_counts"]
    assert whole.spec_counts() == expected


# --------------------------------------------------------------------------------------------
# Through the command line: options and refusals


def _single_phantom_phase(folder, extra=""):
    data = case("foamC_nosmall")
    folder.mkdir()
    write_spheres(folder / "truth.h5", data["spheres"])
    g = geometry("foamC_nosmall")
    (folder / "phase.yaml").write_text(
        "suite: tomo_foam\nphantoms:\n  foam_phantom_1:\n    spheres: truth.h5\n"
        f"    grid: {{nx: {g['nx']}, ny: {g['ny']}, nz: {g['nz']}, voxel_size: {g['voxel_size']!r}}}\n" + extra
    )
    return folder, data


def test_harm_mean_of_defined_scores(tmp_path):
    phase, data = _single_phantom_phase(tmp_path / "phase", "harm_mean_of: defined\n")
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "anything.packed.h5", data["sub__noisy_p05"])  # one phantom: any file name
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    got = run.metrics["case"]["foam_phantom_1"]
    v = EXPECTED["phantoms"]["foamC_nosmall"]["submissions"]["noisy_p05"]["values"]
    assert v["harm_mean"] is None and got["sens_small"] is None
    expected = 4 / sum(1 / v[k] for k in ("dice_foam", "sens_large", "sens_medium", "dice_edge"))
    assert got["harm_mean"] == pytest.approx(expected, rel=1e-12)
    assert run.metrics["aggregates"]["harm_mean"] == got["harm_mean"]


def test_reference_nan_is_null(tmp_path):
    phase, data = _single_phantom_phase(tmp_path / "phase")
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "seg.npy", data["sub__perfect"])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    validate_metrics(run.metrics)
    assert run.metrics["case"]["foam_phantom_1"]["harm_mean"] is None
    assert run.metrics["aggregates"]["sens_small"] is None
    assert run.metrics["aggregates"]["dice_foam"] == 1.0


@pytest.mark.parametrize("problem", ["shape", "pickle", "missing", "two_datasets"])
def test_unusable_submissions_are_refused(problem, tmp_path):
    phase = foam_phase(tmp_path / "phase")
    submission = tmp_path / "input"
    submission.mkdir()
    for name in PHANTOMS:
        write_volume(submission / f"{name}.npy", case(name)["sub__perfect"])
    if problem == "shape":
        write_volume(submission / "foamA.npy", case("foamA")["sub__perfect"][:, :, :95])
        expected = "foamA.npy: has shape (48, 96, 95); expected (48, 96, 96) or (24, 48, 48) (bit-packed uint8)"
    elif problem == "pickle":
        with open(submission / "foamA.npy", "wb") as f:
            np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        expected = "foamA.npy: holds object values"
    elif problem == "missing":
        (submission / "foamB_zoom.npy").unlink()
        expected = "no file for phantom(s) foamB_zoom"
    else:
        import h5py

        (submission / "foamA.npy").unlink()
        with h5py.File(submission / "foamA.h5", "w") as f:
            f["a"] = np.zeros((48, 96, 96), np.uint8)
            f["b"] = np.zeros((48, 96, 96), np.uint8)
        expected = "foamA.h5: holds 2 datasets"
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2, run.stderr
    assert expected in run.last_line
    assert str(phase) not in run.stderr.splitlines()[-1]


def test_missing_label_volume_is_a_phase_error(tmp_path):
    phase = foam_phase(tmp_path / "phase")
    text = (phase / "phase.yaml").read_text().replace("spheres: foamA.h5", "spheres: foamA.h5\n    labels: foamA.npy")
    (phase / "phase.yaml").write_text(text)
    submission = tmp_path / "input"
    submission.mkdir()
    for name in PHANTOMS:
        write_volume(submission / f"{name}.npy", case(name)["sub__perfect"])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 1
    assert "rasterize" in run.stdout  # the organizer's cause, in the log


def test_rasterize_command_writes_the_reference_volumes(tmp_path):
    phase = foam_phase(tmp_path / "phase")
    suffixes = dict(zip(PHANTOMS, (".npy", ".h5", ".zarr")))
    text = (phase / "phase.yaml").read_text()
    for name, suffix in suffixes.items():
        text = text.replace(f"spheres: {name}.h5", f"spheres: {name}.h5\n    labels: labels/{name}{suffix}")
    (phase / "phase.yaml").write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "evaluation", "rasterize", str(phase), "--threads", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    from evaluation.readers.slabs import open_slabs

    for name, suffix in suffixes.items():
        with open_slabs(phase / "labels" / f"{name}{suffix}") as labels:
            assert np.array_equal(labels.read(0, labels.shape[0]), case(name)["gt"])
    submission = tmp_path / "input"
    submission.mkdir()
    for name in PHANTOMS:
        write_volume(submission / f"{name}.packed.h5", case(name)["sub__shift_x1"])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    for name in PHANTOMS:
        expected = EXPECTED["phantoms"][name]["submissions"]["shift_x1"]["values"]
        assert run.metrics["case"][name]["dice_edge"] == pytest.approx(expected["dice_edge"], rel=1e-12)


def test_label_volume_alone_defines_the_grid(tmp_path):
    phase = tmp_path / "phase"
    phase.mkdir()
    write_volume(phase / "truth.tif", case("foamB_zoom")["gt"].astype(np.uint16))
    (phase / "phase.yaml").write_text("suite: tomo_foam\nphantoms:\n  zoom:\n    labels: truth.tif\n")
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "zoom.packed.h5", case("foamB_zoom")["sub__majority3"])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    expected = EXPECTED["phantoms"]["foamB_zoom"]["submissions"]["majority3"]["spec_counts"]
    assert run.metrics["case"]["zoom"]["counts"] == expected
    # a label outside 0-4 is the organiser's error, not silently wrapped into range
    write_volume(phase / "truth.tif", (case("foamB_zoom")["gt"].astype(np.uint16) + 256))
    run = run_cli(submission, phase, tmp_path / "out2")
    assert run.code == 1 and "Submission rejected" not in run.last_line
