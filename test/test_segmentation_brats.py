"""The official BraTS evaluations and panoptica's evaluator configuration, through the command
line, against the references' own outputs on the eight cases of
test/fixtures/segmentation/brats (README.md there says how they were made):

* ``preset: brats-<task>``: the whole table ``brats-parse-metrics`` wrote from
  BraTS_evaluation 0.0.10 (panoptica 2.1.7) for each of its six bundled configurations, every
  cell of every row including the mean, std and median rows;
* ``panoptica: <file>`` and the same fields inline: every value of panoptica's per-group result
  (``to_dict(True)``) and every reference instance row, for two custom configurations;
* ``preset: brats2023-<challenge>``: every column of ``get_LesionWiseResults`` for each region,
  case and challenge of the BraTS 2023 lesion-wise code.

Values are compared exactly (the references' floats, NaN as NaN, infinity as infinity in the
tables); metrics.json holds NaN and infinity as null. A further test runs the installed
packages themselves when they are importable.
"""

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.grading import FIXTURES, run_cli

KIT = FIXTURES / "segmentation" / "brats"
TASKS = {"gli": "gli", "mets": "mets", "ped": "ped", "menrt": "MenRT", "menpre": "MenPre", "goat": "GoAT"}
CHALLENGES = {"gli": "BraTS-GLI", "ssa": "BraTS-SSA", "men": "BraTS-MEN", "ped": "BraTS-PED", "met": "BraTS-MET"}


def phase(tmp: Path, config: str, truth: str = "truth", extra: dict | None = None) -> Path:
    root = tmp / "phase"
    shutil.copytree(KIT / "cases" / truth, root / "labels")
    (root / "phase.yaml").write_text(config)
    for name, path in (extra or {}).items():
        shutil.copy(path, root / name)
    return root


def read_table(path: Path) -> tuple[list[str], dict[str, list[float]]]:
    rows = list(csv.reader(path.open()))
    return rows[0], {row[0]: [float(v) if v else math.nan for v in row[1:]] for row in rows[1:]}


def same(got, expected, key: str = "") -> bool:
    if key.endswith("cedi") and isinstance(expected, float) and math.isfinite(expected):
        # panoptica's CEDI is np.linalg.norm, a BLAS dot product that fuses multiply-adds on
        # some processors and not on others, so the recorded value can be an ulp away from the
        # unfused one the grader gives on every machine (evaluation/metrics/portable.py).
        return abs(got - expected) <= 2 * math.ulp(expected)
    if isinstance(expected, float) and math.isnan(expected):
        return got is None or (isinstance(got, float) and math.isnan(got))
    if isinstance(expected, float) and math.isinf(expected):
        return got is None  # metrics.json: null
    return got == expected and type(got) is type(expected) if isinstance(expected, int) else got == expected


def compare_tables(got: Path, expected: Path) -> int:
    header, rows = read_table(got)
    expected_header, expected_rows = read_table(expected)
    assert header == expected_header
    assert list(rows) == list(expected_rows)
    compared = 0
    for subject, values in expected_rows.items():
        for column, a, b in zip(header[1:], rows[subject], values):
            assert a == b or (math.isnan(a) and math.isnan(b)), (subject, column, a, b)
            compared += 1
    return compared


def run_preset(tmp_path: Path, task: str):
    single = task == "menrt"
    root = phase(tmp_path, f"suite: segmentation\npreset: brats-{task}\n", "truth1" if single else "truth")
    return run_cli(KIT / "cases" / ("pred1" if single else "pred"), root, tmp_path / "out")


