"""docs/first-phase.md, run as a newcomer would: every shell block after the install, in order,
in a fresh folder, each a real command line (the page promises they run as written)."""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "first-phase.md"


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.slow
def test_the_first_phase_page_runs_as_written(tmp_path):
    install, *steps = blocks()
    assert "requirements.lock" in install and "-e " in install
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ends = {}
    for block in steps:
        for command in filter(None, (line.strip() for line in block.splitlines())):
            run = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, (command, run.stderr[-2000:])
            ends[command.split()[3] if command.startswith("python -m evaluation ") else command] = run
    toy = tmp_path / "toy"
    written = json.loads(ends["--input"].stdout.strip().splitlines()[-1])
    assert written["event"] == "written" and f"{written['leaderboard']['score']:.2f}" == "0.86"  # as the page says
    assert ends["check"].stderr.strip().splitlines()[-1].startswith("Would be scored: 3 task(s)")
    board = list(csv.DictReader((toy / "rescore" / "leaderboard.csv").open()))
    assert [row["submission"] for row in board] == ["team-a", "team-b", "team-c"]
    assert (toy / "ranking" / "final_ranking.html").is_file()
    causes = json.loads((toy / "changelog" / "changelog.json").read_text())["summary"]["causes"]
    assert any(c.startswith("options: definition: 'metricsreloaded' -> 'monai'") for c in causes)
    assert any(c.startswith("metric definitions:") for c in causes)
