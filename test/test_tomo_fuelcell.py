"""tomo_fuelcell against hand-computed cases (no reference code exists for this track).

A small cell: 10 reconstructed slices of which 2 <= z < 8 are scored, each 4 x 8 voxels laid
out by x column: membrane (label 1, x 0-1), gas diffusion layer (2, x 2-3), the scored channel
(3, x 4), another channel (4, x 5) and unlabelled space (0, x 6-7). Every scored slice holds the
same water pattern; the unscored slices are filled with water everywhere and must not count.
"""

import math

import numpy as np
import pytest
from helpers.grading import run_cli, validate_metrics
from helpers.tomo import write_volume
from helpers.whole_array import patterns_from_masks

from evaluation.suites.tomo_fuelcell.regions import (
    RegionCounts,
    dice,
    membership_lut,
    region_counts,
    slab_histogram,
)

TOTAL, START, STOP = 10, 2, 8
PLANE = (4, 8)
REGION_LABELS = np.repeat(np.array([1, 1, 2, 2, 3, 4, 0, 0], np.uint8)[None, None, :], 4, axis=1).repeat(STOP - START, axis=0)


def slice_pattern(cells) -> np.ndarray:
    plane = np.zeros(PLANE, np.uint8)
    for y, x in cells:
        plane[y, x] = 1
    return plane


# water in one scored slice: (y, x) cells
TRUTH_A = [(0, 0), (0, 2), (1, 2), (0, 4), (1, 4), (2, 4), (3, 4), (0, 6)]
SUB_A = [(0, 0), (1, 0), (0, 2), (0, 4), (1, 4), (3, 5), (0, 6), (1, 7)]
# B: no water in the membrane on either side; C: the submission finds water in an empty channel
TRUTH_B = [c for c in TRUTH_A if c[1] > 1]
SUB_B = [c for c in SUB_A if c[1] > 1]
TRUTH_C = [c for c in TRUTH_A if c[1] != 4]
SUB_C = SUB_A

# By hand, per scored slice (x 6): counts (both, submitted, truth) per region
#   A: membrane (1, 2, 1), GDL (1, 1, 2), channel (2, 2, 4), region 1 adds the other channel's (0, 1, 0)
#      Dice: region_1 2·4/(6+7) = 8/13, region_2 2·2/6 = 2/3, region_3 2/3, region_4 2/3
#      harmonic mean 4 / (13/8 + 3/2 + 3/2 + 3/2) = 32/49
#   B: region_4 holds no water at all: 0/0; region_1 2·3/(4+6) = 3/5
#   C: channel truth empty, submission not: region_2 = 0, harmonic mean 0
EXPECTED_A = {
    "dice_region_1": 8 / 13,
    "dice_region_2": 2 / 3,
    "dice_region_3": 2 / 3,
    "dice_region_4": 2 / 3,
    "harm_mean": 32 / 49,
}
COUNTS_A = {
    "region_1": {"both": 24, "submitted": 36, "truth": 42},
    "region_2": {"both": 12, "submitted": 12, "truth": 24},
    "region_3": {"both": 6, "submitted": 6, "truth": 12},
    "region_4": {"both": 6, "submitted": 12, "truth": 6},
}


def stack(cells, total=True) -> np.ndarray:
    """The 10-slice stack (unscored slices all water) or just the 6 scored slices."""
    scored = np.repeat(slice_pattern(cells)[None], STOP - START, axis=0)
    if not total:
        return scored
    full = np.ones((TOTAL, *PLANE), np.uint8)
    full[START:STOP] = scored
    return full


def make_phase(folder, steps, extra=""):
    for step, truth in steps.items():
        (folder / step).mkdir(parents=True)
        write_volume(folder / step / "water.h5", stack(truth))
        write_volume(folder / step / "regions.h5", REGION_LABELS)
    (folder / "phase.yaml").write_text(
        "suite: tomo_fuelcell\n"
        f"time_steps: [{', '.join(steps)}]\n"
        f"slices: {{start: {START}, stop: {STOP}, total: {TOTAL}}}\n" + extra
    )
    return folder