def check_preset(tmp_path: Path, task: str) -> None:
    run = run_preset(tmp_path, task)
    reference = json.loads((KIT / "panoptica" / f"{TASKS[task]}.json").read_text())
    # a label no group defines: the reference leaves the subject out, the grader says why
    failing = {e["subject_name"].removesuffix(".nii.gz") for e in reference["metrics"] if "error" in e}
    if failing:
        assert run.code == 2, run.stderr[-2000:]
        assert "labels that no class group defines" in run.last_line
    assert compare_tables(run.output / "brats.csv", KIT / "tables" / f"{TASKS[task]}.csv") > 0
    statuses = {case: value["status"] for case, value in run.metrics["case"].items()}
    for missing in reference["missings"]:
        assert statuses[missing.removesuffix(".nii.gz")] == "missing"
    assert {case for case, status in statuses.items() if status == "failed"} == failing
    assert compare_package_summary(run, reference, task) > 0


def compare_package_summary(run, reference: dict, task: str) -> int:
    """Every value of BraTS_evaluation's summary for each case and group (not only the table's
    fields) is in metrics.json, under ``case.<case>.summary.<group>``."""
    compared = 0
    for entry in reference["metrics"]:
        case = entry["subject_name"].removesuffix(".nii.gz")
        if "error" in entry:
            continue
        for group, expected in entry.items():
            if group == "subject_name":
                continue
            got = run.metrics["case"][case]["summary"][group]
            for key, value in expected.items():
                if key != "reference_instances":
                    assert same(got[key], value, key), (case, group, key, got[key], value)
                    compared += 1
            if task == "mets":  # the ordinary table's lesion-wise columns too
                assert {k for k in got if k.startswith("seg_lesionwise_")} == {
                    f"seg_lesionwise_{m}_{s}" for m in ("dsc", "nsd", "hd95") for s in ("mean", "std")
                }
    return compared


def test_brats_gli_table_through_the_command_line(tmp_path):
    check_preset(tmp_path, "gli")


@pytest.mark.slow
@pytest.mark.parametrize("task", ["mets", "ped", "menrt", "menpre", "goat"])
def test_brats_tables_through_the_command_line(tmp_path, task):
    check_preset(tmp_path, task)


def test_brats_statistics_and_leaderboard(tmp_path):
    """metrics.json's per-region statistics are the table's mean/std/median rows."""
    run = run_preset(tmp_path, "gli")
    header, rows = read_table(KIT / "tables" / "gli.csv")
    aggregates = run.metrics["aggregates"]["classes"]
    compared = 0
    for column, mean, std, median in zip(header[1:], rows["mean"], rows["std"], rows["median"]):
        field, region = column.rsplit("_", 1)
        found = aggregates[region][field]
        for got, expected in ((found["mean"], mean), (found["std"], std), (found["median"], median)):
            assert same(got, expected), (column, got, expected)
            compared += 1
    assert compared == 3 * 90
    assert run.metrics["aggregates"]["ranking"]["key"] == "lesionwise_dsc_mean"


# --------------------------------------------------------------------------------------------
# panoptica's own configuration files


def compare_panoptica(run, reference: dict) -> int:
    metrics = run.metrics["case"]
    instances = json.loads((run.output / "instances.json").read_text())
    compared = 0
    for entry in reference["metrics"]:
        case = entry["subject_name"].removesuffix(".nii.gz")
        if "error" in entry:
            assert metrics[case]["status"] == "failed"
            continue
        for group, expected in entry.items():
            if group == "subject_name":
                continue
            expected = dict(expected)
            rows = expected.pop("reference_instances")
            got = metrics[case]["classes"][group]
            assert set(got) == set(expected)  # panoptica leaves out what it cannot compute (0/0 precision)
            for key, value in expected.items():
                assert same(got[key], value, key), (case, group, key, got[key], value)
                compared += 1
            got_rows = instances[case][group]["reference_instances"]
            assert len(got_rows) == len(rows)
            for got_row, row in zip(got_rows, rows):
                assert list(got_row) == list(row)
                for key, value in row.items():
                    assert same(got_row[key], value, key), (case, group, key, got_row[key], value)
                    compared += 1
    return compared


