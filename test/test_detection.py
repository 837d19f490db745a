"""The detection suite (picai_eval 1.4.13): the reference's values in process (softmax
extraction, ``Metrics`` from rows, the edge cases), hand-computed and property checks, and the
command line: likelihoods in every accepted form, missing cases, corrections, the report
files, the preflight, and every message a participant can get (exit 2, the last line)."""

import csv
import hashlib
import io
import json
import shutil
import uuid

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.detection_cases import (
    FIXTURE,
    FPR_POINTS,
    det_cases,
    edge_arrays,
    expected,
    lay_out,
    softmax_cases,
    write_image,
)
from helpers.grading import run_cli, validate_metrics
from test_detection_parity import POINTS, same, value

from evaluation.phase import Phase
from evaluation.report import sanitize
from evaluation.suites.detection import aggregate, candidates, curves, lesions
from evaluation.suites.detection.options import Options

EXPECTED = expected()
BASE = "suite: detection\n"


def options_of(**changes) -> Options:
    return Options.from_phase(Phase(root=FIXTURE, suite="detection", options={"fp_per_case": FPR_POINTS, **changes}))


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# The fixture's files are what the generator makes


def test_the_generator_makes_the_fixture_files():
    for case, (det, lab, spacing, _) in det_cases().items():
        ext = ".mha" if case == "case_17" else ".nii.gz"
        image = sitk.ReadImage(str(FIXTURE / "cases" / f"{case}_detection_map{ext}"))
        assert np.array_equal(sitk.GetArrayFromImage(image), det), case
        assert np.allclose(image.GetSpacing()[::-1], spacing)
        assert np.array_equal(sitk.GetArrayFromImage(sitk.ReadImage(str(FIXTURE / "cases" / f"{case}_label{ext}"))), lab)
    for case, (softmax, lab, _) in softmax_cases().items():
        assert np.array_equal(
            sitk.GetArrayFromImage(sitk.ReadImage(str(FIXTURE / "softmax" / "pred" / f"{case}.nii.gz"))), softmax
        )
        assert np.array_equal(
            sitk.GetArrayFromImage(sitk.ReadImage(str(FIXTURE / "softmax" / "labels" / f"{case}_label.nii.gz"))), lab
        )


# --------------------------------------------------------------------------------------------
# The reference's values, in process


def extraction_settings(recorded: dict):
    changes = {k: v for k, v in recorded.items() if k != "mode"}
    mode = recorded["mode"]
    return options_of(input="softmax", extraction=float(mode) if not str(mode).startswith("dynamic") else mode, **changes)


@pytest.mark.parametrize("name", sorted(EXPECTED["softmax_extraction"]))
def test_softmax_extraction_is_the_reference_map_voxel_for_voxel(name):
    """report_guided_annotation 0.3.4's detection map of each softmax case: the same bytes
    (SHA-256), the same values."""
    entry = EXPECTED["softmax_extraction"][name]
    settings = extraction_settings(entry["options"]).extraction_settings()
    for case, (softmax, _, _) in softmax_cases().items():
        found = candidates.extract(softmax.astype(np.float32), settings)
        want = entry["cases"][case]["map"]
        assert (str(found.dtype), digest(found), int(np.count_nonzero(found))) == (
            want["dtype"],
            want["sha256"],
            want["nonzero"],
        ), case
        assert [float(v) for v in np.unique(found)] == want["unique"]


def synthetic_rows(n: int, cases: int) -> dict:
    """The rows ``expected.json``'s 'direct' cases were made of (many thresholds)."""
    rows = {}
    for i in range(n):
        confidence = ((i * 7919) % 100003) / 100003.0
        is_lesion = 1 if (i * 31) % 7 == 0 else 0
        if is_lesion and i % 5 == 0:
            confidence = 0.0
        rows.setdefault(f"s{i % cases:04d}", []).append((is_lesion, confidence, 0.5 if is_lesion and confidence > 0 else 0.0))
    return rows