def test_three_time_steps_by_hand(tmp_path):
    phase = make_phase(tmp_path / "phase", {"A": TRUTH_A, "B": TRUTH_B, "C": TRUTH_C})
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "A.tif", stack(SUB_A) * 255)  # whole stack, any value > 0.5 is water
    write_volume(submission / "B.packed.h5", stack(SUB_B, total=False))  # the challenge's packed window
    write_volume(submission / "C.npy", stack(SUB_C, total=False).astype(np.float32))
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    m = run.metrics
    validate_metrics(m)
    a, b, c = (m["case"][step] for step in "ABC")
    for key, value in EXPECTED_A.items():
        assert a[key] == pytest.approx(value, rel=1e-15), key
    assert a["counts"] == COUNTS_A
    assert b["format"] == "bit-packed" and a["format"] == "plain"
    assert b["dice_region_4"] is None and b["harm_mean"] is None  # no water in the membrane: 0/0
    assert b["dice_region_1"] == pytest.approx(3 / 5, rel=1e-15)
    assert b["counts"]["region_4"] == {"both": 0, "submitted": 0, "truth": 0}
    assert c["dice_region_2"] == 0.0 and c["harm_mean"] == 0.0
    assert c["counts"]["region_2"] == {"both": 0, "submitted": 12, "truth": 0}
    # aggregates: means over the time steps; an undefined step makes the mean undefined
    assert m["aggregates"]["harm_mean"] is None
    assert m["aggregates"]["harm_mean_A"] == pytest.approx(32 / 49, rel=1e-15)
    assert m["aggregates"]["dice_region_3"] == pytest.approx((2 / 3 + 2 / 3 + c["dice_region_3"]) / 3, rel=1e-15)


def test_region_masks_and_empty_region_one(tmp_path):
    masks = "".join(f"  region_{k}: {{mask: '{{step}}/mask{k}.npy'}}\n" for k in range(1, 5))
    phase = make_phase(tmp_path / "phase", {"B": TRUTH_B}, "empty_region: one\nregions:\n" + masks)
    members = {1: (1, 2, 3, 4), 2: (3,), 3: (2,), 4: (1,)}
    for k, labels in members.items():
        whole_stack = np.pad(REGION_LABELS, ((START, TOTAL - STOP), (0, 0), (0, 0)))  # masks may cover all slices
        write_volume(phase / "B" / f"mask{k}.npy", np.isin(whole_stack, labels))
    (phase / "B" / "regions.h5").unlink()  # not needed when every region has its mask
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "anything.h5", stack(SUB_B, total=False).astype(bool))  # one time step: any file name
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    b = run.metrics["case"]["B"]
    assert b["dice_region_4"] == 1.0
    # 4 / (5/3 + 3/2 + 3/2 + 1) = 12/17
    assert b["harm_mean"] == pytest.approx(12 / 17, rel=1e-15)
    assert run.metrics["aggregates"]["harm_mean"] == b["harm_mean"]


def test_wrong_slice_count_is_refused(tmp_path):
    phase = make_phase(tmp_path / "phase", {"A": TRUTH_A})
    submission = tmp_path / "input"
    submission.mkdir()
    write_volume(submission / "A.npy", stack(SUB_A)[:9])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2
    assert "A.npy: has shape (9, 4, 8); expected (10, 4, 8), (6, 4, 8) or (3, 2, 4) (bit-packed uint8)" in run.last_line


def test_region_histogram_nested_regions_by_hand():
    lut = membership_lut([[1, 2, 3, 4], [3], [2], [1]])
    assert lut.tolist() == [0, 0b1001, 0b0101, 0b0011, 0b0001, 0]
    labels = np.array([1, 2, 3, 4, 0, 9], np.uint8)
    pattern = np.take(lut, labels, mode="clip")  # label 9 (beyond the table) lies in no region
    s = np.array([1, 0, 1, 1, 1, 1], np.uint8)
    w = np.array([1, 1, 0, 0, 1, 1], np.uint8)
    counts = region_counts(slab_histogram(pattern, s, w, np.unique(lut)), 4)
    assert counts[0] == RegionCounts(both=1, submitted=3, truth=2)
    assert counts[1] == RegionCounts(both=0, submitted=1, truth=0)
    assert counts[3] == RegionCounts(both=1, submitted=1, truth=1)
    assert dice(counts[1]) == 0.0 and dice(counts[3]) == 1.0 and dice(counts[0]) == 2 / 5
    assert math.isnan(dice(RegionCounts(0, 0, 0))) and dice(RegionCounts(0, 0, 0), when_empty=1.0) == 1.0
    masks = [np.array([1, 0, 1], np.uint8), np.array([1, 1, 0], np.uint8)]
    assert patterns_from_masks(masks).tolist() == [3, 2, 1]
