"""nnU-Net v2's own summaries (MIC-DKFZ/nnUNet@0e49508 run unmodified, test/fixtures/multiclass/
nnunet/README.md) of eleven new cases, labels and regions, reproduced through the command line:
every value of ``summary.json`` (per case in nnU-Net's order, ``mean``, ``foreground_mean``),
bit for bit."""

import json
import math
import shutil

import numpy as np
import pytest
import SimpleITK as sitk
from helpers.grading import FIXTURES, ROOT, run_cli, validate_metrics

KIT = FIXTURES / "multiclass" / "nnunet"
BRATS = "classes: {whole tumor: [1, 2, 3], tumor core: [2, 3], enhancing tumor: [3]}\n"
PHASES = {  # nnU-Net's run -> the phase that asks for the same evaluation
    "simple_123": "classes: [1, 2, 3]\n",
    "simple_0123_il4": "classes: 4\nignore_index: 4\n",
    "labels_ignore": "classes: {edema: 1, core: 2, enhancing: 3}\nignore_index: 4\n",
    "brats": BRATS,
    "brats_ignore": BRATS + "ignore_index: 4\n",
    "kits": "classes: {kidney: [1, 2, 3], masses: [2, 3], tumor: 2}\n",
    "api_list": "classes: [0, [1, 2, 3], [2, 3], 3]\n",
}


def load_cases() -> tuple[list[str], dict, dict, tuple]:
    with np.load(KIT / "cases.npz", allow_pickle=False) as data:
        names = [str(n) for n in data["names"]]
        return names, {n: data[f"gt__{n}"] for n in names}, {n: data[f"pred__{n}"] for n in names}, tuple(data["spacing"])


def write(path, array, spacing) -> None:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(tuple(float(s) for s in spacing[::-1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("nnunet_cases")
    names, truth, pred, spacing = load_cases()
    for name in names:
        write(root / "labels" / f"{name}.nii.gz", truth[name], spacing)
        write(root / "input" / f"{name}.nii.gz", pred[name], spacing)
    return root


def same(got, expected) -> bool:
    """Equal to the last bit; nnU-Net's NaN is null here."""
    if isinstance(expected, float) and math.isnan(expected):
        return got is None
    return type(got) is type(expected) and got == expected


def differences(ours: dict, theirs: dict) -> tuple[list[str], int]:
    problems, compared = [], 0
    cases = [e["reference_file"] for e in ours["metric_per_case"]]
    nnunet = [e["prediction_file"].rsplit("/", 1)[-1].removesuffix(".nii.gz") for e in theirs["metric_per_case"]]
    if cases != nnunet:
        problems.append(f"case order {cases} != nnU-Net's {nnunet}")
    blocks = [
        (f"case {c}", o["metrics"], t["metrics"]) for c, o, t in zip(cases, ours["metric_per_case"], theirs["metric_per_case"])
    ]
    blocks += [
        ("mean", ours["mean"], theirs["mean"]),
        ("foreground_mean", {"": ours["foreground_mean"]}, {"": theirs["foreground_mean"]}),
    ]
    for where, got, expected in blocks:
        if set(got) != set(expected):
            problems.append(f"{where}: keys {sorted(got)} != {sorted(expected)}")
        for key in set(got) & set(expected):
            for metric, value in expected[key].items():
                compared += 1
                if not same(got[key].get(metric), value):
                    problems.append(f"{where} {key} {metric}: nnU-Net {value!r}, suite {got[key].get(metric)!r}")
    return problems, compared


SLOW = {"simple_123", "simple_0123_il4", "labels_ignore", "brats_ignore"}  # ~2.5 s each; the fast tier keeps one of each kind


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.slow) if r in SLOW else r for r in sorted(PHASES)])
def test_summary_equals_nnunets_bit_for_bit(files, tmp_path, run):
    phase = tmp_path / "phase"
    shutil.copytree(files / "labels", phase / "labels")
    (phase / "phase.yaml").write_text("suite: multiclass\n" + PHASES[run])
    done = run_cli(files / "input", phase, tmp_path / "out")
    assert done.code == 0, done.stderr[-2000:]
    validate_metrics(done.metrics)
    ours = json.loads((tmp_path / "out" / "summary.json").read_text())
    theirs = json.loads((KIT / f"summary_{run}.json").read_text())
    problems, compared = differences(ours, theirs)
    assert not problems, problems[:10]
    assert compared == 8 * (len(theirs["mean"]) * (len(theirs["metric_per_case"]) + 1) + 1)
    # metrics.json carries the same means under the same keys
    aggregates = done.metrics["aggregates"]
    for key, entry in theirs["mean"].items():
        assert same(aggregates["mean"][key]["Dice"], entry["Dice"]), key
    assert same(aggregates["foreground_mean"]["Dice"], theirs["foreground_mean"]["Dice"])


@pytest.mark.parametrize("heading,run", [("#### KiTS-style", "kits"), ("#### BraTS-style", "brats")])
def test_the_documented_phases_are_the_tested_ones(tmp_path, heading, run):
    """docs/suites/multiclass.md's worked phases ask for exactly the evaluation compared with
    nnU-Net above, and are valid phases."""
    import yaml

    from evaluation import phase as phases

    text = (ROOT / "docs" / "suites" / "multiclass.md").read_text()
    block = text.split(heading, 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "phase.yaml").write_text(block)
    documented = phases.load(tmp_path)
    assert documented.options["classes"] == yaml.safe_load(PHASES[run])["classes"]