DIRECT = {
    "repo_test_like": {
        "0": [(0, 1, 1.0)],
        "1": [(0, 2, 1.0)],
        "2": [(1, 3, 1.0)],
        "3": [(1, 1, 1.0), (1, 1, 1.0)],
        "4": [(0, 3, 1.0)],
        "5": [(1, 2.5, 1.0), (1, 1.5, 1.0)],
    },
    "synth_9000": synthetic_rows(9000, 300),
    "synth_12000": synthetic_rows(12000, 300),
    "synth_25000": synthetic_rows(25000, 300),
}


def dataset_of(rows: dict, weights: dict | None = None, pred: dict | None = None) -> aggregate.Dataset:
    """``Metrics(lesion_results=rows)``: targets and predictions from the rows, as its defaults."""
    cases = sorted(rows)
    return aggregate.Dataset(
        cases,
        rows,
        np.array([max((r[0] for r in rows[c]), default=0) for c in cases]),
        np.array([pred[c] if pred else max((r[1] for r in rows[c]), default=0) for c in cases], dtype=np.float64),
        np.array([(weights or {}).get(c, 1) for c in cases], dtype=np.float64),
    )


def metrics_of(data: aggregate.Dataset, **changes) -> dict:
    """The aggregates as metrics.json holds them (undefined values null)."""
    options = options_of(**changes)
    return sanitize(aggregate.aggregates(options, data, aggregate.Curves.of(options, data), "max", 0))


def array_differences(found: dict, recorded: dict) -> list[str]:
    """Recorded arrays: values, or for long ones the SHA-256 of the array in its dtype."""
    problems = []
    for key in (
        "precision",
        "recall",
        "lesion_TP",
        "lesion_FP",
        "lesion_TPR",
        "lesion_FPR",
        "thresholds",
        "case_TPR",
        "case_FPR",
    ):
        if "error" in recorded[key]:  # the reference raises (no row at all): null here
            problems += [] if found[key] is None else [f"{key}: expected undefined, got {found[key]!r}"]
            continue
        want = recorded[key]["ok"]
        mine = np.array(
            [np.inf if v is None and key in ("lesion_FP", "lesion_FPR") else np.nan if v is None else v for v in found[key]]
        )
        if "values" in want:
            problems += same(found[key], want["values"], key)
        elif digest(mine.astype(want["dtype"])) != want["sha256"] or mine.size != want["len"]:
            problems.append(f"{key}: differs from the reference's array (length {mine.size}, expected {want['len']})")
    return problems


@pytest.mark.parametrize("name", sorted(DIRECT))
def test_metrics_from_rows(name):
    """``Metrics`` of rows alone, up to 25,000 thresholds (the FROC's thinning, reproduced)."""
    recorded = EXPECTED["direct"][name]["metrics"]
    found = metrics_of(dataset_of(DIRECT[name]))
    for key in ("auroc", "AP", "score", "num_cases", "num_lesions"):
        assert same(found[key], value(recorded[key]), key) == []
    assert array_differences(found, recorded) == []
    for point, entry in recorded["lesion_TPR_at_FPR"].items():
        assert same(found["lesion_TPR_at_FPR_" + point.replace(".", "_")], value(entry), point) == []


ACCEPTED_EDGES = [
    "all_empty",
    "negatives_only",
    "single_threshold",
    "lesions_one_missed_no_fp",
    "over_one",
    "nonconstant_accepted",
    "label_fraction_truncates",
    "min_overlap_zero_far_candidate",
]


