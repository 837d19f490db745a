"""Safe unpacking of uploaded archives (zip and tar, optionally compressed).

An upload is untrusted: an entry must never land outside the target folder (``../``, absolute
names, symbolic and hard links, device files), and a small archive must not be able to fill
the disk: entry count, total size and compression ratio are capped, and sizes are counted
while extracting instead of trusting the archive's headers. Archives inside the archive are
not unpacked. Entry names must be UTF-8, at most ``MAX_NAME_BYTES`` per component and
``MAX_DEPTH`` levels deep, and must not clash (a file and a folder of the same name).
Violations are ``SubmissionError``s naming the entry, never the scratch folder it was
unpacked into.
"""

import errno
import lzma
import shutil
import stat
import tarfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from evaluation import log
from evaluation.errors import SubmissionError
from evaluation.readers import untrusted

_log = log.get(__name__)
_COPY_BLOCK = 1 << 20
# What a corrupt or truncated archive raises while being read, beyond the archive modules' own.
_CORRUPT = (EOFError, OSError, RuntimeError, NotImplementedError, zlib.error, lzma.LZMAError)
ZIP_SUFFIXES = (".zip",)
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
MAX_NAME_BYTES = 255  # one path component (the Linux limit)


@dataclass(frozen=True)
class Limits:
    """Caps for one archive. The total defaults to the CellMap reference's 50 GiB; the ratio
    only applies beyond ``ratio_min_bytes`` of output, so small, highly compressible files
    (zarr metadata, an empty mask) never trip it."""

    max_total_bytes: int = 50 * 1024**3
    max_entries: int = 1_000_000
    max_ratio: float = 1000.0
    ratio_min_bytes: int = 16 * 1024**2

    @classmethod
    def from_options(cls, options: dict | None) -> "Limits":
        return cls(**(options or {}))


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000


def _reason(exc: BaseException) -> str:
    """What went wrong reading the archive, without file names (an OSError's text names paths)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) if not isinstance(exc, OSError) else type(exc).__name__


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return path.is_file() and name.endswith(ZIP_SUFFIXES + TAR_SUFFIXES)


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
    try:
        longest = max((len(part.encode("utf-8")) for part in path.parts), default=0)
    except UnicodeEncodeError:
        raise SubmissionError(
            f"archive entry {name!r} has a name that is not valid UTF-8; rename it with plain characters"
        ) from None
    if longest > MAX_NAME_BYTES:
        raise SubmissionError(f"archive entry {name!r} has a file or folder name longer than {MAX_NAME_BYTES} bytes; shorten it")
    if len(path.parts) > untrusted.MAX_DEPTH:
        raise SubmissionError(f"archive entry {name!r} is nested more than {untrusted.MAX_DEPTH} folders deep")
    return PurePosixPath(*[p for p in path.parts if p not in ("", ".")])


class _Writer:
    """Creates entries under ``root`` while counting entries and bytes against the limits."""

    def __init__(self, root: Path, limits: Limits, compressed_bytes: int):
        self.root, self.limits, self.compressed = root, limits, max(compressed_bytes, 1)
        self.entries = self.written = 0

    def _destination(self, name: str) -> Path:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise SubmissionError(f"the archive has more than {self.limits.max_entries} entries")
        relative = _safe_relative(name)
        destination = self.root.joinpath(*relative.parts) if relative.parts else self.root
        if self.root != destination and self.root not in destination.parents:
            raise SubmissionError(f"archive entry {name!r} points outside the archive")
        return destination

    def folder(self, name: str) -> None:
        destination = self._destination(name)
        with _creating(name):
            destination.mkdir(parents=True, exist_ok=True)

    def file(self, name: str, source, compressed_size: int | None = None) -> None:
        destination = self._destination(name)
        with _creating(name):
            destination.parent.mkdir(parents=True, exist_ok=True)
            sink = open(destination, "xb")
        entry_written = 0
        with sink:
            while block := source.read(_COPY_BLOCK):
                entry_written += len(block)
                self.written += len(block)
                self._check_size(name, entry_written, compressed_size)
                with _creating(name):
                    sink.write(block)

    def _check_size(self, name: str, entry_written: int, compressed_size: int | None) -> None:
        limits = self.limits
        if self.written > limits.max_total_bytes:
            raise SubmissionError(
                f"the archive unpacks to more than {_size(limits.max_total_bytes)}, the limit for this challenge"
            )
        # per entry when the archive says how big it is compressed (zip), else for the whole archive
        produced, packed = (entry_written, compressed_size) if compressed_size is not None else (self.written, self.compressed)
        if produced > limits.ratio_min_bytes and produced > limits.max_ratio * max(packed, 1):
            raise SubmissionError(
                f"archive entry {name!r} is compressed more than {limits.max_ratio:.0f}:1, which looks like a zip bomb"
            )


@contextmanager
def _creating(name: str):
    """File system errors while unpacking, in the participant's terms (the OSError's own text
    names the grader's scratch folder)."""
    try:
        yield
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        raise SubmissionError(
            f"archive entry {name!r} clashes with another entry of the same name (a file and a folder, or a file twice)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise SubmissionError(f"archive entry {name!r} has a path too long to unpack; use shorter names") from None
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise SubmissionError("the archive unpacks to more data than the grader has room for; reduce its size") from None
        raise


def _check_declared(names_sizes: list[tuple[str, int]], limits: Limits, free_bytes: int) -> None:
    """Refuse early from the archive's own index (it may lie; the copy counts again)."""
    if len(names_sizes) > limits.max_entries:
        raise SubmissionError(f"the archive has {len(names_sizes)} entries; at most {limits.max_entries} are accepted")
    declared = sum(size for _, size in names_sizes)
    if declared > limits.max_total_bytes:
        raise SubmissionError(f"the archive unpacks to {_size(declared)}; at most {_size(limits.max_total_bytes)} are accepted")
    if declared > free_bytes:
        raise SubmissionError("the archive unpacks to more data than the grader has room for; reduce its size")
    for name, _ in names_sizes:
        _safe_relative(name)


def _extract_zip(archive: Path, writer: _Writer, limits: Limits) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, *_CORRUPT) as exc:
        raise SubmissionError(f"{archive.name} is not a readable zip archive ({_reason(exc)})") from None
    with zf:
        infos = zf.infolist()
        _check_declared([(i.filename, i.file_size) for i in infos], limits, shutil.disk_usage(writer.root).free)
        for info in infos:
            if stat.S_ISLNK(info.external_attr >> 16):
                raise SubmissionError(f"archive entry {info.filename!r} is a symbolic link; links are not accepted")
            if info.is_dir():
                writer.folder(info.filename)
                continue
            try:
                with zf.open(info) as source:
                    writer.file(info.filename, source, info.compress_size)
            except (zipfile.BadZipFile, zipfile.LargeZipFile, *_CORRUPT) as exc:
                raise SubmissionError(
                    f"archive entry {info.filename!r} cannot be read ({_reason(exc)}); the archive may be truncated or corrupt"
                ) from None