@pytest.mark.parametrize("config", ["custom_naive", "custom_merge"])
def test_panoptica_configuration_file(tmp_path, config):
    root = phase(
        tmp_path,
        f"suite: segmentation\npanoptica: {config}.yaml\nmissing_cases: skip\n",
        extra={f"{config}.yaml": KIT / "configs" / f"{config}.yaml"},
    )
    run = run_cli(KIT / "cases" / "pred", root, tmp_path / "out")
    assert run.code == 2  # case 00007's label 5
    reference = json.loads((KIT / "panoptica" / f"{config}.json").read_text())
    assert compare_panoptica(run, reference) > 500


def test_panoptica_fields_inline(tmp_path):
    """The same configuration written in phase.yaml, tags as 'type' keys."""
    import yaml

    from evaluation.suites.segmentation.panoptica_config import read_file

    fields = read_file(KIT / "configs" / "custom_merge.yaml")
    root = phase(tmp_path, yaml.safe_dump({"suite": "segmentation", "panoptica": fields, "missing_cases": "skip"}))
    run = run_cli(KIT / "cases" / "pred", root, tmp_path / "out")
    reference = json.loads((KIT / "panoptica" / "custom_merge.json").read_text())
    assert compare_panoptica(run, reference) > 300


# --------------------------------------------------------------------------------------------
# BraTS 2023


def check_2023(tmp_path: Path, challenge: str) -> int:
    root = phase(tmp_path, f"suite: segmentation\npreset: brats2023-{challenge}\nmissing_cases: skip\n")
    run = run_cli(KIT / "cases" / "pred", root, tmp_path / "out")
    assert run.code == 0, run.stderr[-2000:]
    reference = json.loads((KIT / "brats2023.json").read_text())[CHALLENGES[challenge]]
    compared = 0
    for case, entry in reference.items():
        for row in entry["rows"]:
            got = run.metrics["case"][case]["classes"][row["Labels"].lower()]
            for key, value in row.items():
                if key != "Labels":
                    assert got[key] == value, (case, row["Labels"], key, got[key], value)
                    compared += 1
    return compared


def test_brats2023_gli_through_the_command_line(tmp_path):
    assert check_2023(tmp_path, "gli") == 7 * 3 * 10


@pytest.mark.slow
@pytest.mark.parametrize("challenge", ["ssa", "men", "ped", "met"])
def test_brats2023_challenges(tmp_path, challenge):
    assert check_2023(tmp_path, challenge) == 7 * 3 * 10


# --------------------------------------------------------------------------------------------
# The quirks' corrections, against the packages run as corrected (corrections.json) or values
# computed here from the maps


CORRECTED = json.loads((KIT / "corrections.json").read_text())


def run_corrected(tmp_path: Path, corrections: list[str], preset: str = "brats-gli", pred: Path | None = None):
    root = phase(tmp_path, f"suite: segmentation\npreset: {preset}\ncorrections: {json.dumps(corrections)}\n")
    return run_cli(pred or KIT / "cases" / "pred", root, tmp_path / "out")


def test_corrected_spacing(tmp_path):
    """panoptica_spacing_order: per-instance values as panoptica gives them with each axis's
    own spacing; panoptica_global_spacing: global values as its metrics give them with that
    spacing (NSD at the smallest spacing)."""
    run = run_corrected(tmp_path, ["panoptica_spacing_order", "panoptica_global_spacing"], "brats-gli")
    rows = {}
    with (run.output / "brats.csv").open() as handle:
        for row in csv.DictReader(handle):
            rows[row["subject_id"]] = row
    got = rows["BraTS-GLI-00006-000.nii.gz"]
    compared = 0
    for group, expected in CORRECTED["spacing_order"].items():
        for field, key in (
            ("lesionwise_dsc_mean", "sq_dsc"),
            ("lesionwise_hd95_mean", "sq_hd95"),
            ("lesionwise_nsd_mean", "sq_nsd"),
        ):
            value = expected.get(key)
            value = math.nan if value is None else value
            cell = float(got[f"{field}_{group}"]) if got[f"{field}_{group}"] else math.nan
            assert cell == value or (math.isnan(cell) and math.isnan(value)), (group, field, cell, value)
            compared += 1
    for group, expected in CORRECTED["global_spacing"].items():
        for field, key in (("global_dsc", "DSC"), ("global_nsd", "NSD"), ("global_hd95", "HD95")):
            assert float(got[f"{field}_{group}"]) == expected[key], (group, field)
            compared += 1
    assert compared == 33


