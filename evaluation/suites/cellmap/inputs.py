"""CellMap's inputs: the crop manifest, the submitted zarr, its crops and labels, the tasks
(one per submitted (crop, label)) and the arrays a task reads.

Discovery follows ``utils/eval_utils/submission.py`` (``ensure_valid_submission``,
``_discover_volumes``, ``missing_volume_score``) and ``scoring.py`` ``score_label``: every
array of every truth crop is scored; a truth label the submission does not hold as an array
is scored as not submitted.
"""

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import log, machine, public
from evaluation.contract import Payload, Plan, Task
from evaluation.errors import PhaseError, SubmissionError, Unusable, organizer_file
from evaluation.metrics import jit, label_stats
from evaluation.metrics.hausdorff import planning as hausdorff_planning
from evaluation.metrics.hausdorff import scans as hausdorff_scans
from evaluation.phase import Phase
from evaluation.readers import untrusted, zarr_store
from evaluation.readers.slabs import SLAB_VOXELS, slab_bounds, slices_per_slab
from evaluation.submission import Submission
from evaluation.suites.cellmap import alignment, linear, volumes
from evaluation.suites.cellmap.alignment import Grid, aligned, resampling
from evaluation.suites.cellmap.options import INSTANCE_CLASSES, Limits, Options
from evaluation.suites.cellmap.versions import Version

_log = log.get(__name__)


@dataclass(frozen=True)
class Pair(Payload):
    """One submitted (crop, label) against its truth array, with what scoring it needs."""

    crop: str
    label: str
    display: str  # the submitted array as the participant names it
    truth: Path
    pred: Path
    mask: Path | None  # the truth crop's ``<label>_mask`` array, if any
    grid: Grid  # the manifest row: the target voxel grid
    instance: bool
    version: str
    limits: Limits
    pathological_crops: str


@dataclass(frozen=True)
class Context:
    """What ``summarize`` needs besides the outcomes: the options, the entries of labels no
    task scores (not submitted, or without a manifest row) and the manifest's row count."""

    options: Options
    fixed: dict[str, dict[str, dict]]  # crop -> label -> entry
    total_evals: int


# --------------------------------------------------------------------------------------------
# Finding the crops


def read_manifest(path: Path) -> dict[tuple[int, str], Grid]:
    """The test-crop manifest (``utils/crops.py`` ``TestCropRow.from_csv_row``): header dropped,
    ``;``-separated bracketed lists, keyed by (crop id, label); a repeated key keeps its last row."""
    rows = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
    except OSError as exc:
        raise PhaseError(f"cannot read the crop manifest: {exc}") from None
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        try:
            crop, _dataset, label, voxel_size, translation, shape = line.split(",")
            parse = lambda text, kind: tuple(kind(x) for x in text.strip().strip("[]").split(";"))  # noqa: E731
            rows[(int(crop), label)] = Grid(parse(voxel_size, float), parse(shape, int), parse(translation, float))
        except ValueError:
            raise PhaseError(f"crop manifest line {number} is malformed") from None
    return rows


def find_zarr_root(folder: Path) -> Path:
    """The zarr inside an unpacked submission (``ensure_valid_submission``): the folder itself
    when it holds no ``*.zarr``, the single nested ``*.zarr`` otherwise."""
    nested = []
    for current, dirs, _files in os.walk(folder):
        for name in list(dirs):
            if name.endswith(".zarr"):
                nested.append(Path(current) / name)
                dirs.remove(name)  # a zarr's own chunks need no search
    if len(nested) > 1:
        names = ", ".join(sorted(p.name for p in nested)[:5])
        raise SubmissionError(f"the submission holds {len(nested)} zarr folders ({names}); submit exactly one")
    return nested[0] if nested else folder


def crop_id(name: str) -> int:
    try:
        return int(name.removeprefix("crop"))
    except ValueError:
        raise PhaseError(f"truth crop group {name!r} is not named crop<N>") from None


def crop_order(name: str) -> tuple[int, str]:
    """Crops in natural order (crop9 before crop10)."""
    return len(name), name


