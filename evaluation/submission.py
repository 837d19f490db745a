"""From the folder the platform hands over to the folder a suite reads.

Participants upload an archive, a folder, or the folder's contents; platforms add their own
files (CodaBench writes ``metadata`` into the submission folder). A single archive is
unpacked safely into scratch space; anything else is read in place, never modified.
"""

from pathlib import Path

from evaluation.archive import Limits, extract_zip, is_zip
from evaluation.errors import SubmissionError

PLATFORM_FILES = frozenset({"metadata"})


def entries(folder: Path) -> list[Path]:
    """What the participant put in ``folder`` (platform files and hidden files excluded)."""
    return sorted(p for p in folder.iterdir() if p.name not in PLATFORM_FILES and not p.name.startswith("."))


def unpack(folder: Path, scratch: Path, limits: Limits) -> Path:
    if not folder.is_dir():
        raise SubmissionError("no submission folder was provided")
    found = entries(folder)
    if not found:
        raise SubmissionError("the submission is empty: upload your predictions (a zip archive or a folder)")
    archives = [p for p in found if is_zip(p)]
    if len(archives) > 1:
        raise SubmissionError(f"the submission holds {len(archives)} zip archives; upload exactly one")
    if archives and len(found) > 1:
        raise SubmissionError(f"the submission holds {archives[0].name} and other files; upload either one archive or a folder")
    if archives:
        return extract_zip(archives[0], scratch / "submission", limits)
    return folder
