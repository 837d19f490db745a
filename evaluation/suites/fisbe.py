"""FISBe / FlyLight instance segmentation benchmark, reproducing the official evaluation.

Reference: Kainmueller-Lab/evaluate-instance-segmentation@cc34f4d (``evalinstseg``, CLI
``--app flylight``): per-image skeleton-based scores (``metrics/fisbe_image.py``) and the
cross-image aggregation of ``summarize.average_flylight_score_over_instances`` and
``average_sets``; section numbers refer to the conformance kit's SPEC.md.

Phase layout: one ground-truth file per sample in the phase folder (``<sample>.zarr`` with
``volumes/gt_instances``, an (instances, z, y, x) stack, as FISBe releases it; or a label
image), ``phase.yaml`` naming the partly labelled samples. The submission holds one
prediction per sample, ``<sample>.hdf|.h5|.zarr|.tif``, a label image or a channel stack.

Arrays are read channel by channel and slab by slab and kept as sparse per-instance voxel
lists, so a 7 x 385 x 685 x 686 sample never exists whole in memory.
"""

import csv
import io
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from evaluation import log
from evaluation.report import sanitize
from evaluation.errors import PhaseError, SubmissionError
from evaluation.metrics import fisbe_image, lee_thinning
from evaluation.metrics.fisbe_image import POOLED_THRESHOLDS, Channel, Settings, table_name
from evaluation.phase import Phase
from evaluation.readers import images, zarr_store
from evaluation.submission import Submission
from evaluation.contract import Outcome, Plan, Resources, Result, Suite, Task
from evaluation.suites import register

_log = log.get(__name__)

REFERENCE = {"repository": "Kainmueller-Lab/evaluate-instance-segmentation", "commit": "cc34f4d", "preset": "flylight"}
PREDICTION_SUFFIXES = (".hdf", ".h5", ".hdf5", ".zarr", ".tif", ".tiff")
TRUTH_SUFFIXES = (".zarr", ".hdf", ".h5", ".hdf5", ".tif", ".tiff")
DEFAULT_PREDICTION_KEYS = ("volumes/labels", "volumes/gmm_label_cleaned")
DEFAULT_TRUTH_KEY = "volumes/gt_instances"
SLAB_BYTES = 32 << 20
# A prediction is refused from its metadata when it declares more voxels than this many
# channels of this many times the image's spatial voxels. The reference centre-crops a larger
# prediction, so it may exceed the image in space, but FlyLight samples hold tens of neurons:
# a few thousand instance channels is far beyond any real prediction while it keeps a crafted
# header (10^6 empty channels) from being walked channel by channel.
MAX_PREDICTION_CHANNELS = 4096
MAX_PREDICTION_SPATIAL_FACTOR = 8
# The reference's summary columns (``--app flylight``: ``args.summary``), in its order.
SUMMARY_METRICS = (
    "general.Num GT", "general.Num Pred", "general.avg_f1_cov_score", "confusion_matrix.avFscore",
    "general.avg_gt_skel_coverage", "confusion_matrix.th_0_5.AP_TP", "confusion_matrix.th_0_5.AP_FP",
    "confusion_matrix.th_0_5.AP_FN", "general.FM", "general.FS", "general.TP_05", "general.TP_05_rel",
    "general.avg_TP_05_cldice", "general.GT_dim", "general.TP_05_dim", "general.TP_05_rel_dim",
    "general.avg_gt_cov_dim", "general.GT_overlap", "general.TP_05_overlap", "general.TP_05_rel_overlap",
    "general.avg_gt_cov_overlap",
) + tuple(f"confusion_matrix.{table_name(t)}.fscore" for t in POOLED_THRESHOLDS)
LEADERBOARD = {"S": "avg_f1_cov_score", "avF1": "avFscore", "C": "avg_gt_skel_coverage",
               "clDiceTP": "avg_TP_05_cldice", "tp": "TP_05_rel", "FS": "FS", "FM": "FM"}


# --------------------------------------------------------------------------------------------
# Reading (SPEC 1.2, 2 steps 1-3): squeeze, centre crop, stream the nonzero voxels