def subfolders(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")}


def match_crops(submitted: set[str], truth: set[str]) -> dict[str, str]:
    """Truth crop -> submitted folder. Only if no name matches, bare ids ('111') are tried
    as 'crop111' (``_discover_volumes``)."""
    found = {name: name for name in submitted & truth}
    if not found:
        found = {f"crop{name}": name for name in submitted if f"crop{name}" in truth}
    if not found:
        raise SubmissionError(
            "no test crop found in the submission: its top-level groups must be named after the test "
            "crops (e.g. 'crop123'), each holding one array per label"
        )
    return found


# --------------------------------------------------------------------------------------------
# The tasks

# The working set of one task (bytes beyond the worker's baseline), from what the passes hold
# (``volumes.py``, ``tiles.py``, ``scan.py``, ``metrics/hausdorff/``; checked against the measured peaks
# of ``bench/cellmap_crop.py``'s workloads, see ``bench/README.md``):
# - the instance pass holds one tile: the prediction (read, windowed, masked), cc3d's labels and
#   its union-find table, a boolean row map, the truth block and a copy of its labels:
#   INSTANCE_TILE_BYTES per voxel plus the arrays' own item sizes;
# - what it keeps of the whole crop (components, contingency rows, truth boxes) grows with the
#   number of objects, not with the voxels: PER_CROP_VOXEL bytes per crop voxel covers tens of
#   thousands of components per 10^8 voxels;
# - the distances: BOX_BYTES per voxel of a box of up to hausdorff.planning.BOX_VOXELS (truth
#   read, masks, points, k-d tree) in each of the task's threads, or the bit-packed masks of
#   larger boxes with their slabs, points kept between passes and boundary points (PACKED_DISTANCE_BYTES);
# - the semantic pass: two tiles of SEMANTIC_TILE_BYTES (reads and their comparisons);
# - decoding: up to two chunks in flight per thread (``zarr_store``).
# - the process itself (interpreter and libraries, forked from the grader): PROCESS_BYTES, so that
#   the estimate bounds the worker's whole peak as the runner logs it (its schedule adds its own
#   baseline on top: a little double counting, on the safe side).
PROCESS_BYTES = 256 << 20
INSTANCE_TILE_BYTES = 10
PER_CROP_VOXEL = 0.3
BOX_BYTES = 40
PACKED_DISTANCE_BYTES = 768 << 20
DECODE_THREADS = 4


def distance_bytes(target: int) -> int:
    """No box is larger than the crop: small crops need little (and never packed masks)."""
    threads = min(4, machine.cpu_count())
    if target <= hausdorff_planning.BOX_VOXELS:
        return threads * BOX_BYTES * target
    return max(threads * BOX_BYTES * hausdorff_planning.BOX_VOXELS, PACKED_DISTANCE_BYTES)


def _array_bytes(array) -> int:
    return int(np.prod(array.shape, dtype=np.float64)) * np.dtype(array.dtype).itemsize


def _chunk_bytes(array) -> int:
    chunks = getattr(array, "chunks", None) or array.shape
    return int(np.prod(chunks, dtype=np.float64)) * np.dtype(array.dtype).itemsize


def memory_estimate(grid: Grid, source, instance: bool, scale, truth=None, mask=None) -> int:
    """Peak bytes of one pair beyond the worker's baseline (added by the runner), an upper
    bound of what the streamed passes hold (see the constants above): it grows with the tile,
    not with the crop, except for the per-object bookkeeping; a resampled prediction adds its
    source array held as the float64 array scikit-image interpolates (and, for arrays above
    ``CHUNKED_LOADING_MIB``, the cache of resampled blocks)."""
    target = int(np.prod(grid.shape, dtype=np.float64))
    source_voxels = int(np.prod(source.shape, dtype=np.float64))
    itemsize = np.dtype(source.dtype).itemsize
    truth_item = np.dtype(truth.dtype).itemsize if truth is not None else 8
    mask_item = np.dtype(mask.dtype).itemsize if mask is not None else 0
    pred_item = itemsize if instance or scale is None else 1
    decode = 2 * DECODE_THREADS * max(_chunk_bytes(source), _chunk_bytes(truth) if truth is not None else 0)
    if instance:
        # chunk caches of the truth, the mask and the prediction, none above its array
        decode += sum(min(volumes.CACHE_BYTES, _array_bytes(a)) for a in (truth, mask, source) if a is not None)
        tile = min(target, volumes.TILE_VOXELS)
        per_voxel = INSTANCE_TILE_BYTES + 2 * pred_item + truth_item + 3 * mask_item + 8 * (mask_item > 0)
        estimate = tile * per_voxel + int(target * PER_CROP_VOXEL) + distance_bytes(target)
    else:
        estimate = 2 * volumes.SEMANTIC_TILE_BYTES
    estimate += decode + PROCESS_BYTES
    if scale is not None:
        if source_voxels * 4 / 1024**2 > alignment.CHUNKED_LOADING_MIB:
            block = alignment.CHUNK_EDGE**3
            estimate += alignment.BlockResampled.CACHE_BYTES + block * (itemsize + 16)
        else:
            estimate += source_voxels * (itemsize + 8)
    return estimate


def plan(submission: Submission, phase: Phase, options: Options, version: Version) -> Plan:
    """One task per submitted (crop, label) with a manifest row; every other truth label of
    every truth crop gets its not-submitted entry now (not on a public phase, which is never
    summarised: head's entry counts the truth's instances)."""
    public_phase = public.is_public(phase)
    truth_root = phase.path(options.truth)
    manifest = read_manifest(phase.path(options.manifest))
    if not truth_root.is_dir():
        raise PhaseError("the truth zarr named in phase.yaml does not exist")
    root = find_zarr_root(submission.root)
    if not subfolders(root):
        raise SubmissionError("the submission holds no zarr: upload a zarr folder (or a zip of one) with one group per test crop")
    truth_crops = sorted(subfolders(truth_root), key=crop_order)
    try:
        crops = match_crops(subfolders(root), set(truth_crops))
    except SubmissionError:
        if zarr_store.array_names(root):
            raise SubmissionError(
                "the top of the submission holds label arrays, not crop groups: a zip of a single crop loses the crop's "
                "name on Grand-Challenge, which removes the folders all files share; zip the whole .zarr folder with "
                "its root group file (.zgroup or zarr.json) beside the crop group"
            ) from None
        raise

    tasks, fixed, interpolated = [], {}, set()
    for crop in truth_crops:
        submitted = set(zarr_store.array_names(root / crops[crop])) if crop in crops else set()
        for label in zarr_store.array_names(truth_root / crop):
            grid = manifest.get((crop_id(crop), label))
            if label in submitted and grid is None:
                _log.warning("label_without_manifest_row", crop=crop, label=label)
            if label in submitted and grid is not None:
                tasks.append(_task(crop, label, root / crops[crop], truth_root / crop, grid, options, version, interpolated))
            else:
                instance = label in options.instance_classes
                entry = None if public_phase else _not_submitted(truth_root / crop / label, instance, grid, version)
                fixed.setdefault(crop, {})[label] = entry
    _log.info("cellmap_plan", crops=len(truth_crops), submitted_crops=len(crops), tasks=len(tasks))
    instance_tasks = [t for t in tasks if t.payload.instance and t.refusal is None]
    if instance_tasks and not public_phase:
        # loaded (or compiled, and said so) once here rather than in every forked worker: only
        # the truth dtypes the tasks read, the runs' painting only for crops of several tiles
        value_dtypes = {_truth_dtype(t.payload) for t in instance_tasks} - {None}
        tiled = any(int(np.prod(t.payload.grid.shape, dtype=np.float64)) > volumes.TILE_VOXELS for t in instance_tasks)
        hausdorff_scans.warm_up(background=True)  # compiled beside the label statistics on a second core
        label_stats.warm_up(tuple(sorted(value_dtypes, key=str)), runs=tiled)
        jit.settle()
    if interpolated and not public_phase:
        linear.warm_up(sorted(interpolated, key=str))
    missing = [f"{crop}/{label}" for crop, labels in fixed.items() for label in labels]
    return Plan(tasks=tasks, context=Context(options=options, fixed=fixed, total_evals=len(manifest)), missing=missing)


def _task(
    crop: str, label: str, submitted: Path, truth_crop: Path, grid: Grid, options: Options, version: Version, interpolated: set
) -> Task:
    """The task of one pair, refused at once when the submitted array's metadata already
    shows it cannot be scored (unreadable, or too large once resampled); the dtypes that
    linear interpolation will read are added to ``interpolated``."""
    display = f"{submitted.name}/{label}"
    mask = truth_crop / f"{label}_mask"
    pair = Pair(
        crop=crop,
        label=label,
        display=display,
        truth=truth_crop / label,
        pred=submitted / label,
        mask=mask if zarr_store.node_kind(mask) == zarr_store.ARRAY else None,
        grid=grid,
        instance=label in options.instance_classes,
        version=options.version,
        limits=options.limits,
        pathological_crops=options.pathological_crops,
    )
    try:  # metadata only: a broken array fails its own pair, never the others
        source = zarr_store.open_array(pair.pred, display)
        scale, _, _ = resampling(
            tuple(source.shape),
            zarr_store.attributes(source),
            grid,
            options.limits.max_volume_size_ratio,
            display,
            version.INFER_SCALE_FROM_SHAPE,
        )
        truth_arrays = _truth_arrays(pair)
        estimate, refusal = memory_estimate(grid, source, pair.instance, scale, *truth_arrays), None
        floor = memory_estimate(grid, _SmallestPrediction(grid.shape), pair.instance, None, *truth_arrays)
        if scale is not None and not pair.instance:
            interpolated.add(np.dtype(source.dtype).newbyteorder("="))
            if (np.asarray(scale) < 1).any():  # the anti-aliasing filter's output is interpolated
                interpolated.add(np.dtype(np.float32 if source.dtype == bool else np.float64))
    except (Unusable, SubmissionError) as exc:  # the prediction's metadata: the participant's to fix
        estimate, refusal, floor = 0, str(exc), 0
    return Task(key=f"{crop}/{label}", payload=pair, memory_bytes=estimate, refusal=refusal, phase_memory_bytes=floor)


@dataclass(frozen=True)
class _SmallestPrediction:
    """What ``memory_estimate`` reads of a prediction, for the smallest one a pair accepts: on
    the crop's grid (not resampled), one byte per voxel, in one-voxel chunks."""

    shape: tuple[int, ...]
    dtype = np.dtype(np.uint8)
    chunks = (1, 1, 1)


def _truth_arrays(pair: Pair):
    """(truth, mask or None) of a pair, metadata only (a broken truth array fails at scoring)."""
    try:
        truth = zarr_store.open_array(pair.truth, "truth array")
        mask = zarr_store.open_array(pair.mask, "mask") if pair.mask else None
    except Unusable:
        return None, None
    return truth, mask


def _truth_dtype(pair: Pair):
    """The dtype of the (masked) truth the instance pass reads, for compiling its kernels."""
    truth, mask = _truth_arrays(pair)
    if truth is None:
        return None
    dtype = np.result_type(truth.dtype, mask.dtype) if mask is not None else truth.dtype
    return dtype if dtype.kind in "uib" else None


def _not_submitted(truth_path: Path, instance: bool, grid: Grid | None, version: Version) -> dict:
    """The entry of a truth label without a task. Its voxel size is the truth array's
    attribute (``empty_label_score``), else the manifest's (the reference fails then)."""
    with organizer_file():
        truth = zarr_store.open_array(truth_path, "truth array")
    voxel_size = zarr_store.attributes(truth).get("voxel_size") or (grid.voxel_size if grid else None)
    if voxel_size is None:
        raise PhaseError("a truth array has neither a voxel_size attribute nor a manifest row")
    return version.missing_entry(truth_path, instance, voxel_size, truth.shape)


# --------------------------------------------------------------------------------------------
# Reading a task's arrays


def open_pair(pair: Pair, infer_scale_from_shape: bool):
    """(truth, prediction on the truth's grid) as volumes read region by region, both multiplied
    by the mask if there is one (``scoring.py`` ``score_label``). Only metadata is read here."""
    truth = open_truth(pair)
    pred = open_prediction(pair, infer_scale_from_shape)
    if pair.mask:
        with organizer_file():
            mask = volumes.ZarrVolume(zarr_store.open_array(pair.mask, "mask"), "mask", organizer_file)
        pred, truth = volumes.Masked(pred, mask), volumes.Masked(truth, mask)
    return truth, pred


def open_truth(pair: Pair) -> volumes.ZarrVolume:
    """The truth array as a volume, from its metadata (all a public phase holds of it)."""
    with organizer_file():
        truth = volumes.ZarrVolume(zarr_store.open_array(pair.truth, "truth array"), "truth array", organizer_file)
    if truth.shape != tuple(pair.grid.shape):
        raise PhaseError("a truth array's shape differs from its manifest row")
    return truth


def open_prediction(pair: Pair, infer_scale_from_shape: bool):
    """The submitted array on the truth's grid, unmasked. The resampling order follows the
    reference's global instance list, whatever ``instance_classes`` says (``match_crop_space``)."""
    source = zarr_store.open_array(pair.pred, pair.display)
    cache = volumes.ChunkCache(source, pair.display)

    def read(region, out=None):  # the passes reuse their buffers; the distances' boxes go through the cache
        if out is None and isinstance(region, tuple):
            return cache.read(region)
        return zarr_store.read_array(source, pair.display, region=region, out=out)

    return aligned(
        source,
        zarr_store.attributes(source),
        pair.grid,
        instance=pair.label in INSTANCE_CLASSES,
        read=read,
        max_size_ratio=pair.limits.max_volume_size_ratio,
        display=pair.display,
        infer_scale_from_shape=infer_scale_from_shape,
        reusable=True,
    )


@functools.lru_cache(maxsize=256)
def _count_instances_cached(path: str, modified_ns: int) -> int:
    with organizer_file():
        array = zarr_store.open_array(Path(path), "truth array")
        shape = tuple(array.shape)
        ids = np.zeros(0, dtype=np.uint64)
        for z0, z1 in slab_bounds(shape[0], slices_per_slab(int(np.prod(shape[1:])), SLAB_VOXELS)):
            slab = zarr_store.read_array(array, "truth array", region=slice(z0, z1))
            ids = np.union1d(ids, np.unique(slab).astype(np.uint64))
    return int(np.count_nonzero(ids))


def count_instances(truth_path: Path) -> int:
    """Number of distinct non-zero ids of a truth array (head's ``empty_label_score``), read in
    slabs (the reference loads the whole array). Cached per path and modification time,
    because a re-scoring run asks once per submission that misses the label."""
    return _count_instances_cached(str(truth_path), truth_path.stat().st_mtime_ns)


# --------------------------------------------------------------------------------------------
# The public phase

GEOMETRY_ATTRIBUTES = ("voxel_size", "translation")  # what a truth array's attributes may tell
METADATA_FILES = (".zgroup", ".zarray", ".zattrs", "zarr.json")


def publish(phase: Phase, options: Options, output: Path) -> None:
    """The manifest's rows and the truth zarr's metadata without a chunk, each document written
    afresh from the keys planning reads: the crops, their arrays' shapes, chunks, data types
    and codecs, and of their attributes only the voxel size and translation. Nothing is copied:
    an organizer's attribute may describe the labels, and a consolidated ``zarr.json`` or
    ``.zmetadata`` holds every array's attributes at the root."""
    manifest = phase.path(options.manifest)
    read_manifest(manifest)  # a broken manifest fails here as grading would
    target = public.target(phase, manifest, output)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_manifest_text(manifest))
    truth_root = phase.path(options.truth)
    if not truth_root.is_dir():
        raise PhaseError("the truth zarr named in phase.yaml does not exist")
    _publish_node(truth_root, public.target(phase, truth_root, output))


