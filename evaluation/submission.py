"""From the folder the platform hands over to what a suite reads.

Participants upload an archive, a folder, or the folder's contents; platforms add their own
files (CodaBench writes ``metadata`` into the submission folder). A single archive is
unpacked safely into scratch space; anything else is read in place and never modified.
Symbolic links are refused anywhere in a submission: one could point at the ground truth.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.archive import Limits, extract, is_archive
from evaluation.errors import SubmissionError
from evaluation.readers import images

PLATFORM_FILES = frozenset({"metadata"})


@dataclass(frozen=True)
class Submission:
    """The submission's folder, plus case names for its files when the platform supplies
    them (Grand-Challenge names each algorithm job's output after the job's input image)."""

    root: Path
    named_files: dict[str, Path] | None = field(default=None)

    def case_files(self, suffixes: tuple[str, ...] = images.SUFFIXES) -> dict[str, Path]:
        """Case name -> file. Without platform names, every file (or ``.zarr`` folder) with one
        of ``suffixes`` anywhere under the root, named by its stem; a case found twice is an
        error rather than a silent pick."""
        if self.named_files is not None:
            return dict(self.named_files)
        found: dict[str, Path] = {}
        for current, dirs, files in os.walk(self.root):
            here = Path(current)
            candidates = [here / d for d in dirs if d.lower().endswith(".zarr")] + [here / f for f in files]
            dirs[:] = [d for d in dirs if not d.lower().endswith(".zarr") and not d.startswith(".")]
            for path in candidates:
                if path.name.startswith(".") or path.name in PLATFORM_FILES or images.suffix(path) not in suffixes:
                    continue
                case = images.stem(path)
                if case in found:
                    first, second = (p.relative_to(self.root).as_posix() for p in (found[case], path))
                    raise SubmissionError(f"case '{case}' appears twice in the submission ({first} and {second}); keep one")
                found[case] = path
        return found


def entries(folder: Path) -> list[Path]:
    """What the participant put in ``folder`` (platform files and hidden files excluded)."""
    return sorted(p for p in folder.iterdir() if p.name not in PLATFORM_FILES and not p.name.startswith("."))


def refuse_links(folder: Path) -> None:
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            if os.path.islink(os.path.join(current, name)):
                relative = os.path.relpath(os.path.join(current, name), folder)
                raise SubmissionError(f"the submission contains a symbolic link ({relative}); upload the files themselves")


def unpack(folder: Path, scratch: Path, limits: Limits) -> Submission:
    if not folder.is_dir():
        raise SubmissionError("no submission folder was provided")
    found = entries(folder)
    if not found:
        raise SubmissionError("the submission is empty: upload your predictions (a zip archive or a folder)")
    archives = [p for p in found if is_archive(p)]
    if len(archives) > 1:
        raise SubmissionError(f"the submission holds {len(archives)} archives; upload exactly one")
    if archives and len(found) > 1:
        raise SubmissionError(f"the submission holds {archives[0].name} and other files; upload either one archive or a folder")
    if archives:
        return Submission(extract(archives[0], scratch / "submission", limits))
    refuse_links(folder)
    return Submission(folder)