@pytest.mark.parametrize("name", ACCEPTED_EDGES)
def test_edge_cases_the_reference_scores(name):
    """Each case's rows and confidence, and every value of ``Metrics``, as the reference's."""
    recorded = EXPECTED["edge"][name]
    options = options_of(**recorded["options"])
    rows, pred = {}, {}
    for i, (det, lab) in enumerate(edge_arrays()[name]):
        found = lesions.evaluate(candidates.blobs(det, "map"), lab, options.matching())
        want = recorded["cases"][str(i)]
        assert same([list(r) for r in found.rows], want["lesion_results"], f"{i}/rows") == []
        assert same(found.case_pred, want["case_confidence"]["value"], f"{i}/confidence") == []
        rows[str(i)], pred[str(i)] = found.rows, found.case_pred
    found = metrics_of(dataset_of(rows, pred=pred), **recorded["options"])
    for key in ("auroc", "AP", "score", "num_cases", "num_lesions"):
        assert same(found[key], value(recorded["metrics"][key]), key) == []
    assert array_differences(found, recorded["metrics"]) == []


def test_a_zero_weight_on_the_only_lesion_case():
    """Its rows leave the precision-recall and ROC curves, not the FROC (edge case)."""
    recorded = EXPECTED["edge"]["zero_weight_on_only_lesion_case"]["metrics"]
    rows = {"0": [(1, 0.5, 1.0)], "1": [(0, 0.25, 0.0)]}
    found = metrics_of(dataset_of(rows, weights={"0": 0.0, "1": 1.0}))
    for key in ("auroc", "AP", "score", "num_lesions"):
        assert same(found[key], value(recorded[key]), key) == []
    assert array_differences(found, recorded) == []


# --------------------------------------------------------------------------------------------
# Hand-computed values and properties


def test_perfectly_separated_cases_have_auroc_one_and_ap_one():
    rows = {"a": [(1, 0.9, 0.8)], "b": [(1, 0.7, 0.6)], "c": [(0, 0.2, 0.0)], "d": []}
    found = metrics_of(dataset_of(rows))
    assert found["auroc"] == 1.0
    # the FP at 0.2 comes after every lesion: precision 1 all the way to recall 1
    assert found["AP"] == 1.0 and found["score"] == 1.0


def test_ap_by_hand():
    """Lesions found at 0.9 and 0.5, one missed; false positives at 0.7 and 0.5:
    at 0.9 P=1 R=1/3; at 0.7 P=1/2; at 0.5 (a lesion and a FP) P=2/4 R=2/3; the missed
    lesion adds recall at precision 0. AP = 1/3 * 1 + 1/3 * 1/2."""
    rows = {"a": [(1, 0.9, 0.5), (0, 0.7, 0.0)], "b": [(1, 0.5, 0.4), (1, 0.0, 0.0), (0, 0.5, 0.0)]}
    found = metrics_of(dataset_of(rows))
    assert found["AP"] == pytest.approx(1 / 3 + 1 / 6, rel=1e-12)
    assert found["num_lesions"] == 3 and found["num_false_positives"] == 2 and found["num_false_negatives"] == 1
    # FROC: thresholds 0.9, 0.7, 0.5, 0.0; the last point is the reference's (TP[-2], inf)
    assert found["thresholds"] == [0.9, 0.7, 0.5, 0.0]
    assert found["lesion_TP"] == [1.0, 1.0, 2.0, 2.0] and found["lesion_FP"][:3] == [0.0, 1.0, 2.0]
    assert found["lesion_FP"][3] is None  # infinity
    corrected = metrics_of(dataset_of(rows), corrections=["froc_last_point"])
    assert corrected["lesion_TP"] == [1.0, 1.0, 2.0, 3.0] and corrected["lesion_FP"] == [0.0, 1.0, 2.0, 2.0]


def random_rows(rng, cases: int) -> dict:
    rows = {}
    for k in range(cases):
        lesions_found = [(1, float(np.float32(rng.random())), 0.5) for _ in range(rng.integers(0, 3))]
        missed = [(1, 0.0, 0.0)] * int(rng.integers(0, 2))
        fps = [(0, float(np.float32(rng.random())), 0.0) for _ in range(rng.integers(0, 3))]
        rows[f"c{k:03d}"] = lesions_found + missed + fps
    return rows