def test_corrected_failed_and_missing_cases(tmp_path):
    """brats_failed_cases: the failing subject gets the penalty row; brats_missing_rows: the
    missing subject is scored as an empty prediction (the package's own row for it)."""
    run = run_corrected(tmp_path, ["brats_failed_cases", "brats_missing_rows"])
    header, rows = read_table(run.output / "brats.csv")
    failed = dict(zip(header[1:], rows["BraTS-GLI-00007-000.nii.gz"]))
    assert all(v == (373 if "hd95" in k and "std" not in k else 0) for k, v in failed.items())
    missing = dict(zip(header[1:], rows["BraTS-GLI-00008-000.nii.gz"]))
    expected = CORRECTED["empty_prediction_row"]
    for key, value in missing.items():
        reference = float(expected[key]) if expected[key] else math.nan
        assert value == reference or (math.isnan(value) and math.isnan(reference)), (key, value, reference)
    assert list(rows)[-5:-3] == ["BraTS-GLI-00008-000.nii.gz", "BraTS-GLI-00007-000.nii.gz"]


def test_corrected_lesionwise_infinity(tmp_path):
    """brats_lesionwise_inf: the reference table with an infinite lesion-wise HD95 as 373, and
    its statistics then finite (here recomputed with numpy)."""
    run = run_corrected(tmp_path, ["brats_lesionwise_inf"])
    header, rows = read_table(run.output / "brats.csv")
    _, reference = read_table(KIT / "tables" / "gli.csv")
    subjects = [s for s in reference if s not in ("mean", "std", "median")]
    for column_index, column in enumerate(header[1:]):
        values = []
        for subject in subjects:
            value = reference[subject][column_index]
            value = 373.0 if "lesionwise_hd95_mean" in column and math.isinf(value) else value
            assert rows[subject][column_index] == value or (math.isnan(value) and math.isnan(rows[subject][column_index]))
            values.append(value)
        kept = np.array([v for v in values if not math.isnan(v)])
        if kept.size and "lesionwise_hd95_mean" in column:
            assert math.isclose(rows["mean"][column_index], kept.mean(), rel_tol=1e-12)
            assert math.isclose(rows["std"][column_index], kept.std(ddof=1), rel_tol=1e-12)
            assert math.isfinite(rows["mean"][column_index])


def write_nifti(array: np.ndarray, path: Path) -> None:
    import SimpleITK as sitk

    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(sitk.GetImageFromArray(array), str(path))


def test_corrected_mets_false_positives_by_size(tmp_path):
    """One 125-voxel metastasis predicted exactly, a 27-voxel and two 1-voxel false positives:
    the package penalises the large lesions' mean with all three (Dice 1/4), corrected with
    the large one only (1/2); the small F1 is not defined (no small lesion in the truth)."""
    truth = np.zeros((30, 30, 30), np.uint8)
    truth[5:10, 5:10, 5:10] = 3
    pred = truth.copy()
    pred[20:23, 20:23, 20:23] = 3
    pred[2, 25, 25] = pred[27, 2, 2] = 3
    write_nifti(truth, tmp_path / "phase" / "labels" / "BraTS-MET-00001-000.nii.gz")
    write_nifti(pred, tmp_path / "pred" / "BraTS-MET-00001-000.nii.gz")
    (tmp_path / "phase" / "phase.yaml").write_text("suite: segmentation\npreset: brats-mets\n")
    run = run_cli(tmp_path / "pred", tmp_path / "phase", tmp_path / "out")
    et = run.metrics["case"]["BraTS-MET-00001-000"]["classes"]["et"]
    assert (et["large_instance_fp"], et["lesionwise_dsc_mean"], et["large_instance_f1"]) == (3, 0.25, 2 / 5)
    (tmp_path / "phase" / "phase.yaml").write_text(
        "suite: segmentation\npreset: brats-mets\ncorrections: [brats_mets_fp_by_size]\n"
    )
    run = run_cli(tmp_path / "pred", tmp_path / "phase", tmp_path / "out2")
    et = run.metrics["case"]["BraTS-MET-00001-000"]["classes"]["et"]
    assert (et["large_instance_fp"], et["lesionwise_dsc_mean"], et["large_instance_f1"]) == (1, 0.5, 2 / 3)
    assert et["small_instance_fp"] is None  # no small lesion in the truth: NaN, as without the correction