MANIFEST_HEADER = "crop_name,dataset,class_label,voxel_size,translation,shape"


def _manifest_text(manifest: Path) -> str:
    """The manifest's rows as ``read_manifest`` reads them, under the reference's header."""
    lines = manifest.read_text(encoding="utf-8").splitlines()[1:]
    return "\n".join([MANIFEST_HEADER, *(line.strip() for line in lines if line.strip())]) + "\n"


# Per metadata file, the keys a reader of its array or group needs; everything else (a
# consolidated index, an organizer's extra keys, attributes beyond the geometry) stays out.
PUBLIC_KEYS = {
    ".zgroup": ("zarr_format",),
    ".zarray": ("zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters", "dimension_separator"),
    "zarr.json": (
        "zarr_format",
        "node_type",
        "shape",
        "data_type",
        "chunk_grid",
        "chunk_key_encoding",
        "codecs",
        "fill_value",
        "dimension_names",
        "storage_transformers",
    ),
}


def _publish_node(node: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in METADATA_FILES:
        if (node / name).is_file():
            with organizer_file():
                document = untrusted.load_json(node / name, "truth zarr metadata")
            (out / name).write_text(json.dumps(_public_document(name, document)))
    if zarr_store.node_kind(node) == zarr_store.ARRAY:
        return
    for child in zarr_store.children(node):
        _publish_node(node / child, out / child)


def _public_document(name: str, document):
    """A metadata document made of the keys ``PUBLIC_KEYS`` names, its attributes cut to
    ``GEOMETRY_ATTRIBUTES``."""
    geometry = lambda attrs: {k: v for k, v in attrs.items() if k in GEOMETRY_ATTRIBUTES} if isinstance(attrs, dict) else {}  # noqa: E731
    if not isinstance(document, dict):
        return {}
    if name == ".zattrs":
        return geometry(document)
    kept = {key: document[key] for key in PUBLIC_KEYS[name] if key in document}
    if name == "zarr.json":
        kept["attributes"] = geometry(document.get("attributes"))
    return kept
