"""The autoPET presets (``preset: autopet4``, ``autopet4-interactive``, ``autopet3``,
``autopet2``, ``autopet1``) behind the ``evaluations.Evaluation`` protocol: the files read as
the references read them, each case scored by ``autopet``, the means as each edition takes them,
and the reference's own CSV.

Reading. The references read NIfTI with nibabel (``nii2numpy``): ``get_fdata()``, the stored
values times ``scl_slope`` plus ``scl_inter`` in float64, and the voxel volume from the raw
header field ``pixdim``. SimpleITK reads stored integers as nibabel does, but rescales a scaled
file in float32 and reads a stored float NaN as 0: a NIfTI file of floats or with a scaling is
checked and bounded as every upload is (``itk_formats.info``), then its stored values are
decoded and scaled as nibabel does. Other formats (``.mha``, ``.nrrd``: what
Grand-Challenge algorithms write) give their values as stored and their spacing rounded to
float32, as a NIfTI header would hold it. The arrays are compared voxel by voxel, as stored: a
prediction of another shape is refused; spacing, origin and direction are not compared, as the
references do not compare them (autoPET IV's and I–II's volumes take the prediction's own
``pixdim``; ``corrections: [autopet_truth_spacing]`` takes the truth's). Negative and
non-finite values are refused (the references' sums would let them cancel or poison them).

Submission. One file per case named as its truth (``<case>.nii.gz``, ``.mha``, ...); for the
interactive task one file per click step, ``<case>_pred0`` (no click) ... ``<case>_pred10``
(ten click pairs), the names ``get_interactive_metrics`` looks for.

Outputs. Per case and the class ``lesion``: the keys of ``modes.AutopetPreset.kinds``; the
suite's statistics over the cases (NaN left out, as pandas' ``mean`` in ``get_metrics``; for
autoPET I and II also the lesion-free cases their rule leaves out); ``aggregates.autopet``: the
reference's printed means under its CSV column names (this project's layout: no Grand-Challenge
container of the references is public); ``metrics.csv`` or ``metrics_interactive.csv``: the CSV
``get_metrics`` / ``get_interactive_metrics`` write, its rows in case order.
"""

import csv
import io
import math
import re
from pathlib import Path

import numpy as np

from evaluation import public
from evaluation.contract import Result
from evaluation.errors import SubmissionError, Unusable, organizer_file
from evaluation.metrics import jit
from evaluation.readers import images, itk_formats
from evaluation.readers.itk_formats import nifti
from evaluation.suites.segmentation import aggregate, autopet
from evaluation.suites.segmentation.inputs import CaseTask
from evaluation.suites.segmentation.mode_results import _WholeEvaluation
from evaluation.suites.segmentation.options import Options

# The preflight's time model, per click step: a 400 x 400 x 300 case scores in 0.2 s
# (bench/autopet.py), about 4 s per G voxel; rounded up.
SECONDS_PER_GVOXEL = 10.0


def read_values(path: Path, display: str, max_voxels: int | None = None) -> tuple[np.ndarray, tuple[float, ...]]:
    """(values, pixdim (x, y, z)) of one file as ``nii2numpy`` sees them; refuses (``Unusable``)
    what the references cannot score: anything but a 3-D array of finite, non-negative numbers."""
    header = None
    if images.suffix(path) in (".nii", ".nii.gz"):  # as nibabel's get_fdata and header["pixdim"]
        found = itk_formats.info(path, display)  # the header's checks and size bounds, nothing decoded
        if max_voxels is not None and found.voxels > max_voxels:
            raise Unusable(f"{display}: has shape {found.shape}, more voxels than the {max_voxels} of the image it predicts")
        header = found.header.fields["nifti"]
    if header is not None and (header.scaled or header.datatype in nifti.FLOAT_TYPES):
        values = nifti.stored_array(path, found.header, display)
        if header.scaled:  # apply_read_scaling: stored * slope, + inter, in float64
            values = values.astype(np.float64)
            if header.scl_slope != 1.0:
                values = values * float(header.scl_slope)
            if header.scl_inter != 0.0:
                values = values + float(header.scl_inter)
    else:  # integers as stored: SimpleITK reads them as nibabel does, faster
        volume = images.read(path, display=display, max_voxels=max_voxels)
        values = volume.array
    if header is not None:
        spacing = header.pixdim[: values.ndim]
    else:
        spacing = tuple(volume.spacing[::-1]) if volume.spacing is not None else (1.0,) * values.ndim
    if values.ndim != 3:
        raise Unusable(f"{display}: has {values.ndim} dimensions; the autoPET metrics are defined on 3-D images")
    if values.dtype.kind not in "biuf":
        raise Unusable(f"{display}: has data type {values.dtype}; expected numbers (0 = background)")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise Unusable(f"{display}: holds NaN or infinite values; a segmentation holds finite numbers (0 = background)")
    if values.dtype.kind in "if" and values.size and values.min() < 0:
        raise Unusable(f"{display}: holds negative values (e.g. {values.min():g}); a segmentation holds 0 (background) or more")
    return values, tuple(float(np.float32(s)) for s in spacing)