def test_corrected_2023_false_positive_volume(tmp_path):
    """brats2023_fp_min_volume: false positives (predicted components not touching the
    dilated truth) count only above the lesion volume threshold; here counted with scipy."""
    from scipy import ndimage

    root = phase(
        tmp_path, "suite: segmentation\npreset: brats2023-gli\nmissing_cases: skip\ncorrections: [brats2023_fp_min_volume]\n"
    )
    run = run_cli(KIT / "cases" / "pred", root, tmp_path / "out")
    import SimpleITK as sitk

    compared = 0
    for case in ("BraTS-GLI-00002-000", "BraTS-GLI-00005-000"):
        truth = sitk.GetArrayFromImage(sitk.ReadImage(str(KIT / "cases" / "truth" / f"{case}.nii.gz")))
        pred = sitk.GetArrayFromImage(sitk.ReadImage(str(KIT / "cases" / "pred" / f"{case}.nii.gz")))
        for region, labels in (("wt", [1, 2, 3]), ("tc", [1, 3]), ("et", [3])):
            near = ndimage.binary_dilation(np.isin(truth, labels), ndimage.generate_binary_structure(3, 2), iterations=3)
            components, n = ndimage.label(np.isin(pred, labels), ndimage.generate_binary_structure(3, 3))
            sizes = np.bincount(components.ravel())
            touching = set(np.unique(components[near]))
            expected = sum(1 for c in range(1, n + 1) if c not in touching and sizes[c] > 50)
            assert run.metrics["case"][case]["classes"][region]["Num_FP"] == expected, (case, region)
            compared += 1
    assert compared == 6


# --------------------------------------------------------------------------------------------
# The packages themselves, where they are installed


@pytest.mark.slow
@pytest.mark.parametrize("task", ["gli", "mets"])
def test_against_the_installed_package(tmp_path, task):
    """BraTS_evaluation itself (with its panoptica) on the fixture cases, its table compared
    with the command line's, cell by cell."""
    pytest.importorskip("brats_evaluation")
    from brats_evaluation import config_path, evaluate_single_exam, parse_mets_results, parse_seg_results
    from panoptica import Panoptica_Evaluator

    evaluator = Panoptica_Evaluator.load_from_config(str(config_path(TASKS[task])))
    results = {"metrics": [], "missings": []}
    for truth in sorted((KIT / "cases" / "truth").glob("*.nii.gz")):
        pred = KIT / "cases" / "pred" / truth.name
        if not pred.exists():
            results["missings"].append(truth.name)
            continue
        results["metrics"].append(evaluate_single_exam(str(pred), str(truth), truth.name, evaluator))
    (tmp_path / "summary.json").write_text(json.dumps(results, default=float))
    table = tmp_path / "table.csv"
    if task == "mets":
        parse_mets_results(str(tmp_path / "summary.json"), 20.0, 0.1, str(table))
    else:
        parse_seg_results(str(tmp_path / "summary.json"), str(table))
    run = run_preset(tmp_path, task)
    assert compare_tables(run.output / "brats.csv", table) > 0