class LabelArray:
    """A label array in a file with its size-1 axes dropped (``np.squeeze``), read by region."""

    def __init__(self, array, display: str, attrs: dict | None = None):
        self.array, self.display, self.attrs = array, display, attrs or {}
        full = tuple(int(s) for s in array.shape)
        self.kept = [axis for axis, size in enumerate(full) if size != 1]
        self.shape = tuple(full[a] for a in self.kept)
        chunks = getattr(array, "chunks", None)
        self.chunks = tuple(int(chunks[a]) for a in self.kept) if chunks else None
        if np.dtype(array.dtype).kind not in "biuf":
            raise SubmissionError(f"{display}: has data type {array.dtype}; labels must be integers")

    def _index(self, region: tuple) -> tuple:
        index, items = [], iter(region)
        for axis in range(len(self.array.shape)):
            index.append(next(items) if axis in self.kept else 0)
        return tuple(index)

    def stored(self, region: tuple) -> bool:
        """False when the file stores nothing in ``region`` and it reads as zeros (a stack of
        a million channels with nothing stored is skipped, not read)."""
        check = getattr(self.array, "stored", None)
        return True if check is None else bool(check(self._index(region)))

    def read(self, region: tuple) -> np.ndarray:
        try:
            return np.asarray(self.array[self._index(region)])
        except (SubmissionError, PhaseError):  # the readers' own messages name the problem
            raise
        except Exception as exc:  # corrupt chunks surface as codec errors of many types
            raise SubmissionError(f"{self.display}: its data cannot be read ({type(exc).__name__}); the file may be corrupt") from None


@contextmanager
def open_labels(path: Path, keys: tuple[str, ...], display: str, trusted: bool = False, max_voxels: int | None = None):
    """Yields a :class:`LabelArray` for a zarr, HDF5 or TIFF file; the first of ``keys`` that
    exists is used, else the file's only array. HDF5 and TIFF arrays declaring more than
    ``max_voxels`` voxels are refused from their metadata."""
    kind = images.suffix(path)
    error = PhaseError if trusted else SubmissionError
    if kind in (".hdf", ".h5", ".hdf5"):
        from evaluation.readers import hdf5

        with hdf5.open_array(path, display=display, trusted=trusted, max_voxels=max_voxels, keys=keys) as array:
            yield LabelArray(array, display)
    elif kind == ".zarr":
        target = next((path / k for k in keys if zarr_store.node_kind(path / k) == zarr_store.ARRAY), None)
        if target is None:
            found = _zarr_arrays(path)
            if len(found) != 1:
                wanted = " or ".join(f"'{k}'" for k in keys)
                raise error(f"{display}: has no array {wanted} and {len(found)} other arrays; store the labels as {keys[0]}")
            target = found[0]
        array = zarr_store.open_array(target, display, trusted=trusted)
        yield LabelArray(array, display, zarr_store.attributes(array))
    elif kind in (".tif", ".tiff"):
        from evaluation.readers import tiff

        with tiff.open_array(path, display, trusted=trusted, max_voxels=max_voxels) as array:
            yield LabelArray(array, display)  # read page by page, never whole
    else:
        raise error(f"{display}: unsupported file type {kind!r}; use one of {', '.join(PREDICTION_SUFFIXES)}")


def _zarr_arrays(root: Path, depth: int = 3) -> list[Path]:
    kind = zarr_store.node_kind(root)
    if kind == zarr_store.ARRAY:
        return [root]
    if kind != zarr_store.GROUP or depth == 0:
        return []
    return [a for name in zarr_store.children(root) for a in _zarr_arrays(root / name, depth - 1)]


def prediction_voxel_limit(truth_spatial: tuple[int, ...]) -> int:
    """Voxels a prediction for an image of ``truth_spatial`` may declare (see
    ``MAX_PREDICTION_CHANNELS``)."""
    return MAX_PREDICTION_SPATIAL_FACTOR * MAX_PREDICTION_CHANNELS * int(np.prod(truth_spatial, dtype=np.int64))


def check_ndim(labels: LabelArray) -> None:
    if len(labels.shape) not in (3, 4):
        raise SubmissionError(f"{labels.display}: has shape {labels.shape} after dropping size-1 axes; "
                              "expected a (z, y, x) label image or a (channels, z, y, x) stack")
    if len(labels.shape) == 4 and labels.shape[0] > MAX_PREDICTION_CHANNELS:
        raise SubmissionError(f"{labels.display}: has {labels.shape[0]} channels; a channel stack may hold at most "
                              f"{MAX_PREDICTION_CHANNELS} (one per predicted instance): submit a label image instead")


