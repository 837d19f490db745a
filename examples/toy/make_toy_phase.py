"""A toy segmentation challenge to try every command on in minutes (docs/first-phase.md).

    python examples/toy/make_toy_phase.py toy

writes ``toy/phase`` (phase.yaml and three truth label maps of two classes, as .npy) and
``toy/uploads/<team>`` (three teams' predictions: the truth shifted by 0, 1 and 3 voxels, so
the ranking is known in advance: team-a, team-b, team-c).
"""

import sys
from pathlib import Path

import numpy as np

PHASE_YAML = """\
suite: segmentation
classes: {tumour: 1, oedema: 2}
metrics: [dice, hd_percentile]
percentiles: [95]
definition: metricsreloaded
ranking: dice
"""
SHIFTS = {"team-a": 0, "team-b": 1, "team-c": 3}


def truth(seed: int) -> np.ndarray:
    """Two nested balls in a 32^3 volume: the core labelled 1, the shell around it 2."""
    rng = np.random.default_rng(seed)
    z, y, x = np.ogrid[:32, :32, :32]
    centre = rng.integers(12, 20, size=3)
    radius = np.sqrt((z - centre[0]) ** 2 + (y - centre[1]) ** 2 + (x - centre[2]) ** 2)
    labels = np.zeros((32, 32, 32), np.uint8)
    labels[radius < 9] = 2
    labels[radius < 5] = 1
    return labels


def main(root: Path) -> None:
    (root / "phase" / "labels").mkdir(parents=True, exist_ok=True)
    (root / "phase" / "phase.yaml").write_text(PHASE_YAML)
    for case in range(3):
        labels = truth(case)
        np.save(root / "phase" / "labels" / f"case_{case}.npy", labels)
        for team, shift in SHIFTS.items():
            (root / "uploads" / team).mkdir(parents=True, exist_ok=True)
            np.save(root / "uploads" / team / f"case_{case}.npy", np.roll(labels, shift, axis=2))
    print(f"wrote {root / 'phase'} and {len(SHIFTS)} uploads in {root / 'uploads'}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "toy"))
