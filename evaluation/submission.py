"""From the folder the platform hands over to what a suite reads.

Participants upload an archive, a folder, or the folder's contents; platforms add their own
files (CodaBench writes ``metadata`` into the submission folder). A single archive is
unpacked safely into scratch space; anything else is read in place and never modified.
The whole tree is checked once before anything is read (``untrusted.walk``): only regular
files and folders, UTF-8 names, bounded depth; a link could point at the ground truth, a FIFO
would block the grader.
"""

from dataclasses import dataclass, field
from pathlib import Path

from evaluation.archive import Limits, extract, is_archive
from evaluation.errors import SubmissionError, participant_file
from evaluation.readers import images, untrusted

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
        with participant_file():
            return self._walk_cases(suffixes)

    def _walk_cases(self, suffixes: tuple[str, ...]) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for path, is_folder in untrusted.walk(self.root, prune=_not_entered):
            if is_folder and not path.name.lower().endswith(".zarr"):
                continue
            if path.name.startswith(".") or path.name in PLATFORM_FILES or images.suffix(path) not in suffixes:
                continue
            case = images.stem(path)
            if case in found:
                first, second = (p.relative_to(self.root).as_posix() for p in (found[case], path))
                raise SubmissionError(f"case '{case}' appears twice in the submission ({first} and {second}); keep one")
            found[case] = path
        return found


def _not_entered(folder: Path) -> bool:
    """A zarr folder is one case; hidden folders are not looked into."""
    return folder.name.lower().endswith(".zarr") or folder.name.startswith(".")


def entries(folder: Path) -> list[Path]:
    """What the participant put in ``folder`` (platform files and hidden files excluded)."""
    return sorted(p for p in folder.iterdir() if p.name not in PLATFORM_FILES and not p.name.startswith("."))


def unpack(folder: Path, scratch: Path, limits: Limits) -> Submission:
    """The submission in ``folder``: checked whole, its one archive unpacked into ``scratch``.
    Everything read here is the participant's (``errors.participant_file``)."""
    with participant_file():
        return _unpack(folder, scratch, limits)


def _unpack(folder: Path, scratch: Path, limits: Limits) -> Submission:
    if not folder.is_dir():
        raise SubmissionError("no submission folder was provided")
    untrusted.check_tree(folder)
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
    return Submission(folder)
