"""From the folder the platform hands over to what a suite reads.

Participants upload an archive, a folder, or the folder's contents; platforms add their own
files beside it: CodaBench's worker writes ``metadata`` into the submission folder
(codabench ``compute_worker.py`` ``Run.push_output``), Grand-Challenge writes ``inputs.json``
beside every extracted upload (rse-grand-challenge ``components/backends/base.py``
``Executor._with_inputs_json``) and places a phase's additional inputs there too. Those are set
aside; a single archive among what remains is unpacked safely into scratch space (an upload
that is a zip holding one inner archive reaches the grader as that archive); anything else is
read in place and never modified.
The whole tree is checked once before anything is read (``untrusted.walk``): only regular
files and folders, UTF-8 names, bounded depth; a link could point at the ground truth, a FIFO
would block the grader.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

from evaluation.archive import Limits, extract, is_archive
from evaluation.errors import PhaseError, SubmissionError, participant_file
from evaluation.phase import Phase
from evaluation.readers import images, untrusted

PLATFORM_FILES = frozenset({"metadata", "inputs.json"})


@dataclass(frozen=True)
class Submission:
    """The submission's folder, plus case names for its files when the platform supplies
    them (Grand-Challenge names each algorithm job's output after the job's input image), and
    the names at its top that are not predictions (the platforms' files, the phase's
    additional inputs)."""

    root: Path
    named_files: dict[str, Path] | None = field(default=None)
    set_aside: frozenset[str] = PLATFORM_FILES

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
            if path.name.startswith(".") or self._is_set_aside(path) or images.suffix(path) not in suffixes:
                continue
            case = images.stem(path)
            if case in found:
                first, second = (p.relative_to(self.root).as_posix() for p in (found[case], path))
                raise SubmissionError(f"case '{case}' appears twice in the submission ({first} and {second}); keep one")
            found[case] = path
        return found

    def _is_set_aside(self, path: Path) -> bool:
        return path.parent == self.root and path.name in self.set_aside


def truth_files(phase: Phase, folder: str) -> dict[str, Path]:
    """Case name -> truth file, from a truth folder of the phase, read as an upload is (one
    label map per case, named after it). The files are the organizer's: any problem with them
    is the phase's, never the participant's."""
    path = phase.path(folder)
    if not path.is_dir():
        raise PhaseError(f"phase.yaml: the truth folder {folder!r} does not exist")
    try:
        cases = Submission(path).case_files()
    except SubmissionError as exc:
        raise PhaseError(f"truth folder: {exc}") from None
    if not cases:
        raise PhaseError("the truth folder holds no label maps")
    return cases


def refuse_dotted(cases: dict[str, Path]) -> None:
    """Truth case names become metrics.json keys, which cannot hold a dot."""
    dotted = sorted(case for case in cases if "." in case)
    if dotted:
        raise PhaseError(f"truth case names must not contain dots (metrics keys cannot): {dotted[0]!r}")


def pair_cases(submitted: dict[str, Path], truth: dict[str, Path], policy: str, where: str = "") -> list[str]:
    """The cases to score, sorted: a file that names no case of the truth rejects the upload, as
    do missing cases under the ``missing_cases`` policy 'reject'; under 'empty' every case of
    the truth is scored (a missing one as an empty prediction), otherwise the submitted ones.
    ``where`` starts each message (which model of an upload holding several)."""
    unknown = sorted(set(submitted) - set(truth))
    if unknown:
        shown = ", ".join(_named(case, submitted[case]) for case in unknown[:5])
        raise SubmissionError(
            f"{where}{len(unknown)} file(s) match no test case ({shown}{', ...' if len(unknown) > 5 else ''}); "
            "name each file after its test case"
        )
    missing = sorted(set(truth) - set(submitted))
    if missing and policy == "reject":
        shown = ", ".join(missing[:5])
        raise SubmissionError(
            f"{where}{len(missing)} of {len(truth)} test cases have no prediction ({shown}{', ...' if len(missing) > 5 else ''})"
        )
    return sorted(truth) if policy == "empty" else sorted(submitted)


def _named(case: str, path: Path) -> str:
    """A submitted file as a message names it: its name, and the case read from it where the
    name does not show it (a platform's name for a job's output)."""
    return path.name if images.stem(path) == case else f"{case} ({path.name})"


def _not_entered(folder: Path) -> bool:
    """A zarr folder is one case; hidden folders are not looked into."""
    return folder.name.lower().endswith(".zarr") or folder.name.startswith(".")


def entries(folder: Path, set_aside: frozenset[str] = PLATFORM_FILES) -> list[Path]:
    """What the participant put in ``folder`` (platform files and hidden files excluded)."""
    return sorted(p for p in folder.iterdir() if p.name not in set_aside and not p.name.startswith("."))


def unpack(folder: Path, scratch: Path, limits: Limits, set_aside: frozenset[str] = PLATFORM_FILES) -> Submission:
    """The submission in ``folder``: checked whole, its one archive unpacked into ``scratch``;
    ``set_aside`` adds to ``PLATFORM_FILES`` the names that are not predictions. Everything
    read here is the participant's (``errors.participant_file``). The folder itself must not be
    a link: a platform's submission folder is one it made (Grand-Challenge's ``/input`` link is
    resolved by its own adapter)."""
    with participant_file():
        return _unpack(folder, scratch, limits, PLATFORM_FILES | set_aside)


def _unpack(folder: Path, scratch: Path, limits: Limits, set_aside: frozenset[str]) -> Submission:
    if os.path.islink(folder):
        raise SubmissionError("the submission folder is a symbolic link; upload plain files and folders only")
    if not folder.is_dir():
        raise SubmissionError("no submission folder was provided")
    untrusted.check_tree(folder)
    found = entries(folder, set_aside)
    if not found:
        raise SubmissionError("the submission is empty: upload your predictions (a zip archive or a folder)")
    archives = [p for p in found if is_archive(p)]
    if len(archives) > 1:
        raise SubmissionError(f"the submission holds {len(archives)} archives; upload exactly one")
    if archives and len(found) > 1:
        raise SubmissionError(f"the submission holds {archives[0].name} and other files; upload either one archive or a folder")
    if archives:
        return Submission(extract(archives[0], scratch / "submission", limits))
    return Submission(folder, set_aside=set_aside)
