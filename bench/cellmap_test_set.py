"""Benchmark: the whole CellMap test set (16 crops, 413 labels, 87.7 G label-voxels) through the CLI.

The crops, shapes, voxel sizes, translations and labels are those of the reference's test-crop
manifest (``bench/data/cellmap_test_crop_manifest.csv``: janelia-cellmap/cellmap-segmentation-challenge
``utils/test_crop_manifest.csv`` at 6b9ad68). The content is synthetic, seeded and class-typical:

- ``cell`` (instance): 2-4 Voronoi cells separated by a gap that is ``ecs``; ``pm`` a 3-voxel
  band inside each cell's boundary; ``cyto`` the cell minus its membrane and every organelle;
- ``nuc`` (instance): a few huge nuclei (radius 30-72 voxels, 30 per 1000^3), with their envelope
  (``ne``, ``ne_mem``, ``ne_lum``, ``ne_mem_all``), ``nucpl``, chromatin blobs (``chrom``,
  ``hchrom`` near the envelope, ``echrom`` inside) and pores (``np``, ``np_in``, ``np_out``);
- ``mito`` (instance): hundreds of medium, elongated, rotated ellipsoids (300 per 600^3) with
  ``mito_mem``, ``mito_lum`` and ``mito_ribo`` dots;
- ``ves`` (instance): thousands of tiny vesicles (radius 2-5, 3000 per 600^3) with mem/lum;
- ``endo``, ``lyso``, ``perox``, ``ld`` (instance): tens of medium ellipsoids with mem/lum;
- ``mt`` (instance): thin tubes (radius 2.5-3.5, 80-300 long) with ``mt_in`` / ``mt_out``;
- ``er`` (semantic): a network of chained tubes with ``er_mem``, ``er_lum``, ``er_mem_all``;
  ``eres`` blobs at its ends; ``golgi``: stacks of five flat cisternae, with mem/lum;
- empty labels as in real crops: in the 48-label crops each optional organelle family (nuclei,
  endosomes, lysosomes, peroxisomes, lipid droplets, golgi, ER exit sites, pores, chromatin,
  mito ribosomes) is absent with probability 1/4.

Instance classes follow the suite's ``INSTANCE_CLASSES`` (membership by exact name). The truth
is uint32 for instance labels and uint8 for semantic ones, as ``ground-truth/`` and the
conformance kit store them. The prediction is the truth's objects perturbed as
``bench/cellmap_crop.py`` perturbs them (7 % dropped, 68 % jittered by up to 2 voxels (nuclei
3), 10 % split by a plane, 15 % merged into their nearest neighbour through a bridge, one false
positive per 20 objects; semantic families jittered by one voxel with 5 % dropped; cell seeds
moved), 8 % of the labels are not submitted, 10 % are submitted at twice the voxel size (the
translation moved to the coarse voxel's centre, which the suite aligns back), and submitted
dtypes vary (uint64/uint32/uint16 for instances, uint8/bool for semantic labels).

Generation renders block by block, one zarr chunk at a time and every label of a crop at once,
from the objects' implicit shapes: nothing larger than a chunk is ever materialised and only
chunks holding a nonzero voxel are written (blosc-lz4, zarr v2, ``/`` separator, as
``ground-truth/``). The result is cached in ``--cache`` under a key made of the generator's
version, the seed, the scale and the chunk size, with a stamp per crop; it is regenerated only
when one of those changes (or a crop's stamp is missing).

Scoring runs ``python -m evaluation`` under ``prlimit --data=7516192768`` (Grand-Challenge's
per-process limit on its default 8 GB, 2-vCPU machine) with ``--workers 2`` on a view of the
cache (hard links) holding the selected crops, and prints wall and CPU time (the CLI and its
workers, from ``os.wait4``), the largest worker's peak, the decoding floor (every stored array
of truth and submission read once, chunk-slab by chunk-slab, with ``evaluation.readers.zarr_store``),
per-crop task times, peaks and estimates, and the refused or failed tasks with their messages.
Every timing line carries the load average.

The run's figures are kept next to its log in the view (``output.run.json``, ``floor.json``):
``--rereport`` prints them again without scoring. The tables also split the scored tasks by kind
(instance / semantic, native / resampled) with their seconds per G voxel and measured peak over
the scheduler's estimate.

    python bench/cellmap_test_set.py [--crops 557,983] [--scale 0.5] [--generate-only | --score-only | --rereport]
                                     [--cache DIR] [--seed 0] [--chunk 128] [--jobs 2] [--no-floor]
                                     [--version v2|head] [--workers 2] [--memory-limit BYTES]
"""

import argparse
import csv
import json
import math
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MANIFEST = Path(__file__).resolve().parent / "data" / "cellmap_test_crop_manifest.csv"
MANIFEST_SHA256 = "dc30f370bf7c1672cb89961edcd9e9099377ccba064c2f45123cc1472b96bbf7"
GEN_VERSION = 3  # bump whenever the generated content changes
GRAND_CHALLENGE_DATA_LIMIT = 7516192768  # bytes: RLIMIT_DATA of every process on the default machine
DEFAULT_CACHE = (
    Path("/work/bench-cache/cellmap_test_set") if Path("/work").is_dir() else Path("/tmp/bench-cache/cellmap_test_set")
)

try:
    from evaluation.suites.cellmap import INSTANCE_CLASSES
except ImportError:  # the suite is being restructured: its list as of bdfa992
    INSTANCE_CLASSES = ("nuc", "vim", "ves", "endo", "lyso", "ld", "perox", "mito", "np", "mt", "cell", "instance")
INSTANCE = frozenset(INSTANCE_CLASSES)


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# --------------------------------------------------------------------------------------------
# The manifest


@dataclass(frozen=True)
class Crop:
    crop: int
    dataset: str
    voxel_size: tuple[float, ...]
    translation: tuple[float, ...]
    voxel_size_text: str
    translation_text: str
    full_shape: tuple[int, ...]
    shape: tuple[int, ...]  # after --scale
    labels: tuple[str, ...]

    @property
    def voxels(self) -> int:
        return math.prod(self.shape)


def _numbers(text: str, kind):
    return tuple(kind(x) for x in text.strip().strip("[]").split(";"))


def scaled_shape(shape, scale: float) -> tuple[int, ...]:
    """Every axis times ``scale``, kept even (a label at twice the voxel size then covers the
    crop exactly) and at least 8."""
    return tuple(max(8, 2 * round(n * scale / 2)) for n in shape)


def read_manifest(scale: float) -> dict[int, Crop]:
    rows = list(csv.DictReader(MANIFEST.read_text(encoding="utf-8").splitlines()))
    grouped: dict[int, list[dict]] = {}
    for row in rows:
        grouped.setdefault(int(row["crop_name"]), []).append(row)
    crops = {}
    for crop, group in grouped.items():
        grids = {(r["voxel_size"], r["translation"], r["shape"]) for r in group}
        if len(grids) != 1:
            raise SystemExit(f"crop {crop}: labels on different grids are not supported by this bench")
        voxel_size, translation, shape = grids.pop()
        full = _numbers(shape, int)
        crops[crop] = Crop(
            crop,
            group[0]["dataset"],
            _numbers(voxel_size, float),
            _numbers(translation, float),
            voxel_size,
            translation,
            full,
            scaled_shape(full, scale),
            tuple(r["class_label"] for r in group),
        )
    return crops


# --------------------------------------------------------------------------------------------
# Objects and scenes. Coordinates are in the crop's voxel index space (voxel i's centre at i).