@pytest.mark.parametrize("seed", range(5))
def test_case_order_and_names_do_not_change_the_values(seed):
    """Renaming the cases (another sorted order) changes no value of the curves."""
    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 30)
    names = list(rows)
    shuffled = dict(zip([f"x{k:03d}" for k in rng.permutation(len(names))], rows.values()))
    a, b = metrics_of(dataset_of(rows)), metrics_of(dataset_of(shuffled))
    for key in ("auroc", "AP", "thresholds", "lesion_TP", "lesion_FP", "lesion_TPR_at_FPR_0_5"):
        assert a[key] == b[key], key


def test_lesion_label_values_and_flips_do_not_change_a_case():
    """Any non-zero truth value is lesion tissue; mirroring both volumes reorders the blobs
    but, without ties, gives the same rows."""
    det, lab, _, _ = det_cases()["case_04"]
    matching = options_of().matching()
    found = lesions.evaluate(candidates.blobs(det, "map"), lab, matching)
    relabelled = lesions.evaluate(candidates.blobs(det, "map"), lab.astype(np.int16) * 7, matching)
    mirrored = lesions.evaluate(candidates.blobs(det[:, ::-1, ::-1].copy(), "map"), lab[:, ::-1, ::-1].copy(), matching)
    assert relabelled.rows == found.rows
    assert sorted(mirrored.rows) == sorted(found.rows) and mirrored.case_pred == found.case_pred


def test_jackknife_case_scores_average_near_the_score():
    rng = np.random.default_rng(3)
    rows = random_rows(rng, 60)
    data = dataset_of(rows)
    score = data.score(data.everyone)
    scores = aggregate.jackknife(data, score)
    assert len(scores) == 60
    assert abs(np.mean(list(scores.values())) - score) < 0.05


def test_disjoint_never_match_correction():
    """min_overlap 0: the reference lets a disjoint candidate hit a lesion (overlap ~5e-9);
    the correction does not."""
    det, lab = edge_arrays()["min_overlap_zero_far_candidate"][0]
    found = candidates.blobs(det, "map")
    assert lesions.evaluate(found, lab, options_of(min_overlap=0.0).matching()).rows[0][0:2] == (1, 0.5)
    corrected = options_of(min_overlap=0.0, corrections=["disjoint_never_match"]).matching()
    assert lesions.evaluate(found, lab, corrected).rows == [(1, 0.0, 0.0), (0, 0.5, 0.0)]


def test_interpolation_free_sensitivity():
    """lesion_TPR_at_FPR: 0 below the first operating point, else the last point at or
    below the rate (compared in float32)."""
    tpr = np.array([0.1, 0.5, 0.7], np.float32)
    fpr = np.array([0.2, 0.4, 1.0], np.float32) / np.float32(1)
    assert curves.tpr_at_fpr(tpr, fpr, 0.1) == 0.0
    assert curves.tpr_at_fpr(tpr, fpr, 0.5) == float(np.float32(0.5))
    assert curves.tpr_at_fpr(tpr, fpr, 5.0) == float(np.float32(0.7))


# --------------------------------------------------------------------------------------------
# The command line


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("detection")
    phase, submission = lay_out(root, BASE + POINTS)
    run = run_cli(submission, phase, root / "out")
    assert run.code == 0, run.stderr
    return run


