"""Safe unpacking of uploaded archives.

An upload is untrusted: an entry must never land outside the target folder (``../``, absolute
names, symlinks), and a small archive must not be able to fill the disk (entry count, total
size and per-entry compression ratio are capped, and sizes are counted while extracting instead
of trusting the archive's headers). Violations are ``SubmissionError``s naming the entry.
"""

import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evaluation import log
from evaluation.errors import SubmissionError

_log = log.get(__name__)
_COPY_BLOCK = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Caps for one archive. The total defaults to the CellMap reference's 50 GiB; the ratio
    only applies to entries above ``ratio_min_bytes``, so tiny, highly compressible metadata
    files (zarr's ``.zarray``) never trip it."""

    max_total_bytes: int = 50 * 1024**3
    max_entries: int = 1_000_000
    max_ratio: float = 1000.0
    ratio_min_bytes: int = 16 * 1024**2

    @classmethod
    def from_options(cls, options: dict | None) -> "Limits":
        return cls(**(options or {}))


def _safe_relative(name: str) -> PurePosixPath:
    """The entry's path inside the target, or an error if it could leave it."""
    if "\x00" in name:
        raise SubmissionError(f"archive entry {name!r} has a NUL byte in its name")
    normalised = name.replace("\\", "/")
    path = PurePosixPath(normalised)
    if path.is_absolute() or (len(normalised) > 1 and normalised[1] == ":"):
        raise SubmissionError(f"archive entry {name!r} has an absolute path; use paths relative to the archive root")
    if any(part == ".." for part in path.parts):
        raise SubmissionError(f"archive entry {name!r} points outside the archive ('..' in its path)")
    return PurePosixPath(*[p for p in path.parts if p not in ("", ".")])


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _check_entries(infos: list[zipfile.ZipInfo], limits: Limits, free_bytes: int) -> None:
    if len(infos) > limits.max_entries:
        raise SubmissionError(f"the archive has {len(infos)} entries; at most {limits.max_entries} are accepted")
    declared = 0
    for info in infos:
        _safe_relative(info.filename)
        if _is_symlink(info):
            raise SubmissionError(f"archive entry {info.filename!r} is a symbolic link; links are not accepted")
        declared += info.file_size
    if declared > limits.max_total_bytes:
        raise SubmissionError(
            f"the archive unpacks to {declared / 1024**3:.2f} GiB; at most {limits.max_total_bytes / 1024**3:.2f} GiB are accepted"
        )
    if declared > free_bytes:
        raise SubmissionError("the archive unpacks to more data than the grader has room for; reduce its size")


def _copy_capped(source, target, info: zipfile.ZipInfo, budget: int, limits: Limits) -> int:
    """Copy one entry, counting real bytes; returns the bytes written."""
    written = 0
    while block := source.read(_COPY_BLOCK):
        written += len(block)
        if written > budget:
            raise SubmissionError(f"the archive unpacks to more than {limits.max_total_bytes / 1024**3:.2f} GiB")
        if written > limits.ratio_min_bytes and written > limits.max_ratio * max(info.compress_size, 1):
            raise SubmissionError(
                f"archive entry {info.filename!r} is compressed more than {limits.max_ratio:.0f}:1, which looks like a zip bomb"
            )
        target.write(block)
    return written


def extract_zip(archive: Path, target: Path, limits: Limits = Limits()) -> Path:
    """Unpack ``archive`` into the new folder ``target`` and return it."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SubmissionError(f"{archive.name} is not a readable zip archive ({exc})") from None
    target.mkdir(parents=True, exist_ok=False)
    root = target.resolve()
    with zf:
        infos = zf.infolist()
        _check_entries(infos, limits, shutil.disk_usage(root).free)
        budget = limits.max_total_bytes
        for info in infos:
            relative = _safe_relative(info.filename)
            destination = root.joinpath(*relative.parts) if relative.parts else root
            if root != destination and root not in destination.parents:
                raise SubmissionError(f"archive entry {info.filename!r} points outside the archive")
            if info.is_dir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            if destination.exists():
                raise SubmissionError(f"archive entry {info.filename!r} appears twice in the archive")
            try:
                with zf.open(info) as source, open(destination, "xb") as sink:
                    budget -= _copy_capped(source, sink, info, budget, limits)
            except (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, NotImplementedError, OSError) as exc:
                raise SubmissionError(f"archive entry {info.filename!r} cannot be read ({exc}); the archive may be truncated or corrupt") from None
    _log.info("archive_extracted", archive=archive.name, entries=len(infos), bytes=limits.max_total_bytes - budget)
    return target


def is_zip(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".zip"