ELL, TUBE = 0, 1
SOLID = [(0.0, None)]
# family -> [(label, bands)], a band (t1, t2) = inside the shape shrunk by t1 and not inside it
# shrunk by t2 (None: no inner cut). Instance labels take only the solid band.
LAYERS = {
    "nuc": [
        ("nuc", SOLID),
        ("ne", [(0, 4)]),
        ("ne_mem", [(0, 1), (3, 4)]),
        ("ne_lum", [(1, 3)]),
        ("ne_mem_all", [(0, 1), (3, 4)]),
        ("er_mem_all", [(0, 1), (3, 4)]),
        ("nucpl", [(4, None)]),
    ],
    "np": [("np", SOLID), ("np_out", [(0, 1.5)]), ("np_in", [(1.5, None)]), ("ne_mem_all", SOLID)],
    "hchrom": [("chrom", SOLID), ("hchrom", SOLID)],
    "echrom": [("chrom", SOLID), ("echrom", SOLID)],
    "mito": [("mito", SOLID), ("mito_mem", [(0, 2)]), ("mito_lum", [(2, None)])],
    "mito_ribo": [("mito_ribo", SOLID)],
    "ves": [("ves", SOLID), ("ves_mem", [(0, 1)]), ("ves_lum", [(1, None)])],
    "endo": [("endo", SOLID), ("endo_mem", [(0, 2)]), ("endo_lum", [(2, None)])],
    "lyso": [("lyso", SOLID), ("lyso_mem", [(0, 2)]), ("lyso_lum", [(2, None)])],
    "perox": [("perox", SOLID), ("perox_mem", [(0, 2)]), ("perox_lum", [(2, None)])],
    "ld": [("ld", SOLID), ("ld_mem", [(0, 1)]), ("ld_lum", [(1, None)])],
    "mt": [("mt", SOLID), ("mt_out", [(0, 1.5)]), ("mt_in", [(1.5, None)])],
    "er": [("er", SOLID), ("er_mem", [(0, 1.5)]), ("er_lum", [(1.5, None)]), ("er_mem_all", [(0, 1.5)])],
    "eres": [("eres", SOLID), ("eres_mem", [(0, 1.5)]), ("eres_lum", [(1.5, None)])],
    "golgi": [("golgi", SOLID), ("golgi_mem", [(0, 1)]), ("golgi_lum", [(1, None)])],
}
FAMILIES = tuple(LAYERS)
CELL_LABELS = ("cell", "pm", "ecs", "cyto")
OCCUPIES = ("nuc", "mito", "ves", "endo", "lyso", "perox", "ld", "mt", "er", "eres", "golgi")  # not cytosol
OPTIONAL = ("nuc", "endo", "lyso", "perox", "ld", "golgi", "eres", "np", "hchrom", "echrom", "mito_ribo")
PRODUCIBLE = {label for layers in LAYERS.values() for label, _ in layers} | set(CELL_LABELS)


class Obj:
    """An ellipsoid (centre ``c``, semi-axes ``radii``, optional rotation ``rot`` whose columns
    are the local axes) or a tube (segment ``p0``-``p1``, radius ``rad``), with an instance id;
    in a prediction possibly split by a plane through its centre (normal ``split_n``, the
    negative side taking ``split_id``); ``inst_only`` (a merge bridge) adds to instance labels only."""

    __slots__ = ("c", "hi", "id", "inst_only", "kind", "lo", "p0", "p1", "rad", "radii", "rot", "split_id", "split_n")

    def __init__(self, kind, ident, c=None, radii=None, rot=None, p0=None, p1=None, rad=0.0, inst_only=False):
        self.kind, self.id, self.rot, self.rad, self.inst_only = kind, int(ident), rot, float(rad), inst_only
        self.split_n, self.split_id = None, 0
        if kind == ELL:
            self.c, self.radii = np.asarray(c, float), np.asarray(radii, float)
            self.p0 = self.p1 = None
        else:
            self.p0, self.p1 = np.asarray(p0, float), np.asarray(p1, float)
            self.c, self.radii = (self.p0 + self.p1) / 2, None
        self.bounds()

    def bounds(self):
        if self.kind == ELL:
            extent = self.radii if self.rot is None else np.full(3, self.radii.max())
            self.lo, self.hi = self.c - extent, self.c + extent
        else:
            self.lo = np.minimum(self.p0, self.p1) - self.rad
            self.hi = np.maximum(self.p0, self.p1) + self.rad

    def copy(self) -> "Obj":
        new = Obj.__new__(Obj)
        for name in Obj.__slots__:
            setattr(new, name, getattr(self, name))
        return new

    def shifted(self, delta) -> "Obj":
        new = self.copy()
        delta = np.asarray(delta, float)
        new.c = self.c + delta
        if self.kind == TUBE:
            new.p0, new.p1 = self.p0 + delta, self.p1 + delta
        new.bounds()
        return new


class Family:
    def __init__(self, name: str, objects: list[Obj]):
        self.name, self.objects = name, objects
        self.lo = np.array([o.lo for o in objects], float).reshape(-1, 3)
        self.hi = np.array([o.hi for o in objects], float).reshape(-1, 3)

    def __len__(self):
        return len(self.objects)