def crops(gt_shape: tuple, pred_shape: tuple, display: str) -> tuple[tuple, tuple]:
    """Spatial regions of GT and prediction after the reference's centre crop
    (``check_and_fix_sizes``): the larger array is cropped to the smaller, offset (a-b)//2."""
    full = lambda s: tuple(slice(0, n) for n in s)  # noqa: E731
    if gt_shape == pred_shape:
        return full(gt_shape), full(pred_shape)
    centre = lambda big, small: tuple(slice((a - b) // 2, (a - b) // 2 + b) for a, b in zip(big, small))  # noqa: E731
    if all(g <= p for g, p in zip(gt_shape, pred_shape)):
        return full(gt_shape), centre(pred_shape, gt_shape)
    if all(p <= g for g, p in zip(gt_shape, pred_shape)):
        return centre(gt_shape, pred_shape), full(pred_shape)
    raise SubmissionError(f"{display}: has spatial shape {pred_shape}, which is larger than the image in some axes and "
                          "smaller in others; write the prediction on the image's grid")


def stream_channels(labels: LabelArray, region: tuple) -> list[Channel]:
    """The nonzero voxels of every channel inside the spatial ``region``, read in chunk-aligned
    z-slabs of as many channels as one chunk holds (each chunk is decoded once)."""
    spatial = tuple(s.stop - s.start for s in region)
    plane = spatial[1] * spatial[2]
    channels = labels.shape[0] if len(labels.shape) == 4 else 0
    group = min(labels.chunks[0], channels) if channels and labels.chunks else 1
    itemsize = np.dtype(labels.array.dtype).itemsize
    slab = max(1, SLAB_BYTES // max(1, plane * itemsize * group))
    if labels.chunks:
        step = labels.chunks[-3]
        slab = max(step, slab // step * step)
    parts = [([], []) for _ in range(max(channels, 1))]
    for first in range(0, max(channels, 1), group):
        lead = (slice(first, first + group),) if channels else ()
        for z in range(0, spatial[0], slab):
            z_region = slice(region[0].start + z, region[0].start + min(z + slab, spatial[0]))
            where = lead + (z_region, region[1], region[2])
            if not labels.stored(where):
                continue
            block = labels.read(where)
            for offset, image in enumerate(block if channels else [block]):
                flat = np.ascontiguousarray(image).reshape(-1)
                found = nonzero(flat)
                parts[first + offset][0].append(found + z * plane)
                parts[first + offset][1].append(_ids(flat[found], labels.display))
    return [Channel(np.concatenate(index), np.concatenate(values)) for index, values in parts if index]


def nonzero(flat: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` of a contiguous 1-D array, scanning 8-byte words first: labels are
    sparse, so most words are zero and only the few nonzero ones are looked into."""
    itemsize = flat.dtype.itemsize
    if not flat.flags.c_contiguous or itemsize >= 8 or flat.nbytes % 8 or flat.dtype.kind not in "biu":
        return np.flatnonzero(flat)
    per_word = 8 // itemsize
    words = np.flatnonzero(flat.view(np.uint64))
    candidates = (words[:, None] * per_word + np.arange(per_word)).reshape(-1)
    return candidates[flat[candidates] != 0]


def _ids(values: np.ndarray, display: str) -> np.ndarray:
    """Label values as int64; negative or fractional ids are refused (SPEC 2 step 3)."""
    if values.dtype.kind == "f":
        if not np.all(np.isfinite(values)) or np.any(values != np.floor(values)):
            raise SubmissionError(f"{display}: holds fractional or non-finite values; labels must be whole numbers")
    if values.size and values.min() < 0:
        raise SubmissionError(f"{display}: holds negative ids; instance ids must be >= 0")
    if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
        raise SubmissionError(f"{display}: holds ids above 2^63")
    return values.astype(np.int64)


# --------------------------------------------------------------------------------------------
# Samples and options


def sample_name(path: Path) -> str:
    """The reference's sample name: the file name up to its first '.'."""
    return path.name.split(".")[0]


def natural_key(name: str):
    """Natural order of sample names (the reference sorts its prediction files with natsort)."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(re.split(r"(\d+)", name)))


def _as_keys(value, default) -> tuple[str, ...]:
    if value is None:
        return tuple(default) if isinstance(default, tuple) else (default,)
    return (value,) if isinstance(value, str) else tuple(value)


def read_split_file(path: Path) -> set[str]:
    """Names listed under ``(2) samples for FlyLight partly:`` (``util.load_partly_config``)."""
    partly, in_partly = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        if "(1) samples for FlyLight completely:" in line:
            in_partly = False
        elif "(2) samples for FlyLight partly:" in line:
            in_partly = True
        elif line.endswith(":") and line[:-1] in ("train", "val", "test"):
            continue
        elif in_partly:
            partly.add(line)
    return partly


@dataclass(frozen=True)
class Options:
    truth: str = "."
    truth_key: tuple[str, ...] = (DEFAULT_TRUTH_KEY,)
    prediction_key: tuple[str, ...] = DEFAULT_PREDICTION_KEYS
    partly: tuple[str, ...] = ()
    all_partly: bool = False
    remove_small_components: int = 800

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        o = phase.options
        partly = o.get("partly", [])
        names = set(partly) if isinstance(partly, list) else set()
        if o.get("split_file"):
            names |= read_split_file(phase.path(o["split_file"]))
        return cls(
            truth=o.get("truth", "."),
            truth_key=_as_keys(o.get("truth_key"), DEFAULT_TRUTH_KEY),
            prediction_key=_as_keys(o.get("prediction_key"), DEFAULT_PREDICTION_KEYS),
            partly=tuple(sorted(names)),
            all_partly=partly is True,
            remove_small_components=int(o.get("remove_small_components", 800)),
        )


def truth_files(folder: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or images.suffix(path) not in TRUTH_SUFFIXES:
            continue
        name = path.name[: -len(images.suffix(path))]
        if "." in name:
            raise PhaseError(f"ground-truth sample {name!r}: sample names must not contain '.' (a prediction's name ends at its first '.')")
        if name in found:
            raise PhaseError(f"ground-truth sample {name!r} exists twice")
        found[name] = path
    return found


# --------------------------------------------------------------------------------------------
# Scoring one sample


def load_sample(payload: dict):
    """GT and prediction as unified sparse labels (SPEC 2) plus the mapped dim ids."""
    truth_keys, pred_keys = tuple(payload["truth_key"]), tuple(payload["prediction_key"])
    with open_labels(Path(payload["truth"]), truth_keys, "ground truth", trusted=True) as gt_array:
        if len(gt_array.shape) not in (3, 4):
            raise PhaseError(f"ground truth of sample {payload['sample']} has {len(gt_array.shape)} dimensions after squeezing")
        dims = list(gt_array.attrs.get("dim_neurons", [])) if payload["truth"].endswith(".zarr") else []
        gt_spatial = gt_array.shape[-3:]
        if payload["prediction"] is None:
            gt_region, pred_channels = tuple(slice(0, n) for n in gt_spatial), [Channel(np.zeros(0, np.int64), np.zeros(0, np.int64))]
        else:
            limit = prediction_voxel_limit(gt_spatial)
            with open_labels(Path(payload["prediction"]), pred_keys, payload["display"], max_voxels=limit) as pred_array:
                check_ndim(pred_array)
                gt_region, pred_region = crops(gt_spatial, pred_array.shape[-3:], payload["display"])
                pred_channels = stream_channels(pred_array, pred_region)
        gt_channels = stream_channels(gt_array, gt_region)
    shape = tuple(s.stop - s.start for s in gt_region)
    for channel in gt_channels:
        if channel.values.size and channel.values.min() < 0:
            raise PhaseError("ground truth holds negative ids")
    pred, _ = fisbe_image.unify(pred_channels, shape, remove_small=payload["remove_small_components"])
    del pred_channels
    gt, dims_rel = fisbe_image.unify(gt_channels, shape, dims=dims)
    if any(d == 0 for d in dims_rel):
        raise PhaseError(f"dim_neurons of sample {payload['sample']} names ids that are not in its ground truth")
    return gt, pred, dims_rel


# --------------------------------------------------------------------------------------------
# Cross-image aggregation (SPEC 9), numpy types as in the reference


def pool(results: list[dict]) -> dict:
    """``average_flylight_score_over_instances``: pooled counts, F1 per threshold from summed
    TP/FP/FN, coverage averaged over all GT instances (float32)."""
    g = lambda key: [r["general"][key] for r in results]  # noqa: E731
    f32 = lambda key: [np.float32(v) for r in results for v in r["general"][key]]  # noqa: E731
    counts = {kind: {t: [r["confusion_matrix"][table_name(t)][key] for r in results] for t in POOLED_THRESHOLDS}
              for kind, key in (("tp", "AP_TP"), ("fp", "AP_FP"), ("fn", "AP_FN"))}
    fscores = []
    for t in POOLED_THRESHOLDS:
        tp, fp, fn = (np.sum(counts[k][t]) for k in ("tp", "fp", "fn"))
        denominator = 2 * tp + fp + fn
        fscores.append(2 * tp / denominator if denominator > 0 else 0.0)
    gt_covs, cldices = f32("gt_skel_coverage"), f32("TP_05_cldice")
    covs_dim, covs_overlap = f32("gt_covs_dim"), f32("gt_covs_overlap")
    coverage = np.mean(gt_covs) if gt_covs else 0.0
    num_gt, tp_05 = np.sum(g("Num GT")), np.sum(g("TP_05"))
    gt_dim, tp_dim = np.sum(g("GT_dim")), np.sum(g("TP_05_dim"))
    gt_overlap, tp_overlap = np.sum(g("GT_overlap")), np.sum(g("TP_05_overlap"))
    general = {
        "Num GT": num_gt, "Num Pred": np.sum(g("Num Pred")),
        "avg_gt_skel_coverage": coverage,
        "avg_f1_cov_score": 0.5 * np.mean(fscores) + 0.5 * coverage,
        "avFscore": np.mean(fscores),
        "FM": np.sum(g("FM")), "FS": np.sum(g("FS")),
        "TP_05": tp_05, "TP_05_rel": tp_05 / float(num_gt) if num_gt > 0 else 0.0,
        "TP_05_cldice": cldices, "avg_TP_05_cldice": np.mean(cldices) if tp_05 > 0 else 0.0,
        "GT_dim": gt_dim, "TP_05_dim": tp_dim, "TP_05_rel_dim": tp_dim / float(gt_dim) if gt_dim > 0 else 0.0,
        "avg_gt_cov_dim": np.mean(covs_dim) if covs_dim else 0.0,
        "GT_overlap": gt_overlap, "TP_05_overlap": tp_overlap,
        "TP_05_rel_overlap": tp_overlap / float(gt_overlap) if gt_overlap > 0 else 0.0,
        "avg_gt_cov_overlap": np.mean(covs_overlap) if covs_overlap else 0.0,
    }
    confusion = {"avFscore": np.mean(fscores)}
    for i, t in enumerate(POOLED_THRESHOLDS):
        confusion[table_name(t)] = {"fscore": fscores[i]}
    confusion["th_0_5"].update(AP_TP=np.sum(counts["tp"][0.5]), AP_FP=np.sum(counts["fp"][0.5]), AP_FN=np.sum(counts["fn"][0.5]))
    return {"S": general["avg_f1_cov_score"], "general": general, "confusion_matrix": confusion, "gt_covs": gt_covs,
            "tp": [np.sum(counts["tp"][t]) for t in POOLED_THRESHOLDS],
            "fp": [np.sum(counts["fp"][t]) for t in POOLED_THRESHOLDS],
            "fn": [np.sum(counts["fn"][t]) for t in POOLED_THRESHOLDS]}


def combine_sets(a: dict, b: dict) -> dict:
    """``average_sets``: the complete and the partly set's results averaged (S, avF1, C and
    per-threshold F1 as means of the two), counts summed."""
    ga, gb = a["general"], b["general"]
    num_gt, tp_05 = ga["Num GT"] + gb["Num GT"], ga["TP_05"] + gb["TP_05"]
    cldices = list(ga["TP_05_cldice"]) + list(gb["TP_05_cldice"])
    fscore = np.mean([ga["avFscore"], gb["avFscore"]])
    general = {
        "Num GT": num_gt, "Num Pred": ga["Num Pred"] + gb["Num Pred"],
        "avg_gt_skel_coverage": np.mean([ga["avg_gt_skel_coverage"], gb["avg_gt_skel_coverage"]]),
        "avg_f1_cov_score": np.mean([a["S"], b["S"]]),
        "avFscore": fscore,
        "FM": ga["FM"] + gb["FM"], "FS": ga["FS"] + gb["FS"],
        "TP_05": tp_05, "TP_05_rel": tp_05 / float(num_gt) if num_gt > 0 else 0.0,
        "avg_TP_05_cldice": np.mean(cldices) if cldices else 0.0,
    }
    confusion = {"avFscore": fscore}
    for t in POOLED_THRESHOLDS:
        name = table_name(t)
        confusion[name] = {"fscore": np.mean([a["confusion_matrix"][name]["fscore"], b["confusion_matrix"][name]["fscore"]])}
    confusion["th_0_5"].update({k: a["confusion_matrix"]["th_0_5"][k] + b["confusion_matrix"]["th_0_5"][k] for k in ("AP_TP", "AP_FP", "AP_FN")})
    return {"S": general["avg_f1_cov_score"], "general": general, "confusion_matrix": confusion,
            "gt_covs": list(a["gt_covs"]) + list(b["gt_covs"])}


def aggregate(results: dict[str, dict], partly: dict[str, bool]) -> dict:
    """``aggregate_and_report``: pooled over all images when they are of one kind, else the
    complete and partly sets pooled separately and combined (``combined`` is official)."""
    names = list(results)
    kinds = {partly[n] for n in names}
    if len(kinds) > 1:
        complete = pool([results[n] for n in names if not partly[n]])
        partial = pool([results[n] for n in names if partly[n]])
        return {"complete": complete, "partly": partial, "combined": combine_sets(complete, partial)}
    return {"combined": pool([results[n] for n in names])}


def _deep_get(d: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def summary_csv(results: dict[str, dict], pooled: dict) -> str:
    """The reference's ``summary.csv`` (``summarize_metric_dict``): ';'-separated, a row per
    sample (values as floats, missing as 0.0), then ``mean``, ``sum`` and ``avg_inst`` (the
    pooled result, printed with its numpy types)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=";", quotechar="|", quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writerow(["sample"] + [" ".join(m.split(".")[-2:]) for m in SUMMARY_METRICS])
    table = np.zeros((len(results), len(SUMMARY_METRICS)))
    for i, (name, result) in enumerate(results.items()):
        for k, metric in enumerate(SUMMARY_METRICS):
            value = _deep_get(result, metric)
            table[i, k] = float(value) if value is not None else 0.0
        writer.writerow([name] + list(table[i]))
    writer.writerow(["mean"] + list(np.mean(table, axis=0)))
    writer.writerow(["sum"] + list(np.sum(table, axis=0)))
    writer.writerow(["avg_inst"] + [v if (v := _deep_get(pooled, m)) is not None else 0.0 for m in SUMMARY_METRICS])
    return out.getvalue()


def headline(pooled: dict) -> dict:
    return {column: pooled["general"][key] for column, key in LEADERBOARD.items()}


def aggregate_document(pooled: dict) -> dict:
    """One aggregate as written to metrics.json: the leaderboard columns, then the reference's
    aggregate dictionary (per-threshold count lists under ``per_threshold``)."""
    document = {**headline(pooled), "general": dict(pooled["general"]), "confusion_matrix": pooled["confusion_matrix"],
                "gt_covs": pooled["gt_covs"]}
    if "tp" in pooled:
        document["per_threshold"] = {"threshold": list(POOLED_THRESHOLDS), "tp": pooled["tp"], "fp": pooled["fp"], "fn": pooled["fn"]}
    return document


# --------------------------------------------------------------------------------------------
# The suite


@register
class Fisbe(Suite):
    name = "fisbe"
    ranking = "S"

    def plan(self, submission: Submission, phase: Phase, resources: Resources) -> Plan:
        options = Options.from_phase(phase)
        truth_root = phase.path(options.truth)
        if not truth_root.is_dir():
            raise PhaseError("the ground-truth folder named in phase.yaml does not exist")
        truths = truth_files(truth_root)
        if not truths:
            raise PhaseError("the phase holds no ground-truth samples (<sample>.zarr)")
        unknown = sorted(set(options.partly) - set(truths))
        if unknown:
            raise PhaseError(f"phase.yaml lists partly labelled samples that have no ground truth: {', '.join(unknown[:5])}")
        predictions = self._match(submission, truths)
        tasks = []
        for sample in sorted(truths, key=natural_key):
            prediction = predictions.get(sample)
            payload = {
                "sample": sample, "truth": str(truths[sample]),
                "prediction": str(prediction) if prediction else None,
                "display": prediction.relative_to(submission.root).as_posix() if prediction else sample,
                "truth_key": list(options.truth_key), "prediction_key": list(options.prediction_key),
                "partly": options.all_partly or sample in options.partly,
                "remove_small_components": options.remove_small_components,
            }
            tasks.append(Task(key=sample, payload=payload, memory_bytes=_memory_estimate(truths[sample], options.truth_key)))
        missing = [t.key for t in tasks if t.payload["prediction"] is None]
        if missing:
            _log.warning("fisbe_missing_predictions", samples=missing)
        _log.info("fisbe_plan", samples=len(tasks), submitted=len(predictions))
        lee_thinning.warm_up()  # once here rather than in every forked worker
        return Plan(tasks=tasks, context={"options": asdict(options), "missing": missing})

    @staticmethod
    def _match(submission: Submission, truths: dict[str, Path]) -> dict[str, Path]:
        files = submission.case_files(PREDICTION_SUFFIXES)
        found: dict[str, Path] = {}
        for stem, path in files.items():
            sample = stem if stem in truths else sample_name(path)
            if sample not in truths:
                _log.info("fisbe_unmatched_file", file=path.name)
                continue
            if sample in found:
                raise SubmissionError(f"sample '{sample}' has two predictions ({found[sample].name} and {path.name}); keep one")
            found[sample] = path
        if not found:
            raise SubmissionError(
                "no prediction matches a test sample: name each file after its sample, e.g. "
                f"'{next(iter(sorted(truths, key=natural_key)))}.hdf' (HDF5 dataset 'volumes/labels'), .zarr or .tif"
            )
        return found

    def score(self, payload: dict) -> dict:
        gt, pred, dims = load_sample(payload)
        result = fisbe_image.evaluate(gt, pred, dims, payload["partly"], Settings(remove_small=payload["remove_small_components"]))
        return sanitize(result)

    def summarize(self, phase: Phase, plan: Plan, outcomes: dict[str, Outcome]) -> Result:
        partly = {t.key: t.payload["partly"] for t in plan.tasks}
        missing = set(plan.context["missing"])
        cases, results = {}, {}
        for task in plan.tasks:
            outcome = outcomes[task.key]
            entry = {"partly": partly[task.key], "prediction": "missing" if task.key in missing else "submitted"}
            if outcome.ok:
                results[task.key] = outcome.value
                cases[task.key] = {**outcome.value, **entry, "status": "scored"}
            else:
                cases[task.key] = {**entry, "status": "failed", "error": outcome.message}
        aggregates, files = {}, {}
        if results:
            pooled = aggregate(results, partly)
            aggregates = aggregate_document(pooled["combined"])
            files["summary.csv"] = summary_csv(results, pooled["combined"])
            if "complete" in pooled:
                for kind in ("complete", "partly"):
                    aggregates[kind] = aggregate_document(pooled[kind])
                    subset = {n: r for n, r in results.items() if partly[n] == (kind == "partly")}
                    files[f"summary_{kind}.csv"] = summary_csv(subset, pooled[kind])
        aggregates["samples"] = {"total": len(plan.tasks), "scored": len(results), "missing_predictions": len(missing)}
        leaderboard = {k: float(aggregates.get(k, 0.0)) for k in LEADERBOARD}
        metrics = {"case": cases, "aggregates": aggregates, "reference": dict(REFERENCE)}
        return Result(
            metrics=sanitize(metrics),
            leaderboard=leaderboard,
            case_scores={n: float(r["general"]["avg_f1_cov_score"]) for n, r in results.items()},
            files=files,
        )


def _memory_estimate(truth: Path, keys: tuple[str, ...]) -> int:
    """A rough peak: imports and slabs, plus two bytes per voxel of the image for the largest
    skeletonisation box and the sparse voxel lists (neurons fill a small share of it)."""
    base = 320 * 2**20
    if images.suffix(truth) in (".zarr", ".hdf", ".h5", ".hdf5"):
        try:
            with open_labels(truth, keys, "ground truth", trusted=True) as array:
                return base + 2 * int(np.prod(array.shape[-3:]))
        except Exception:  # an unreadable truth fails properly in its task
            return base
    return base + 2 * truth.stat().st_size