def _extract_tar(archive: Path, writer: _Writer, limits: Limits) -> None:
    try:
        tf = tarfile.open(archive, "r:*")
    except (tarfile.TarError, *_CORRUPT) as exc:
        raise SubmissionError(f"{archive.name} is not a readable tar archive ({_reason(exc)})") from None
    with tf:
        try:
            for member in tf:  # streamed: nothing is listed or written past the first violation
                if member.issym() or member.islnk():
                    raise SubmissionError(f"archive entry {member.name!r} is a link; links are not accepted")
                if member.isdir():
                    writer.folder(member.name)
                elif member.isfile():
                    if writer.written + member.size > limits.max_total_bytes:
                        raise SubmissionError(
                            f"the archive unpacks to more than {_size(limits.max_total_bytes)}, the limit for this challenge"
                        )
                    writer.file(member.name, tf.extractfile(member))
                else:
                    raise SubmissionError(f"archive entry {member.name!r} is a special file; only files and folders are accepted")
        except (tarfile.TarError, *_CORRUPT) as exc:
            raise SubmissionError(
                f"{archive.name} cannot be read to the end ({_reason(exc)}); the archive may be truncated or corrupt"
            ) from None


def extract(archive: Path, target: Path, limits: Limits = Limits()) -> Path:
    """Unpack ``archive`` (zip or tar) into the new folder ``target`` and return it."""
    target.mkdir(parents=True, exist_ok=False)
    writer = _Writer(target.resolve(), limits, archive.stat().st_size)
    if archive.name.lower().endswith(ZIP_SUFFIXES):
        _extract_zip(archive, writer, limits)
    else:
        _extract_tar(archive, writer, limits)
    nested = next((p for p, is_folder in untrusted.walk(target) if not is_folder and is_archive(p)), None)
    if nested is not None:
        raise SubmissionError(
            f"the archive contains another archive ({nested.relative_to(target).as_posix()}); upload one archive holding the files themselves"
        )
    _log.info("archive_extracted", archive=archive.name, entries=writer.entries, bytes=writer.written)
    return target