def test_written_files(default_run):
    """metrics.json (schema-valid), curves.csv (every point of the three curves), curves.html;
    the leaderboard ranks by the score; a case score per case (jackknife pseudo-values)."""
    metrics = default_run.metrics
    validate_metrics(metrics)
    assert metrics["leaderboard"]["score"] == metrics["aggregates"]["score"]
    rows = list(csv.reader(io.StringIO((default_run.output / "curves.csv").read_text())))
    assert rows[0] == ["curve", "threshold", "x", "y"]
    kinds = [r[0] for r in rows[1:]]
    aggregates = metrics["aggregates"]
    assert kinds.count("froc") == len(aggregates["thresholds"])
    assert kinds.count("precision_recall") == len(aggregates["precision"])
    assert kinds.count("roc") == len(aggregates["case_TPR"])
    assert (default_run.output / "curves.html").read_text().count("<svg") == 3
    assert metrics["aggregates"]["ranking_ci"]["cases"] == 25
    assert metrics["case"]["case_04"]["prediction_file"] == "case_04.nii.gz"


def test_report_false_draws_no_plot(tmp_path):
    phase, submission = lay_out(tmp_path, BASE + "report: false\n", cases=["case_02", "case_03", "case_12"])
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    assert (tmp_path / "out" / "curves.csv").is_file() and not (tmp_path / "out" / "curves.html").exists()


def test_likelihoods_as_csv_equal_json(tmp_path, default_run):
    """The submitted likelihoods replace the case confidence in the AUROC (the PI-CAI
    Grand-Challenge evaluation); a CSV and a JSON object give the same values. The map's own
    case confidence is kept beside it."""
    given = {f"case_{i:02d}": round((i * 37 % 25) / 25, 2) for i in range(25)}
    outs = {}
    for kind in ("json", "csv"):
        phase, submission = lay_out(tmp_path / kind, BASE + POINTS + f"likelihood_file: scores.{kind}\n")
        text = json.dumps(given) if kind == "json" else "case,likelihood\n" + "".join(f"{c},{v!r}\n" for c, v in given.items())
        (submission / f"scores.{kind}").write_text(text)
        run = run_cli(submission, phase, tmp_path / kind / "out")
        assert run.code == 0, run.stderr
        outs[kind] = run.metrics
    assert outs["json"]["aggregates"] == outs["csv"]["aggregates"]
    found = outs["json"]
    assert found["aggregates"]["case_pred_source"] == "likelihoods"
    assert found["case"]["case_07"]["case_pred"] == given["case_07"]
    assert found["case"]["case_07"]["case_confidence"] == default_run.metrics["case"]["case_07"]["case_pred"]
    assert found["aggregates"]["AP"] == default_run.metrics["aggregates"]["AP"]  # AP and FROC use the maps
    assert found["aggregates"]["auroc"] != default_run.metrics["aggregates"]["auroc"]


def _job(pk: str, case: str) -> dict:
    image = {"slug": "transverse-t2-prostate-mri", "kind": "Image", "super_kind": "Image", "relative_path": "images/t2"}
    output = {
        "slug": "cspca-detection-map",
        "kind": "Heat Map",
        "super_kind": "Image",
        "relative_path": "images/cspca-detection-map",
    }
    value = {
        "slug": "cspca-case-level-likelihood",
        "kind": "Float",
        "super_kind": "Value",
        "relative_path": "cspca-case-level-likelihood.json",
    }
    return {
        "pk": pk,
        "inputs": [{"interface": image, "image": {"pk": "i", "name": f"{case}.mha"}, "file": None, "value": None}],
        "outputs": [
            {"interface": output, "image": {"pk": "o", "name": "map.mha"}, "file": None, "value": None},
            {"interface": value, "image": None, "file": None, "value": 0.5},
        ],
    }