@pytest.mark.slow
def test_against_the_2023_code(tmp_path):
    """The BraTS 2023 code itself, where BRATS2023_METRICS names its checkout and
    BRATS2023_PYTHON a Python with its pinned requirements (it needs pandas < 2)."""
    import os
    import subprocess

    code, python = os.environ.get("BRATS2023_METRICS"), os.environ.get("BRATS2023_PYTHON")
    if not code or not python:
        pytest.skip("set BRATS2023_METRICS and BRATS2023_PYTHON to run the BraTS 2023 code")
    script = (
        "import json, sys, warnings; warnings.filterwarnings('ignore'); sys.path.insert(0, sys.argv[1]); import metrics\n"
        "df = metrics.get_LesionWiseResults(sys.argv[2], sys.argv[3], 'BraTS-MET')\n"
        "print(json.dumps([{k: (v.item() if hasattr(v, 'item') else v) for k, v in r.items()} for r in df.to_dict('records')]))"
    )
    case = "BraTS-GLI-00005-000.nii.gz"
    found = subprocess.run(
        [python, "-c", script, code, str(KIT / "cases" / "pred" / case), str(KIT / "cases" / "truth" / case)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = json.loads(found.stdout.strip().splitlines()[-1])
    root = phase(tmp_path, "suite: segmentation\npreset: brats2023-met\nmissing_cases: skip\n")
    run = run_cli(KIT / "cases" / "pred", root, tmp_path / "out")
    for row in rows:
        got = run.metrics["case"]["BraTS-GLI-00005-000"]["classes"][row["Labels"].lower()]
        assert all(got[k] == v for k, v in row.items() if k != "Labels"), row


def test_panoptica_configuration_is_read_as_data_only(tmp_path):
    """A YAML that asks for Python objects is refused, never constructed; unknown fields and
    unsupported parts name themselves."""
    from evaluation.errors import PhaseError
    from evaluation.suites.segmentation.panoptica_config import parse, read_file

    hostile = tmp_path / "hostile.yaml"
    hostile.write_text("!!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(PhaseError, match="cannot be read"):
        read_file(hostile)
    assert not (tmp_path / "pwned").exists()
    fields = read_file(KIT / "configs" / "custom_naive.yaml")
    with pytest.raises(PhaseError, match="unknown fields"):
        parse({**fields, "colour": "blue"})
    with pytest.raises(PhaseError, match="per_region_evaluation"):
        parse({**fields, "per_region_evaluation": True})
    groups = {"groups": {"x": {"type": "LabelPartGroup", "value_labels": [1]}}}
    with pytest.raises(PhaseError, match="LabelPartGroup is not supported"):
        parse({**fields, "segmentation_class_groups": groups})
    from evaluation.phase import Phase
    from evaluation.suites.segmentation.options import Options

    with pytest.raises(PhaseError, match="defines its own classes and metrics; remove classes"):
        Options.from_phase(Phase(tmp_path, "segmentation", {"preset": "brats-gli", "classes": [1, 2]}))


def test_brats2023_reads_a_negative_truth_label_as_background(tmp_path):
    """The 2023 code reads each region as its labels' mask, so -1 (some label maps mark
    unlabelled voxels so) is background: the same values as with 0 there, not a broken phase."""
    import SimpleITK as sitk

    clean = phase(tmp_path / "clean", "suite: segmentation\npreset: brats2023-gli\nmissing_cases: skip\n")
    marked = phase(tmp_path / "marked", "suite: segmentation\npreset: brats2023-gli\nmissing_cases: skip\n")
    for path in sorted((marked / "labels").iterdir()):
        image = sitk.ReadImage(str(path))
        array = sitk.GetArrayFromImage(image).astype("int16")
        array[0][array[0] == 0] = -1  # the first slice's background
        marked_image = sitk.GetImageFromArray(array)
        marked_image.CopyInformation(image)
        sitk.WriteImage(marked_image, str(path))
    runs = [run_cli(KIT / "cases" / "pred", root, tmp_path / f"out-{root.parent.name}") for root in (clean, marked)]
    assert [run.code for run in runs] == [0, 0], runs[1].stderr[-1000:]
    assert runs[0].metrics["case"] == runs[1].metrics["case"]