@dataclass
class Cells:
    """Voronoi cells of ``seeds`` separated by ``gap`` voxels of extracellular space; the
    plasma membrane is a band of ``membrane`` voxels inside each cell's boundary."""

    seeds: np.ndarray  # (k, 3)
    gap: float
    membrane: float

    def _planes(self):
        """(i, j, normal, offset) of each bisector: its signed distance, positive on i's side, is
        normal . x + offset (|x - Sj|^2 - |x - Si|^2) / (2 |Si - Sj|), linear in x."""
        planes = []
        for i in range(len(self.seeds)):
            for j in range(i + 1, len(self.seeds)):
                si, sj = self.seeds[i], self.seeds[j]
                d = float(np.linalg.norm(si - sj))
                planes.append((i, j, (si - sj) / d, float(sj @ sj - si @ si) / (2 * d)))
        return planes

    def margins_at(self, point) -> np.ndarray:
        """Each cell's signed distance to its nearest bisector at one point (positive only for
        the cell holding the point)."""
        margins = np.full(len(self.seeds), np.inf)
        for i, j, normal, offset in self._planes():
            value = float(normal @ point) + offset
            margins[i], margins[j] = min(margins[i], value), min(margins[j], -value)
        return margins

    def points(self, points: np.ndarray) -> np.ndarray:
        """The largest margin (see ``margins_at``) of each of ``points`` (n, 3)."""
        margins = np.full((len(self.seeds), len(points)), np.inf)
        for i, j, normal, offset in self._planes():
            value = points @ normal + offset
            margins[i], margins[j] = np.minimum(margins[i], value), np.minimum(margins[j], -value)
        return margins.max(axis=0)

    def block(self, xs, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        """(cell index, margin) on the grid of the 1-D coordinate arrays ``xs`` (z, y, x); the
        margin is exact below ``threshold`` and only known to be at least ``threshold`` above
        it. Cells and bisectors that cannot matter in the block (1-Lipschitz bounds from its
        centre) are skipped: a voxel is in cell i only where i's margin is positive, and a
        bisector at least ``threshold`` away everywhere cannot bring a margin below it."""
        axes = [np.asarray(x, np.float32) for x in xs]
        shape = tuple(len(x) for x in axes)
        centre = np.array([(x[0] + x[-1]) / 2 for x in axes], float)
        half = float(np.linalg.norm([(x[-1] - x[0]) / 2 for x in axes])) + 1e-3
        at_centre = self.margins_at(centre)
        relevant = [i for i in range(len(self.seeds)) if at_centre[i] + half >= 0]
        margins = {i: None for i in relevant}
        for i, j, normal, offset in self._planes():
            value = float(normal @ centre) + offset
            need_i = i in margins and value - half < threshold
            need_j = j in margins and -value - half < threshold
            if not (need_i or need_j):
                continue
            plane = (
                (np.float32(normal[0]) * axes[0]).reshape(-1, 1, 1)
                + (np.float32(normal[1]) * axes[1]).reshape(1, -1, 1)
                + (np.float32(normal[2]) * axes[2] + np.float32(offset)).reshape(1, 1, -1)
            )
            if need_i:
                margins[i] = plane if margins[i] is None else np.minimum(margins[i], plane)
            if need_j:
                margins[j] = -plane if margins[j] is None else np.minimum(margins[j], -plane)
        which, best = np.int8(0), np.float32(-np.inf)
        for i, margin in margins.items():
            margin = np.float32(np.inf) if margin is None else margin
            if np.ndim(best) == 0 and best == -np.inf:
                which, best = np.int8(i), margin
            else:
                which = np.where(margin > best, np.int8(i), which)
                best = np.maximum(best, margin)
        return np.broadcast_to(which, shape), np.broadcast_to(best, shape)


@dataclass
class Scene:
    shape: tuple[int, ...]
    families: dict[str, Family]
    cells: Cells | None


def random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    a, b, c, d = q / np.linalg.norm(q)
    return np.array(
        [
            [a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
            [2 * (b * c + a * d), a * a - b * b + c * c - d * d, 2 * (c * d - a * b)],
            [2 * (b * d - a * c), 2 * (c * d + a * b), a * a - b * b - c * c + d * d],
        ]
    )


def unit(rng) -> np.ndarray:
    v = rng.normal(size=3)
    return v / np.linalg.norm(v)


def truth_scene(crop: Crop, seed: int, scale: float) -> tuple[Scene, dict]:
    """The crop's objects, seeded by (seed, crop); the second value says which families are present."""
    rng = np.random.default_rng([seed, crop.crop, 0])
    shape = np.asarray(crop.shape, float)
    volume = float(np.prod(shape))
    density = volume / 216e6  # counts are given per 600^3
    big = max(scale, 0.25)  # large objects shrink with --scale, small ones keep their size
    full = len(crop.labels) >= 40
    present = {f: (not full or f not in OPTIONAL or rng.random() >= 0.25) for f in FAMILIES}
    present["np"] = present["np"] and present["nuc"]
    present["hchrom"] = present["echrom"] = present["hchrom"] and present["nuc"]

    cells = None
    if set(CELL_LABELS) & set(crop.labels):
        k = int(rng.integers(2, 5))
        cells = Cells(rng.uniform(-0.25 * shape, 1.25 * shape, size=(k, 3)), float(rng.uniform(6, 14) * max(big, 0.5)), 3.0)

    nuclei: list[Obj] = []

    def place_many(radii, tries: int = 8) -> np.ndarray:
        """Centres inside the crop, outside the nuclei and (when there are cells) inside a
        cell, one per radius: the first of ``tries`` candidates that fits, else the first."""
        radii = np.asarray(radii, float).reshape(-1)
        if not radii.size:
            return np.zeros((0, 3))
        candidates = rng.uniform(0, shape, size=(radii.size, tries, 3))
        fits = np.ones((radii.size, tries), bool)
        if nuclei:
            distance = np.linalg.norm(candidates[:, :, None, :] - nuclei_c[None, None], axis=-1)
            fits &= np.all(distance >= nuclei_r[None, None] + radii[:, None, None], axis=-1)
        if cells is not None:
            margin = cells.points(candidates.reshape(-1, 3)).reshape(radii.size, tries)
            fits &= margin >= cells.gap / 2 + cells.membrane + np.minimum(radii, 5)[:, None]
        first = np.where(fits.any(axis=1), fits.argmax(axis=1), 0)
        return candidates[np.arange(radii.size), first]

    def place(radius: float) -> np.ndarray:
        return place_many([radius])[0]

    nuclei_c, nuclei_r = np.zeros((0, 3)), np.zeros(0)
    families: dict[str, list[Obj]] = {f: [] for f in FAMILIES}
    if present["nuc"]:
        for _ in range(max(1, round(30 * volume / 1e9))):
            radius = rng.uniform(30, 72) * big
            for _ in range(50):
                c = rng.uniform(0, shape)
                if all(np.linalg.norm(c - n.c) > 1.05 * (radius + n.radii.max()) for n in nuclei):
                    break
            nuclei.append(Obj(ELL, len(nuclei) + 1, c=c, radii=radius * rng.uniform(0.8, 1.0, 3)))
        families["nuc"] = nuclei
        nuclei_c, nuclei_r = np.array([n.c for n in nuclei]), np.array([n.radii.max() for n in nuclei])
        for n in nuclei:
            scale_r = n.radii.max()
            for _ in range(12):
                d = unit(rng)
                surface = n.c + d / np.sqrt(((d / n.radii) ** 2).sum())
                families["np"].append(Obj(TUBE, len(families["np"]) + 1, p0=surface - 5 * d, p1=surface + 1 * d, rad=3.0))
            for _ in range(8):
                d = unit(rng)
                families["hchrom"].append(
                    Obj(
                        ELL,
                        0,
                        c=n.c + d * n.radii * rng.uniform(0.7, 0.8),
                        radii=scale_r * rng.uniform(0.12, 0.2) * rng.uniform(0.8, 1.2, 3),
                    )
                )
            for _ in range(5):
                d = unit(rng)
                families["echrom"].append(
                    Obj(
                        ELL,
                        0,
                        c=n.c + d * n.radii * rng.uniform(0, 0.45),
                        radii=scale_r * rng.uniform(0.1, 0.2) * rng.uniform(0.8, 1.2, 3),
                    )
                )

    count = min(1500, round(300 * density))
    mito_radii = np.stack([rng.uniform(4, 9, count), rng.uniform(4, 9, count), rng.uniform(10, 30, count)], axis=1)
    for radii, centre in zip(mito_radii, place_many(mito_radii.max(axis=1, initial=0))):
        rot = random_rotation(rng)
        mito = Obj(ELL, len(families["mito"]) + 1, c=centre, radii=radii, rot=rot)
        families["mito"].append(mito)
        for _ in range(3):
            offset = rot @ (rng.uniform(-0.4, 0.4, 3) * radii)
            families["mito_ribo"].append(Obj(ELL, 0, c=mito.c + offset, radii=np.full(3, rng.uniform(1.5, 2.5))))
    count = min(15000, round(3000 * density))
    ves_r = rng.uniform(2, 5, count)
    ves_shape = rng.uniform(0.85, 1.15, (count, 3))
    for index, (r, centre) in enumerate(zip(ves_r, place_many(ves_r))):
        families["ves"].append(Obj(ELL, index + 1, c=centre, radii=r * ves_shape[index]))
    for name, count, (low, high) in (("endo", 40, (6, 14)), ("lyso", 25, (8, 18)), ("perox", 25, (5, 12)), ("ld", 10, (10, 25))):
        for _ in range(max(1, round(count * density))):
            r = rng.uniform(low, high)
            families[name].append(Obj(ELL, len(families[name]) + 1, c=place(r), radii=r * rng.uniform(0.8, 1.2, 3)))
    for _ in range(max(1, round(60 * density))):
        start, length = place(3), rng.uniform(80, 300) * max(big, 0.3)
        families["mt"].append(
            Obj(TUBE, len(families["mt"]) + 1, p0=start, p1=start + length * unit(rng), rad=rng.uniform(2.5, 3.5))
        )
    end = None
    for _ in range(max(1, round(200 * density))):
        chained = end is not None and np.all((end >= 0) & (end < shape)) and rng.random() < 0.7
        start = end if chained else place(5)
        end = start + rng.uniform(30, 120) * max(big, 0.5) * unit(rng)
        families["er"].append(Obj(TUBE, 0, p0=start, p1=end, rad=rng.uniform(3, 5)))
    for _ in range(max(1, round(30 * density))):
        tube = families["er"][int(rng.integers(len(families["er"])))]
        families["eres"].append(Obj(ELL, 0, c=tube.p1 + 3 * unit(rng), radii=rng.uniform(4, 8) * rng.uniform(0.8, 1.2, 3)))
    for _ in range(max(1, round(2 * density))):
        rot, centre = random_rotation(rng), place(40 * big)
        for k in range(-2, 3):
            radii = np.array([2.5, rng.uniform(15, 40) * max(big, 0.4), rng.uniform(15, 40) * max(big, 0.4)])
            families["golgi"].append(Obj(ELL, 0, c=centre + rot[:, 0] * 7 * k, radii=radii, rot=rot))

    kept = {name: Family(name, objs if present[name] else []) for name, objs in families.items()}
    return Scene(crop.shape, kept, cells), present


def perturb(name: str, family: Family, rng, shape, instance: bool) -> Family:
    """The prediction of one family, perturbed as bench/cellmap_crop.py perturbs its crop."""
    objs = family.objects
    out: list[Obj] = []
    if not objs:
        return Family(name, [])
    next_id = max(o.id for o in objs) + 1
    if instance:
        from scipy.spatial import cKDTree

        centres = np.array([o.c for o in objs])
        tree = cKDTree(centres) if len(objs) > 1 else None
        jitter = 3 if name == "nuc" else 2
        for o in objs:
            roll = rng.random()
            if roll < 0.07:  # dropped
                continue
            if roll < 0.75 or tree is None:  # jittered
                out.append(o.shifted(rng.integers(-jitter, jitter + 1, 3)))
            elif roll < 0.85:  # split by a plane through the centre
                split = o.copy()
                split.split_n, split.split_id = unit(rng), next_id
                next_id += 1
                out.append(split)
            else:  # merged with the nearest other object through a bridge
                other = objs[int(tree.query(o.c, k=2)[1][1])]
                merged = o.copy()
                merged.id = other.id
                out.append(merged)
                out.append(Obj(TUBE, other.id, p0=o.c, p1=other.c, rad=1.5, inst_only=True))
    else:
        for o in objs:
            if rng.random() >= 0.05:
                out.append(o.shifted(rng.integers(-1, 2, 3)))
    for _ in range(len(objs) // 20):  # false positives
        r = rng.uniform(3, 6)
        out.append(Obj(ELL, next_id, c=rng.uniform(0, shape), radii=r * rng.uniform(0.8, 1.2, 3)))
        next_id += 1
    return Family(name, out)


def prediction_scene(truth: Scene, present: dict, crop: Crop, seed: int) -> Scene:
    families = {}
    shape = np.asarray(truth.shape, float)
    for index, (name, family) in enumerate(truth.families.items()):
        rng = np.random.default_rng([seed, crop.crop, 1, index])
        instance = any(label in INSTANCE for label, _ in LAYERS[name])
        fam = perturb(name, family, rng, shape, instance)
        if not present[name] and len(crop.labels) >= 40 and rng.random() < 0.3:  # predicted where there is none
            fam = Family(
                name,
                [Obj(ELL, i + 1, c=rng.uniform(0, shape), radii=rng.uniform(4, 10, 3)) for i in range(int(rng.integers(1, 6)))],
            )
        families[name] = fam
    cells = None
    if truth.cells is not None:
        rng = np.random.default_rng([seed, crop.crop, 1, 999])
        cells = Cells(
            truth.cells.seeds + rng.normal(0, 1.5, truth.cells.seeds.shape),
            truth.cells.gap * rng.uniform(0.9, 1.1),
            truth.cells.membrane,
        )
    return Scene(truth.shape, families, cells)


@dataclass(frozen=True)
class Submitted:
    label: str
    step: int  # 1, or 2: twice the crop's voxel size
    dtype: str


def submission_plan(crop: Crop, seed: int) -> dict[str, Submitted]:
    """Which labels the prediction holds, at which resolution and dtype."""
    rng = np.random.default_rng([seed, crop.crop, 2])
    plan = {}
    for label in crop.labels:
        missing = rng.random() < 0.08
        step = 2 if rng.random() < 0.10 else 1
        if label in INSTANCE:
            dtype = str(rng.choice(["uint64", "uint32", "uint16"], p=[0.4, 0.4, 0.2]))
        else:
            dtype = str(rng.choice(["uint8", "bool"], p=[0.7, 0.3]))
        if not missing:
            plan[label] = Submitted(label, step, dtype)
    return plan


def coarse_translation(crop: Crop, step: int) -> list[float]:
    """The translation of an array at ``step`` times the voxel size covering the crop: the
    centre of its first voxel. Checked against the suite's alignment (offset 0 voxels); if it
    were not, the crop's own translation is used."""
    translation = [t + v * (step - 1) / 2 for t, v in zip(crop.translation, crop.voxel_size)]
    try:
        from evaluation.alignment import Grid, voxel_offset

        grid = Grid(crop.voxel_size, crop.shape, crop.translation)
        if np.any(voxel_offset(np.asarray(translation), grid)):
            return list(crop.translation)
    except ImportError:
        pass
    return translation


# --------------------------------------------------------------------------------------------
# Rendering one chunk


class _Shape:
    """An object's implicit function on a sub-box of sample positions ``xs`` (one 1-D array per axis)."""

    def __init__(self, obj: Obj, xs):
        self.obj = obj
        u = [(x - np.float32(c)).reshape([-1 if a == k else 1 for a in range(3)]) for k, (x, c) in enumerate(zip(xs, obj.c))]
        self.u = u
        self._inside = {}
        if obj.kind == ELL:
            if obj.rot is None:
                self.v = u
            else:
                r = obj.rot.astype(np.float32)
                self.v = [r[0, j] * u[0] + r[1, j] * u[1] + r[2, j] * u[2] for j in range(3)]
        else:
            a = (obj.p1 - obj.p0).astype(np.float32)
            w = [(x - np.float32(p)).reshape(uu.shape) for x, p, uu in zip(xs, obj.p0, u)]
            length2 = float(a @ a) or 1e-9
            wa = a[0] * w[0] + a[1] * w[1] + a[2] * w[2]
            s = np.clip(wa / np.float32(length2), 0, 1)
            self.d2 = w[0] ** 2 + w[1] ** 2 + w[2] ** 2 - 2 * s * wa + s * s * np.float32(length2)

    def inside(self, t: float) -> np.ndarray | None:
        """Inside the shape shrunk by ``t`` voxels (None: empty)."""
        if t not in self._inside:
            obj = self.obj
            if obj.kind == ELL:
                radii = obj.radii - t
                if np.any(radii <= 0):
                    mask = None
                else:
                    q = sum((v / np.float32(r)) ** 2 for v, r in zip(self.v, radii))
                    mask = q <= 1
            else:
                r = obj.rad - t
                mask = self.d2 <= np.float32(r * r) if r > 0 else None
            if mask is not None:
                mask = np.broadcast_to(mask, self.full_shape())
            self._inside[t] = mask
        return self._inside[t]

    def full_shape(self):
        return tuple(max(a.shape[k] for a in self.u) for k in range(3))

    def bands(self, bands) -> np.ndarray | None:
        result = None
        for t1, t2 in bands:
            outer = self.inside(t1)
            if outer is None:
                continue
            inner = self.inside(t2) if t2 is not None else None
            mask = outer if inner is None else outer & ~inner
            result = mask if result is None else result | mask
        return result

    def side(self) -> np.ndarray:
        n = self.obj.split_n.astype(np.float32)
        return np.broadcast_to(n[0] * self.u[0] + n[1] * self.u[1] + n[2] * self.u[2] < 0, self.full_shape())


@dataclass(frozen=True)
class Constant:
    value: int


def render_block(scene: Scene, wanted: set[str], step: int, origin, extent, chunk) -> dict:
    """label -> array of the chunk (``chunk`` shape, zero beyond ``extent``) or Constant, for the
    labels in ``wanted``, sampled at fine positions ``step * (origin + i) + (step - 1) / 2``."""
    pmin = step * np.asarray(origin, float) + (step - 1) / 2
    pmax = pmin + step * (np.asarray(extent) - 1)
    out: dict[str, np.ndarray] = {}

    def array(label):
        if label not in out:
            out[label] = np.zeros(chunk, np.uint32 if label in INSTANCE else np.uint8)
        return out[label]

    cell_labels = [label for label in CELL_LABELS if label in wanted]
    occupied = np.zeros(chunk, bool) if "cyto" in wanted else None
    for name, family in scene.families.items():
        layers = [(label, bands) for label, bands in LAYERS[name] if label in wanted]
        occupies = occupied is not None and name in OCCUPIES
        if not len(family) or not (layers or occupies):
            continue
        hits = np.nonzero(np.all(family.hi >= pmin, axis=1) & np.all(family.lo <= pmax, axis=1))[0]
        for index in hits:
            obj = family.objects[index]
            low = np.clip(np.ceil((obj.lo - pmin) / step), 0, extent).astype(int)
            high = np.clip(np.floor((obj.hi - pmin) / step) + 1, 0, extent).astype(int)
            if np.any(high <= low):
                continue
            xs = [np.float32(pmin[k]) + np.float32(step) * np.arange(low[k], high[k], dtype=np.float32) for k in range(3)]
            shape = _Shape(obj, xs)
            box = tuple(slice(a, b) for a, b in zip(low, high))
            for label, bands in layers:
                instance = label in INSTANCE
                if obj.inst_only and not instance:
                    continue
                mask = shape.bands(SOLID if instance else bands)
                if mask is None:
                    continue
                view = array(label)[box]
                if not instance:
                    view[mask] = 1
                elif obj.split_n is not None:
                    side = shape.side()
                    view[mask & ~side] = obj.id
                    view[mask & side] = obj.split_id
                else:
                    view[mask] = obj.id
            if occupies and not obj.inst_only:
                solid = shape.inside(0.0)
                if solid is not None:
                    occupied[box] |= solid

    if cell_labels:
        inner = tuple(slice(0, e) for e in extent)
        cells = scene.cells
        constant = None
        if cells is None:
            constant = -1  # no cells: everything is cytosol (never the case in the manifest)
        else:
            centre = (pmin + pmax) / 2
            half_diagonal = float(np.linalg.norm((pmax - pmin) / 2)) + step
            margins = cells.margins_at(centre)
            if margins.max() - half_diagonal >= cells.gap / 2 + cells.membrane:
                constant = int(margins.argmax()) + 1
            elif margins.max() + half_diagonal < cells.gap / 2:
                constant = 0
        if constant is not None:
            if "cell" in wanted and constant > 0:
                out["cell"] = Constant(constant)
            if "ecs" in wanted and constant == 0:
                out["ecs"] = Constant(1)
            if "cyto" in wanted and constant != 0:
                cyto = array("cyto")
                cyto[inner] = ~occupied[inner]
        else:
            which, margin = cells.block(
                [np.float32(pmin[k]) + np.float32(step) * np.arange(extent[k], dtype=np.float32) for k in range(3)],
                cells.gap / 2 + cells.membrane,
            )
            in_cell = margin >= np.float32(cells.gap / 2)
            pm = in_cell & (margin < np.float32(cells.gap / 2 + cells.membrane))
            if "cell" in wanted:
                array("cell")[inner] = np.where(in_cell, which + 1, 0)
            if "ecs" in wanted:
                array("ecs")[inner] = ~in_cell
            if "pm" in wanted:
                array("pm")[inner] = pm
            if "cyto" in wanted:
                array("cyto")[inner] = in_cell & ~pm & ~occupied[inner]
    return out


# --------------------------------------------------------------------------------------------
# Generation: metadata in the parent, chunks in forked workers

_STATE: dict = {}


@dataclass(frozen=True)
class Pass:
    """One rendering of one crop: the truth, or the labels of the prediction at one step."""

    crop: int
    side: str  # "truth" or "pred"
    step: int
    shape: tuple[int, ...]  # of the arrays (the crop's shape / step)
    chunks: tuple[int, ...]  # the chunk edge, or the array's extent where it is smaller
    labels: tuple[tuple[str, str, str], ...]  # (label, dtype, array folder)


def _compressor():
    import numcodecs

    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def _render_task(task):
    import numcodecs

    numcodecs.blosc.set_nthreads(1)
    key, coords = task
    p: Pass = _STATE["passes"][key]
    scene: Scene = _STATE["scenes"][(p.crop, p.side)]
    chunks = p.chunks
    started = time.perf_counter()
    origin = tuple(c * k for c, k in zip(coords, chunks))
    extent = tuple(min(k, n - o) for k, n, o in zip(chunks, p.shape, origin))
    wanted = {label for label, _, _ in p.labels}
    blocks = render_block(scene, wanted, p.step, origin, extent, chunks)
    codec = _compressor()
    cache = _STATE.setdefault("constants", {})
    written = stored = 0
    nonzero = {}
    inner = tuple(slice(0, e) for e in extent)
    for label, dtype, folder in p.labels:
        block = blocks.get(label)
        if block is None:
            continue
        if isinstance(block, Constant):
            ckey = (dtype, block.value, extent, chunks)
            if ckey not in cache:
                full = np.zeros(chunks, dtype)
                full[inner] = block.value
                cache[ckey] = codec.encode(full)
            data, count = cache[ckey], math.prod(extent)
        else:
            count = int(np.count_nonzero(block[inner]))
            if not count:
                continue  # no empty chunks
            data = codec.encode(np.ascontiguousarray(block.astype(dtype, copy=False)))
        nonzero[label] = count
        target = Path(folder) / str(coords[0]) / str(coords[1])
        target.mkdir(parents=True, exist_ok=True)
        (target / str(coords[2])).write_bytes(data)
        written += 1
        stored += len(data)
    return key, written, stored, nonzero, time.perf_counter() - started


def _stamp_of(crop: Crop, seed: int, scale: float, chunk: int) -> dict:
    return {
        "generator": GEN_VERSION,
        "seed": seed,
        "scale": scale,
        "chunk": chunk,
        "crop": crop.crop,
        "shape": list(crop.shape),
        "labels": list(crop.labels),
    }


def store_folder(cache: Path, seed: int, scale: float, chunk: int) -> Path:
    return cache / f"g{GEN_VERSION}-seed{seed}-scale{scale:g}-chunk{chunk}"


def generate(crops: list[Crop], store: Path, seed: int, scale: float, chunk: int, jobs: int) -> dict:
    import zarr

    truth_root, pred_root, stamps = store / "truth.zarr", store / "submission.zarr", store / "stamps"
    stamps.mkdir(parents=True, exist_ok=True)
    todo = []
    for crop in crops:
        stamp = stamps / f"crop{crop.crop}.json"
        if stamp.exists():
            recorded = json.loads(stamp.read_text())
            if {k: recorded.get(k) for k in _stamp_of(crop, seed, scale, chunk)} == _stamp_of(crop, seed, scale, chunk):
                continue
            stamp.unlink()
        todo.append(crop)
    if not todo:
        print(f"generation: all {len(crops)} crops cached in {store}")
        return {}

    started, cpu = time.perf_counter(), os.times()
    scenes, passes, tasks, info = {}, {}, [], {}
    for root in (truth_root, pred_root):
        zarr.open_group(str(root), mode="a", zarr_format=2)
    for crop in todo:
        for root in (truth_root, pred_root):
            shutil.rmtree(root / f"crop{crop.crop}", ignore_errors=True)
        truth, present = truth_scene(crop, seed, scale)
        pred = prediction_scene(truth, present, crop, seed)
        scenes[(crop.crop, "truth")], scenes[(crop.crop, "pred")] = truth, pred
        submitted = submission_plan(crop, seed)
        info[crop.crop] = {
            "objects": {n: len(f) for n, f in truth.families.items() if len(f)},
            "absent_families": sorted(n for n, p in present.items() if not p),
            "missing_labels": sorted(set(crop.labels) - set(submitted)),
            "coarse_labels": sorted(s.label for s in submitted.values() if s.step == 2),
            "pred_dtypes": {s.label: s.dtype for s in submitted.values()},
        }
        truth_group = zarr.open_group(str(truth_root), mode="a", zarr_format=2)
        pred_group = zarr.open_group(str(pred_root), mode="a", zarr_format=2)
        by_step: dict[int, list] = defaultdict(list)
        truth_labels = []
        for label in crop.labels:
            dtype = "uint32" if label in INSTANCE else "uint8"
            _create(
                truth_group,
                f"crop{crop.crop}/{label}",
                crop.shape,
                dtype,
                _chunks(crop.shape, chunk),
                {"voxel_size": list(crop.voxel_size), "translation": list(crop.translation), "shape": list(crop.shape)},
            )
            truth_labels.append((label, dtype, str(truth_root / f"crop{crop.crop}" / label)))
            if label in submitted:
                s = submitted[label]
                shape = tuple(n // s.step for n in crop.shape)
                _create(
                    pred_group,
                    f"crop{crop.crop}/{label}",
                    shape,
                    s.dtype,
                    _chunks(shape, chunk),
                    {"voxel_size": [v * s.step for v in crop.voxel_size], "translation": coarse_translation(crop, s.step)},
                )
                by_step[s.step].append((label, s.dtype, str(pred_root / f"crop{crop.crop}" / label)))
        groups = [("truth", 1, crop.shape, truth_labels)]
        groups += [("pred", step, tuple(n // step for n in crop.shape), labels) for step, labels in sorted(by_step.items())]
        for side, step, shape, labels in groups:
            key = (crop.crop, side, step)
            chunks = _chunks(shape, chunk)
            passes[key] = Pass(crop.crop, side, step, shape, chunks, tuple(labels))
            grid = [range(-(-n // k)) for n, k in zip(shape, chunks)]
            tasks += [(key, (z, y, x)) for z in grid[0] for y in grid[1] for x in grid[2]]
    setup = time.perf_counter() - started
    print(
        f"generation: {len(todo)} crops to render, {len(tasks)} chunk tasks, scenes and metadata {setup:.1f} s  [{load()}]",
        flush=True,
    )

    _STATE.update(scenes=scenes, passes=passes)
    remaining = defaultdict(int)
    for key, _ in tasks:
        remaining[key[0]] += 1
    totals = defaultdict(lambda: {"chunks": 0, "bytes": 0, "seconds": 0.0, "nonzero": defaultdict(int)})
    # the largest crops first, so that the two workers finish together
    tasks.sort(key=lambda t: -next(c.voxels for c in todo if c.crop == t[0][0]))
    context = multiprocessing.get_context("fork")
    done = 0
    with context.Pool(jobs) as pool:
        for key, written, stored, nonzero, seconds in pool.imap_unordered(_render_task, tasks, chunksize=4):
            crop_id, side = key[0], key[1]
            t = totals[(crop_id, side)]
            t["chunks"] += written
            t["bytes"] += stored
            t["seconds"] += seconds
            for label, count in nonzero.items():
                t["nonzero"][label] += count
            remaining[crop_id] -= 1
            done += 1
            if remaining[crop_id] == 0:
                crop = next(c for c in todo if c.crop == crop_id)
                record = {
                    **_stamp_of(crop, seed, scale, chunk),
                    **info[crop_id],
                    "truth": _jsonable(totals[(crop_id, "truth")]),
                    "pred": _jsonable(totals[(crop_id, "pred")]),
                }
                (stamps / f"crop{crop_id}.json").write_text(json.dumps(record, indent=1))
                print(
                    f"  crop {crop_id} done ({done}/{len(tasks)} tasks, {time.perf_counter() - started:.0f} s)  [{load()}]",
                    flush=True,
                )
        pool.close()
        pool.join()  # workers reaped: their CPU time counts in os.times().children_*
    _STATE.clear()
    wall = time.perf_counter() - started
    end = os.times()
    cpu_seconds = (end.user + end.system + end.children_user + end.children_system) - (
        cpu.user + cpu.system + cpu.children_user + cpu.children_system
    )
    return {"seconds": wall, "cpu_seconds": cpu_seconds, "tasks": len(tasks), "crops": [c.crop for c in todo]}


def _jsonable(totals: dict) -> dict:
    return {
        "chunks": totals["chunks"],
        "bytes": totals["bytes"],
        "seconds": round(totals["seconds"], 3),
        "nonzero": dict(totals["nonzero"]),
    }


def _chunks(shape, chunk: int) -> tuple[int, ...]:
    """Chunks of at most ``chunk`` voxels per axis that split each axis evenly (600 -> 5 x 120,
    140 -> 2 x 70), so that the chunk grid hardly pads the array. A cubic 128 grid would pad a
    140 x 400 x 400 array to 2.99 times its size, and ``evaluation.readers.zarr_store`` refuses
    a grid covering more than twice the array's bytes plus 64 MiB: a uint64 prediction of crop
    982 (or of a 150^3 crop at --scale 0.25) would be rejected before any scoring."""
    return tuple(-(-n // -(-n // chunk)) for n in shape)


def _create(group, name: str, shape, dtype: str, chunks, attrs: dict) -> None:
    group.create_array(
        name,
        shape=tuple(shape),
        dtype=dtype,
        chunks=tuple(chunks),
        compressors=_compressor(),
        fill_value=False if dtype == "bool" else 0,
        chunk_key_encoding={"name": "v2", "separator": "/"},
        attributes=attrs,
        overwrite=True,
    )


def folder_size(path: Path) -> tuple[int, int]:
    """(bytes on disk, files)"""
    total = files = 0
    for current, _dirs, names in os.walk(path):
        for name in names:
            st = os.lstat(os.path.join(current, name))
            total += st.st_blocks * 512
            files += 1
    return total, files


# --------------------------------------------------------------------------------------------
# A view of the cache holding the selected crops (hard links), as the CLI reads it


def _link_tree(source: Path, target: Path) -> int:
    count = 0
    for current, _dirs, names in os.walk(source):
        relative = Path(current).relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in names:
            os.link(Path(current) / name, target / relative / name)
            count += 1
    return count


def view_folder(store: Path, crops: list[Crop], all_crops: bool, version: str) -> Path:
    return store / "views" / (("all" if all_crops else "-".join(str(c.crop) for c in crops)) + f"-{version}")


def build_view(store: Path, crops: list[Crop], all_crops: bool, version: str) -> tuple[Path, Path]:
    view = view_folder(store, crops, all_crops, version)
    shutil.rmtree(view, ignore_errors=True)
    phase, submission = view / "phase", view / "input" / "submission.zarr"
    for source, target in ((store / "truth.zarr", phase / "truth.zarr"), (store / "submission.zarr", submission)):
        target.mkdir(parents=True)
        for meta in (".zgroup", ".zattrs"):
            if (source / meta).exists():
                shutil.copy(source / meta, target / meta)
        for crop in crops:
            _link_tree(source / f"crop{crop.crop}", target / f"crop{crop.crop}")
    lines = ["crop_name,dataset,class_label,voxel_size,translation,shape"]
    for crop in crops:
        shape = "[" + ";".join(str(n) for n in crop.shape) + "]"
        lines += [
            f"{crop.crop},{crop.dataset},{label},{crop.voxel_size_text},{crop.translation_text},{shape}" for label in crop.labels
        ]
    (phase / "manifest.csv").write_text("\n".join(lines) + "\n")
    (phase / "phase.yaml").write_text(
        "# bench/cellmap_test_set.py: the CellMap test set's crops and labels, synthetic content\n"
        "suite: cellmap\n" + ("" if version == "v2" else f"version: {version}\n")
    )
    return phase, submission.parent


# --------------------------------------------------------------------------------------------
# The floor: every stored array of truth and submission decoded once


def decoding_floor(phase: Path, inputs: Path, crops: list[Crop]) -> dict:
    from evaluation.errors import GraderError
    from evaluation.readers import zarr_store

    results = defaultdict(lambda: {"seconds": 0.0, "cpu": 0.0, "bytes": 0, "voxels": 0})
    pairs: dict[tuple[int, str], float] = {}
    for crop in crops:
        for side, root in (("truth", phase / "truth.zarr"), ("pred", inputs / "submission.zarr")):
            folder = root / f"crop{crop.crop}"
            for label in zarr_store.array_names(folder):
                started, cpu = time.perf_counter(), time.process_time()
                try:
                    array = zarr_store.open_array(folder / label, f"{side}/crop{crop.crop}/{label}")
                    nbytes = _read_all(array)
                except (GraderError, OSError) as exc:  # reported, not fatal: the CLI's own log says what it made of it
                    print(f"  floor: {side}/crop{crop.crop}/{label} cannot be read: {exc}")
                    continue
                r = results[(crop.crop, side, "instance" if label in INSTANCE else "semantic")]
                pairs[(crop.crop, label)] = pairs.get((crop.crop, label), 0.0) + time.perf_counter() - started
                r["seconds"] += time.perf_counter() - started
                r["cpu"] += time.process_time() - cpu
                r["bytes"] += nbytes
                r["voxels"] += array.size
    results["pairs"] = pairs
    return results


def _read_all(array, budget: int = 256 << 20) -> int:
    """Decode every chunk once, in slabs one chunk high (split along y to stay within ``budget``)."""
    z_step, y_chunk = array.chunks[0], array.chunks[1]
    row_bytes = z_step * array.shape[2] * array.dtype.itemsize
    y_step = max(y_chunk, (budget // max(1, row_bytes)) // y_chunk * y_chunk)
    total = 0
    for z in range(0, array.shape[0], z_step):
        for y in range(0, array.shape[1], y_step):
            block = array.read((slice(z, z + z_step), slice(y, y + y_step)))
            total += block.nbytes
            del block
    return total


# --------------------------------------------------------------------------------------------
# Scoring through the CLI


def run_cli(phase: Path, inputs: Path, output: Path, workers: int, limit: int) -> dict:
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    log_path = output.parent / (output.name + ".log.jsonl")
    command = [
        "prlimit",
        f"--data={limit}",
        sys.executable,
        "-m",
        "evaluation",
        "--input",
        str(inputs),
        "--ground-truth",
        str(phase),
        "--output",
        str(output),
        "--workers",
        str(workers),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
    }
    loads, stop = [], threading.Event()

    def sample():
        while not stop.wait(5.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    with open(log_path, "w") as log:
        load_before = os.getloadavg()
        started = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=str(ROOT))
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
    run = {
        "wall": wall,
        "cpu_user": usage.ru_utime,
        "cpu_system": usage.ru_stime,
        "exit": process.returncode,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "load_max": max(loads, default=float("nan")),
        "load_mean": float(np.mean(loads)) if loads else float("nan"),
    }
    (output.parent / (output.name + ".run.json")).write_text(json.dumps(run))
    return load_run(output)


def load_run(output: Path) -> dict:
    """A scoring run's figures (``<output>.run.json``) and its parsed log (``<output>.log.jsonl``)."""
    run = json.loads((output.parent / (output.name + ".run.json")).read_text())
    log_path = output.parent / (output.name + ".log.jsonl")
    events, plain = [], []
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            plain.append(line)
    return {**run, "events": events, "plain": plain, "log": log_path}


def save_floor(floor: dict, path: Path) -> None:
    rows = [{"key": list(k), **v} for k, v in floor.items() if k != "pairs"]
    pairs = [{"crop": c, "label": label, "seconds": v} for (c, label), v in floor["pairs"].items()]
    path.write_text(json.dumps({"rows": rows, "pairs": pairs}))


def read_floor(path: Path) -> dict:
    data = json.loads(path.read_text())
    floor = {tuple(r.pop("key")): r for r in data["rows"]}
    floor["pairs"] = {(p["crop"], p["label"]): p["seconds"] for p in data["pairs"]}
    return floor


def report(crops: list[Crop], scored: dict, floor: dict | None, store: Path) -> None:
    events = scored["events"]
    finished = [e for e in events if e.get("event") == "task_finished"]
    failed = [e for e in events if e.get("event") == "case_failed"]
    written = next((e for e in events if e.get("event") == "written"), {})
    resources = next((e for e in events if e.get("event") == "resources"), {})
    crashed = [e for e in events if e.get("event") in ("internal_error", "phase_or_grader_error", "task_exception")]
    print()
    print(
        f"CLI (prlimit --data={GRAND_CHALLENGE_DATA_LIMIT}, --workers 2): exit {scored['exit']}, "
        f"wall {scored['wall']:.1f} s, CPU {scored['cpu_user']:.1f} s user + {scored['cpu_system']:.1f} s system "
        f"(CLI and its workers)  [load before {scored['load_before'][0]:.2f}, during mean {scored['load_mean']:.2f} "
        f"max {scored['load_max']:.2f}, after {scored['load_after'][0]:.2f}]"
    )
    print(
        f"  budget {resources.get('memory_budget_mb')} MB for {resources.get('workers')} workers (limits {resources.get('limits_mb')}); "
        f"tasks run {len(finished)}, failed or refused {len(failed)}; largest worker peak {written.get('worker_peak_rss_mb')} MB, "
        f"main process peak {written.get('peak_rss_mb')} MB"
    )
    for e in crashed:
        print(f"  {e.get('event')}: {json.dumps({k: v for k, v in e.items() if k not in ('timestamp',)})[:600]}")
    if scored["plain"]:
        print(f"  last stderr line: {scored['plain'][-1][:300]}")
    print(f"  log: {scored['log']}")

    by_crop = defaultdict(list)
    for e in finished:
        by_crop[int(e["task"].split("/")[0].removeprefix("crop"))].append(e)
    failures = defaultdict(list)
    for e in failed:
        failures[int(e["case"].split("/")[0].removeprefix("crop"))].append(e)
    print()
    header = (
        f"{'crop':>5} {'shape':>14} {'voxel nm':>15} {'labels':>6} {'run':>4} {'ok':>4} {'refused':>7} "
        f"{'task s':>8} {'max s':>7} {'max peak MB':>11} {'max est MB':>10} {'floor s':>8} {'floor GB':>8}"
    )
    print(header)
    sums = defaultdict(float)
    for crop in crops:
        tasks = by_crop.get(crop.crop, [])
        seconds = sum(e["seconds"] for e in tasks)
        peaks = [e["peak_rss_mb"] for e in tasks if e.get("peak_rss_mb") is not None]
        estimates = [e["estimate_mb"] for e in tasks]
        fl = [v for key, v in (floor or {}).items() if key != "pairs" and key[0] == crop.crop]
        fs, fb = sum(v["seconds"] for v in fl), sum(v["bytes"] for v in fl)
        ok = sum(1 for e in tasks if e.get("ok"))
        sums["seconds"] += seconds
        sums["floor"] += fs
        print(
            f"{crop.crop:>5} {'x'.join(map(str, crop.shape)):>14} {'/'.join(f'{v:g}' for v in crop.voxel_size):>15} "
            f"{len(crop.labels):>6} {len(tasks):>4} {ok:>4} {len(failures.get(crop.crop, [])):>7} {seconds:>8.1f} "
            f"{max((e['seconds'] for e in tasks), default=0):>7.1f} {max(peaks, default=0):>11} {max(estimates, default=0):>10} "
            f"{fs:>8.1f} {fb / 1e9:>8.1f}"
        )
    print(
        f"{'all':>5} {'':>14} {'':>15} {sum(len(c.labels) for c in crops):>6} {len(finished):>4} "
        f"{sum(1 for e in finished if e.get('ok')):>4} {len(failed):>7} {sums['seconds']:>8.1f} {'':>7} "
        f"{max((e.get('peak_rss_mb') or 0 for e in finished), default=0):>11} {'':>10} {sums['floor']:>8.1f}"
    )

    if finished:
        print()
        print("slowest tasks (seconds, worker peak MB, scheduler estimate MB; estimate + 200 MB baseline should bound the peak):")
        for e in sorted(finished, key=lambda e: -e["seconds"])[:12]:
            print(
                f"  {e['task']:<24} {e['seconds']:>7.1f} s  peak {e.get('peak_rss_mb')!s:>6} MB  estimate {e['estimate_mb']:>6} MB  ok={e.get('ok')}"
            )
        over = [e for e in finished if e.get("peak_rss_mb") is not None and e["peak_rss_mb"] > e["estimate_mb"] + 200]
        ratios = [e["peak_rss_mb"] / max(1, e["estimate_mb"] + 200) for e in finished if e.get("peak_rss_mb")]
        print(
            f"  peak / (estimate + 200 MB): median {np.median(ratios):.2f}, max {max(ratios):.2f}; "
            f"{len(over)} task(s) above their estimate" + (": " + ", ".join(e["task"] for e in over[:10]) if over else "")
        )
    if finished:
        coarse = set()
        for crop in crops:
            stamp = store / "stamps" / f"crop{crop.crop}.json"
            if stamp.exists():
                coarse |= {(crop.crop, label) for label in json.loads(stamp.read_text()).get("coarse_labels", [])}
        classes = defaultdict(list)
        for e in finished:
            crop_id, label = int(e["task"].split("/")[0].removeprefix("crop")), e["task"].split("/")[1]
            kind = "instance" if label in INSTANCE else "semantic"
            classes[(kind, "resampled x2" if (crop_id, label) in coarse else "native")].append(e)
        print()
        print("by kind (prediction at the crop's voxel size, or at twice it and resampled by the suite):")
        print(
            f"  {'kind':<9} {'grid':<13} {'tasks':>5} {'sum s':>8} {'median s':>8} {'max s':>7} {'s per G voxel':>13} "
            f"{'peak/(est+200) median':>21} {'max':>5}"
        )
        voxels = {c.crop: c.voxels for c in crops}
        for (kind, grid), items in sorted(classes.items()):
            seconds = [e["seconds"] for e in items]
            ratios = [e["peak_rss_mb"] / (e["estimate_mb"] + 200) for e in items if e.get("peak_rss_mb")]
            gvox = sum(voxels[int(e["task"].split("/")[0].removeprefix("crop"))] for e in items) / 1e9
            print(
                f"  {kind:<9} {grid:<13} {len(items):>5} {sum(seconds):>8.1f} {np.median(seconds):>8.1f} {max(seconds):>7.1f} "
                f"{sum(seconds) / max(gvox, 1e-9):>13.1f} {np.median(ratios) if ratios else float('nan'):>21.2f} "
                f"{max(ratios, default=float('nan')):>5.2f}"
            )
    if failed:
        print()
        print("refused or failed tasks:")
        kinds = defaultdict(list)
        for e in failed:
            kinds[e.get("kind")].append(e)
        for kind, items in kinds.items():
            print(f"  {kind}: {len(items)}")
        for e in sorted(failed, key=lambda e: (int(e["case"].split("/")[0].removeprefix("crop")), e["case"])):
            print(f"  {e['case']:<24} {e.get('kind')}: {e.get('message')}")
        needs = [float(m.group(1)) for e in failed for m in [re.search(r"about ([0-9.]+) GiB", e.get("message") or "")] if m]
        if needs:
            print(
                f"  memory refusals: {len(needs)}, needing {min(needs):.1f}-{max(needs):.1f} GiB (median {np.median(needs):.1f})"
            )

    if floor:
        print()
        print(
            f"decoding floor (evaluation.readers.zarr_store, every stored array read once in chunk slabs, one process; {load()}):"
        )
        floor_pairs = floor.pop("pairs", {})
        for side in ("truth", "pred"):
            for kind in ("instance", "semantic"):
                items = [v for (c, s, k), v in floor.items() if s == side and k == kind]
                print(
                    f"  {side:<5} {kind:<8} {sum(v['seconds'] for v in items):8.1f} s wall {sum(v['cpu'] for v in items):8.1f} s CPU "
                    f"{sum(v['voxels'] for v in items) / 1e9:7.2f} G voxels {sum(v['bytes'] for v in items) / 1e9:7.1f} GB decoded"
                )
        total = sum(v["seconds"] for v in floor.values())
        print(f"  all {total:.1f} s; CLI wall / floor = {scored['wall'] / max(total, 1e-9):.1f}x")
        # per kind, over the (crop, label) pairs the CLI scored: summed task seconds vs the floor of those arrays
        for kind in ("semantic", "instance"):
            ran = [e for e in finished if e.get("ok") and (e["task"].split("/")[1] in INSTANCE) == (kind == "instance")]
            pairs = {(int(e["task"].split("/")[0].removeprefix("crop")), e["task"].split("/")[1]) for e in ran}
            floor_s = sum(v for (c, label), v in floor_pairs.items() if (c, label) in pairs)
            task_s = sum(e["seconds"] for e in ran)
            print(
                f"  {kind} pairs scored: {len(ran)}, summed task seconds {task_s:.1f} s vs their floor {floor_s:.1f} s "
                f"(truth + prediction decoded once) = {task_s / max(floor_s, 1e-9):.1f}x"
            )


# --------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crops", help="comma-separated crop ids (default: all 16)")
    parser.add_argument("--scale", type=float, default=1.0, help="shrink every shape by this factor (kept even, at least 8)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=128, help="largest zarr chunk edge (voxels); each axis is split evenly")
    parser.add_argument("--jobs", type=int, default=2, help="generator processes")
    parser.add_argument("--version", choices=["v2", "head"], default="v2", help="the suite's reference version (phase option)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", type=int, default=GRAND_CHALLENGE_DATA_LIMIT, help="prlimit --data for the CLI (bytes)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--generate-only", action="store_true")
    mode.add_argument("--score-only", action="store_true", help="score what the cache holds (fails if a crop is missing)")
    mode.add_argument(
        "--rereport",
        action="store_true",
        help="print the figures of the last scoring run of these crops again (its log, run.json and floor.json), without scoring",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip the decoding floor")
    args = parser.parse_args()

    import hashlib

    if hashlib.sha256(MANIFEST.read_bytes()).hexdigest() != MANIFEST_SHA256:
        raise SystemExit(f"{MANIFEST} differs from the reference manifest (sha256)")
    manifest = read_manifest(args.scale)
    unknown = {label for c in manifest.values() for label in c.labels} - PRODUCIBLE
    if unknown:
        raise SystemExit(f"labels this generator cannot produce: {sorted(unknown)}")
    if args.crops:
        wanted = [int(c) for c in args.crops.split(",")]
        missing = [c for c in wanted if c not in manifest]
        if missing:
            raise SystemExit(f"crops not in the manifest: {missing}; crops: {sorted(manifest)}")
        crops = [manifest[c] for c in wanted]
    else:
        crops = list(manifest.values())
    store = store_folder(args.cache, args.seed, args.scale, args.chunk)
    label_voxels = sum(c.voxels * len(c.labels) for c in crops)
    print(
        f"{len(crops)} crops, {sum(len(c.labels) for c in crops)} labels, {label_voxels / 1e9:.2f} G label-voxels "
        f"(scale {args.scale:g}); cache {store}; evaluation from {ROOT}  [{load()}]"
    )

    if not (args.score_only or args.rereport):
        generated = generate(crops, store, args.seed, args.scale, args.chunk, args.jobs)
        if generated:
            size, files = folder_size(store / "truth.zarr")
            psize, pfiles = folder_size(store / "submission.zarr")
            print(
                f"generation: {generated['seconds']:.1f} s wall, {generated['cpu_seconds']:.1f} s CPU, {generated['tasks']} chunk tasks "
                f"with {args.jobs} processes  [{load()}]"
            )
            print(
                f"  cache now holds truth {size / 1e9:.2f} GB in {files} files, submission {psize / 1e9:.2f} GB in {pfiles} files"
            )
        for crop in crops:
            stamp = json.loads((store / "stamps" / f"crop{crop.crop}.json").read_text())
            truth, pred = stamp["truth"], stamp["pred"]
            nonempty = sum(1 for v in truth["nonzero"].values() if v)
            fg = sum(truth["nonzero"].values()) / max(1, crop.voxels * len(crop.labels))
            print(
                f"  crop {crop.crop:>4} {'x'.join(map(str, crop.shape)):>13}: {len(crop.labels)} labels, {nonempty} non-empty in truth "
                f"({fg:.1%} of label-voxels set), chunks truth {truth['chunks']} ({truth['bytes'] / 1e6:.0f} MB) / pred "
                f"{pred['chunks']} ({pred['bytes'] / 1e6:.0f} MB); missing {len(stamp['missing_labels'])}, coarse {len(stamp['coarse_labels'])}, "
                f"absent families {','.join(stamp['absent_families']) or '-'}"
            )
    if args.generate_only:
        return
    for crop in crops:
        if not (store / "stamps" / f"crop{crop.crop}.json").exists():
            raise SystemExit(f"crop {crop.crop} is not generated in {store}; run without --score-only")

    all_crops = len(crops) == len(manifest)
    if args.rereport:
        view = view_folder(store, crops, all_crops, args.version)
        phase, inputs = view / "phase", view / "input"
        scored = load_run(view / "output")
        print(f"figures of the last scoring run in {view}")
    else:
        phase, inputs = build_view(store, crops, all_crops, args.version)
        print(f"scoring {phase.parent} (view of hard links)  [{load()}]", flush=True)
        scored = run_cli(phase, inputs, phase.parent / "output", args.workers, args.memory_limit)
    floor, floor_file = None, phase.parent / "floor.json"
    if args.rereport and floor_file.exists():
        floor = read_floor(floor_file)
    elif not args.no_floor:
        print(f"decoding floor ...  [{load()}]", flush=True)
        started = time.perf_counter()
        floor = decoding_floor(phase, inputs, crops)
        save_floor(floor, floor_file)
        print(f"decoding floor done in {time.perf_counter() - started:.1f} s  [{load()}]")
    report(crops, scored, floor, store)


if __name__ == "__main__":
    main()