def _same_shape(pred: np.ndarray, shape: tuple[int, ...], display: str) -> None:
    if pred.shape != tuple(shape):
        raise SubmissionError(f"{display}: has shape {pred.shape}, but the image it predicts has shape {tuple(shape)}")


def _steps(task: CaseTask) -> list[str | None]:
    """The prediction files of a case in click order (one for a non-interactive preset), None
    for a missing one (``missing_cases: empty``)."""
    if task.options.mode.interactive:
        return list(task.steps) if task.steps else [None] * task.options.mode.steps
    return [task.prediction]


# Submission files of the interactive task: <case>_pred<step>, as get_interactive_metrics names them
STEP_NAME = re.compile(r"^(?P<case>.+)_pred(?P<step>0|[1-9][0-9]*)$")


class Autopet(_WholeEvaluation):
    writes_instances = False

    def warm_up(self, options: Options) -> None:
        """Compiles the integer pass for uint8 maps once in the parent."""

        def compile_all():
            truth = np.zeros((3, 4, 5), np.uint8)
            truth[1, 1:3, 1:3] = 1
            autopet.integer_sums(truth, np.roll(truth, 1, axis=2))

        jit.warm_up("autoPET metrics", compile_all, [autopet.__file__])

    def context(self, options: Options, truth: dict, cases: list[str], policy: str) -> dict:
        """The reference's CSV names its rows by truth file."""
        return {"truth_files": {case: path.name for case, path in truth.items()}}

    def predictions(self, options: Options, files: dict[str, Path], truth: dict[str, Path]) -> dict:
        """The interactive task's files grouped per case in click order (``<case>_pred<i>``);
        a case lacking a step is refused (``missing_cases: reject``), skipped as the reference
        skips it (``skip``), or scored with the missing steps as empty predictions (``empty``)."""
        mode = options.mode
        if not mode.interactive:
            return files
        found: dict[str, dict[int, Path]] = {}
        unknown = []
        for name, path in files.items():
            match = STEP_NAME.match(name)
            if match is None or match["case"] not in truth or int(match["step"]) >= mode.steps:
                unknown.append(path.name)
                continue
            found.setdefault(match["case"], {})[int(match["step"])] = path
        last = f"_pred{mode.steps - 1}"
        if unknown:
            shown = ", ".join(sorted(unknown)[:5]) + (", ..." if len(unknown) > 5 else "")
            raise SubmissionError(
                f"{len(unknown)} file(s) are no click step of a test case ({shown}); name the steps of case <case> "
                f"<case>_pred0 (no click) ... <case>{last}"
            )
        grouped = {}
        for case, by_step in sorted(found.items()):
            missing = [i for i in range(mode.steps) if i not in by_step]
            if missing and options.missing_cases == "reject":
                shown = ", ".join(f"{case}_pred{i}" for i in missing[:5]) + (", ..." if len(missing) > 5 else "")
                raise SubmissionError(
                    f"case {case}: no prediction for {len(missing)} of its {mode.steps} click steps ({shown}); "
                    f"the interactive evaluation needs {case}_pred0 ... {case}{last}"
                )
            if missing and options.missing_cases == "skip":  # get_interactive_metrics: "Missing prediction", skipped
                continue
            grouped[case] = tuple(by_step.get(i) for i in range(mode.steps))
        return grouped

    def score(self, task: CaseTask) -> dict:
        options = task.options
        mode = options.mode
        with organizer_file():
            truth, truth_pixdim = read_values(Path(task.truth), f"the ground truth of case {task.case}")
        rules = mode.rules
        prepared = autopet.prepare_truth(truth, rules)
        steps = []
        for step in _steps(task):
            if step is None:  # missing_cases: empty
                pred, pred_pixdim = np.zeros(truth.shape, np.uint8), truth_pixdim
            else:
                display = Path(step).name if mode.interactive else task.display
                pred, pred_pixdim = read_values(Path(step), display, max_voxels=truth.size)
                _same_shape(pred, truth.shape, display)
            truth_volume = rules.volume_from == "truth" or "autopet_truth_spacing" in options.corrections
            voxel_volume = autopet.voxel_volume_ml(truth_pixdim if truth_volume else pred_pixdim, mode.numpy)
            steps.append(autopet.case_metrics(prepared, pred, voxel_volume, rules, mode.numpy))
        if mode.interactive:
            found = autopet.interactive_summary(steps)
            found.update({f"{key}_step{i}": s[key] for key in (*autopet.SCORED, *autopet.COUNTED) for i, s in enumerate(steps)})
        else:
            found = steps[0]
        spacing, keys = truth_pixdim[::-1], options.keys()
        return {
            "spacing": list(spacing),
            "shape": list(truth.shape),
            "diagonal": math.sqrt(sum((n * s) ** 2 for n, s in zip(truth.shape, spacing))),
            "classes": {"lesion": {key: found[key] for key in keys}},
            "instances": {},
            "lesion_free": prepared.total == 0,
        }

    def check(self, task: CaseTask) -> dict:
        """The preflight: every prediction file read as ``score`` reads it and checked against
        the truth's shape (the public phase's header)."""
        truth = public.read_header(Path(task.truth))
        files = [s for s in _steps(task) if s is not None]
        for step in files:
            display = Path(step).name if task.options.mode.interactive else task.display
            pred, _ = read_values(Path(step), display, max_voxels=truth.voxels)
            _same_shape(pred, truth.shape, display)
        return {"seconds": truth.voxels / 1e9 * SECONDS_PER_GVOXEL * max(len(files), 1)}

    def summary(self, options: Options, scored: dict, failed: dict, context: dict) -> tuple[dict, None]:
        """The suite's statistics; under autoPET I's or II's rule the lesion-free cases are left
        out of the means of the keys the rule names (``autopet.AGGREGATIONS``)."""
        keys = options.keys()
        left_out = autopet.AGGREGATIONS[options.mode.aggregation]
        if not left_out:
            return aggregate.summarize(options, scored, keys), None
        with_lesions = {case: value for case, value in scored.items() if not value["lesion_free"]}
        kept = aggregate.summarize(options, scored, [k for k in keys if k not in left_out])
        apart = aggregate.summarize(options, with_lesions, [k for k in keys if k in left_out])
        return {
            "classes": {c: {k: {**kept["classes"][c], **apart["classes"][c]}[k] for k in keys} for c in kept["classes"]},
            "overall": {k: {**kept["overall"], **apart["overall"]}[k] for k in keys},
        }, None

    def summarize(self, phase, plan, outcomes) -> Result:
        """The suite's result, with the reference's means (``aggregates.autopet``) and CSV."""
        result = super().summarize(phase, plan, outcomes)
        options = plan.context.options
        scored, _ = aggregate.split(outcomes, {case: case for case in plan.context.files})
        columns = autopet.INTERACTIVE_COLUMNS if options.mode.interactive else autopet.COLUMNS
        left_out = autopet.AGGREGATIONS[options.mode.aggregation]
        means = {}
        for key, column in columns.items():
            values = [v["classes"]["lesion"][key] for v in scored.values() if not (key in left_out and v["lesion_free"])]
            kept = [float(x) for x in values if x is not None and not math.isnan(x)]
            means[column] = aggregate.statistics(kept, ("mean",), "ignore")["mean"]
            means[f"n_{column}"] = len(kept)
        result.metrics["aggregates"]["autopet"] = means
        names = plan.context.extra["truth_files"]
        rows = [[names[case], *(value["classes"]["lesion"][k] for k in columns)] for case, value in sorted(scored.items())]
        result.files["metrics_interactive.csv" if options.mode.interactive else "metrics.csv"] = _csv(
            ["gt_name", *columns.values()], rows
        )
        return result


def _csv(header: list[str], rows: list[list]) -> str:
    """As ``csv.writer`` writes the reference's rows: a float by its ``str``, NaN as ``nan``."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=",", lineterminator="\r\n")
    writer.writerows([header, *rows])
    return out.getvalue()


AUTOPET = Autopet()
