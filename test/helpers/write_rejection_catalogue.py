"""Regenerate the participants' rejection catalogue in docs/participants.md from a run of the hostile
corpus, so the documented messages are the ones the grader prints:

    python test/helpers/write_rejection_catalogue.py

runs ``test/test_hostile_corpus.py`` with ``CORPUS_REPORT`` set and replaces the table between
the ``rejection-catalogue`` markers of docs/participants.md (one row per kind, in corpus order).
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "docs" / "participants.md"
START, END = "<!-- rejection-catalogue:start -->", "<!-- rejection-catalogue:end -->"
OUTCOMES = {
    "rejected": "submission rejected",
    "case failure": "this case fails, the rest is scored",
    "scored": "scored (exit 0)",
    "the phase's fault": "the phase's fault (exit 1; the line is the organizer's local run's)",
}


def table(entries: list[dict]) -> str:
    rows = ["| problem | outcome | last stderr line after `Submission rejected: ` |", "|---|---|---|"]
    for entry in entries:
        line = entry["last_line"].replace("|", "\\|")
        shown = f"`{line}`" if line else "—"
        rows.append(f"| {entry['kind']} | {OUTCOMES[entry['outcome']]} | {shown} |")
    return "\n".join(rows)


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "corpus.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "test/test_hostile_corpus.py::test_hostile_submission"],
            cwd=ROOT,
            env={**os.environ, "CORPUS_REPORT": str(report)},
        )
        if done.returncode != 0:
            print("the corpus did not pass; the catalogue is left unchanged", file=sys.stderr)
            return 1
        entries = [json.loads(line) for line in report.read_text().splitlines()]
    text = CATALOGUE.read_text()
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    CATALOGUE.write_text(f"{before}{START}\n{table(entries)}\n{END}{after}")
    print(f"{len(entries)} kinds written to docs/participants.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