def test_grand_challenge_algorithm_jobs_with_likelihood_outputs(tmp_path):
    """Each algorithm job's detection map and its likelihood output file, as the PI-CAI
    container reads them."""
    cases = ["case_02", "case_03", "case_04", "case_12"]
    phase, flat = lay_out(
        tmp_path, BASE + "likelihood_file: cspca-case-level-likelihood.json\nlikelihoods: required\n", cases=cases
    )
    root = tmp_path / "gc"
    jobs = []
    for i, case in enumerate(cases):
        pk = f"00000000-0000-0000-0000-{i:012d}"
        jobs.append(_job(pk, case))
        folder = root / pk / "output" / "images" / "cspca-detection-map"
        folder.mkdir(parents=True)
        image = sitk.ReadImage(str(next(flat.glob(f"{case}.*"))))
        sitk.WriteImage(image, str(folder / f"{uuid.uuid4()}.mha"), True)
        (root / pk / "output" / "cspca-case-level-likelihood.json").write_text(json.dumps(0.1 * (i + 1)))
    (root / "predictions.json").write_text(json.dumps(jobs))
    run = run_cli(root, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    assert [run.metrics["case"][c]["case_pred"] for c in cases] == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_missing_cases_empty(tmp_path):
    phase, submission = lay_out(tmp_path, BASE + "missing_cases: empty\n", cases=["case_02", "case_03", "case_12"])
    (submission / "case_02.nii.gz").unlink()
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 0, run.stderr
    entry = run.metrics["case"]["case_02"]
    assert entry["lesion_results"] == {"is_lesion": [1], "confidence": [0.0], "overlap": [0.0]}
    assert entry["case_pred"] == 0.0 and entry["prediction_file"] is None


def test_the_preflight_ends_as_grading(tmp_path, capsys):
    from helpers.preflight import check_args, grade_args, in_process, publish

    phase, submission = lay_out(tmp_path, BASE, cases=["case_02", "case_04", "case_12"])
    public = publish(phase, tmp_path / "public")
    assert in_process(check_args(submission, public), capsys).last_line.startswith("Would be scored")
    broken = np.zeros((20, 64, 64), np.float32)
    broken[2:6, 2:6, 2:6] = np.linspace(0.1, 0.9, 64, dtype=np.float32).reshape(4, 4, 4)
    write_image(broken, submission / "case_04.nii.gz")
    checked = in_process(check_args(submission, public), capsys)
    graded = in_process(grade_args(submission, phase, tmp_path / "out"), capsys)
    assert checked.code == 2 and checked.same_as(graded), (checked, graded)


# --------------------------------------------------------------------------------------------
# What a participant reads when a submission cannot be scored


def _softmax_like(path):
    volume = np.zeros((20, 64, 64), np.float32)
    volume[8:12, 20:28, 20:28] = np.linspace(0.2, 0.9, 256, dtype=np.float32).reshape(4, 8, 8)
    write_image(volume, path)


def _with(path, change, spacing=(1.0, 1.0, 1.0)):
    volume = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
    write_image(change(volume.copy()), path, spacing)


def _negative(volume):
    volume[0, 0, 0] = -0.25
    return volume


def _nan_as_mha(path):
    """SimpleITK's NIfTI writer stores NaN as 0: the damaged map is written as MetaImage."""
    volume = sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
    volume[0, 0, 0] = np.nan
    path.unlink()
    write_image(volume, path.with_name(path.name.replace(".nii.gz", ".mha")))


BAD = {
    "softmax as detection map": (
        "",
        lambda s: _softmax_like(s / "case_02.nii.gz"),
        "case_02.nii.gz: is not a detection map: its 1 connected blob(s) hold 256 different values",
    ),
    "negative values": (
        "",
        lambda s: _with(s / "case_03.nii.gz", _negative),
        "case_03.nii.gz: holds negative values (e.g. -0.25)",
    ),
    "NaN": ("", lambda s: _nan_as_mha(s / "case_03.nii.gz"), "case_03.mha: holds NaN or infinite values"),
    "wrong shape": (
        "",
        lambda s: _with(s / "case_03.nii.gz", lambda v: v[:-1].copy()),
        "case_03.nii.gz: has shape (19, 64, 64), but the image it predicts has shape (20, 64, 64)",
    ),
    "wrong spacing": (
        "",
        lambda s: _with(s / "case_03.nii.gz", lambda v: v, spacing=(3.0, 1.0, 1.0)),
        "case_03.nii.gz: its spacing (3, 1, 1) differs from the input image's (1, 1, 1)",
    ),
    "missing case": ("", lambda s: (s / "case_12.nii.gz").unlink(), "1 of 3 test cases have no prediction (case_12)"),
    "unknown file": (
        "",
        lambda s: shutil.copy(s / "case_12.nii.gz", s / "case_99.nii.gz"),
        "1 file(s) match no test case (case_99.nii.gz)",
    ),
    "likelihood above 1": (
        "",
        lambda s: (s / "likelihoods.json").write_text('{"case_02": 0.2, "case_03": 1.5, "case_12": 0.1}'),
        "likelihoods.json, case case_03: 1.5 is not between 0 and 1",
    ),
    "likelihood NaN": (
        "",
        lambda s: (s / "likelihoods.json").write_text('{"case_02": NaN, "case_03": 0.5, "case_12": 0.1}'),
        "likelihoods.json, case case_02: nan is not between 0 and 1",
    ),
    "likelihood not a number": (
        "",
        lambda s: (s / "likelihoods.json").write_text('{"case_02": "high", "case_03": 0.5, "case_12": 0.1}'),
        "likelihoods.json, case case_02: 'high' is not a number",
    ),
    "likelihood missing for a case": (
        "",
        lambda s: (s / "likelihoods.json").write_text('{"case_02": 0.2, "case_03": 0.5}'),
        "likelihoods.json: gives no likelihood for 1 case(s) (case_12)",
    ),
    "likelihood of an unknown case": (
        "",
        lambda s: (s / "likelihoods.json").write_text('{"case_02": 0.2, "case_03": 0.5, "case_12": 0.1, "case_77": 0.3}'),
        "likelihoods.json: names 1 case(s) that are no test case (case_77)",
    ),
    "likelihoods required": (
        "likelihoods: required\n",
        lambda s: None,
        "this phase needs case-level likelihoods: add likelihoods.json",
    ),
    "likelihood CSV without header": (
        "likelihood_file: likelihoods.csv\n",
        lambda s: (s / "likelihoods.csv").write_text("case_02,0.2\n"),
        "likelihoods.csv: must start with the header line 'case,likelihood'",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_the_participants_to_fix(name, tmp_path):
    options, damage, line = BAD[name]
    phase, submission = lay_out(tmp_path, BASE + options, cases=["case_02", "case_03", "case_12"])
    damage(submission)
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2, run.stderr
    assert run.last_line.startswith("Submission rejected: ")
    assert line in run.last_line, run.last_line


def test_a_blob_of_two_values_is_refused_with_the_correction(tmp_path):
    """case_05's map (touching blobs 0.4 | 0.7, compensated by another 0.4 blob) passes
    picai_eval's guard, and is refused with constant_blobs."""
    phase, submission = lay_out(tmp_path / "a", BASE, cases=["case_05", "case_12"])
    assert run_cli(submission, phase, tmp_path / "a" / "out").code == 0
    phase, submission = lay_out(tmp_path / "b", BASE + "corrections: [constant_blobs]\n", cases=["case_05", "case_12"])
    run = run_cli(submission, phase, tmp_path / "b" / "out")
    assert run.code == 2
    assert "case_05.nii.gz: 1 of its 2 lesion candidates hold more than one value" in run.last_line


def test_when_every_case_fails_metrics_json_is_still_written(tmp_path):
    phase, submission = lay_out(tmp_path, BASE, cases=["case_02", "case_03"])
    for case in ("case_02", "case_03"):
        _with(submission / f"{case}.nii.gz", _negative)
    run = run_cli(submission, phase, tmp_path / "out")
    assert run.code == 2
    validate_metrics(run.metrics)
    assert run.metrics["aggregates"]["score"] is None and run.metrics["aggregates"]["n_failed_cases"] == 2
    assert run.metrics["case"]["case_03"]["status"] == "failed"
