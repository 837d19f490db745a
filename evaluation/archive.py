"""Safe unpacking of uploaded archives (zip and tar, optionally compressed).

An upload is untrusted: an entry must never land outside the target folder (``../``, absolute
names, symbolic and hard links, device files), and a small archive must not be able to fill
the disk or the memory: entry count, total size and compression ratio are capped, and sizes
are counted while extracting instead of trusting the archive's headers. Archives inside the
archive are not unpacked. Entry names must be UTF-8, at most ``limits.MAX_NAME_BYTES`` per
component and ``limits.MAX_DEPTH`` levels deep, and must not clash (a file and a folder of
the same name).

Every compressed byte is decoded by ``readers.codecs``, within budgets set before decoding:

- **zip**: only the central directory is parsed by ``zipfile``. Entries must be stored or
  deflate-compressed (what every zip tool writes by default; LZMA, bzip2 and the rest are
  refused, so no entry can declare a 4 GiB dictionary), unencrypted, and no two entries may
  share a byte of the file (a "quoted overlap" bomb lets 96 entries of 15 MiB reuse one
  15 KB kernel). Each entry is inflated from its own span into its declared size, its CRC
  checked.
- **tar**: gzip, bzip2 and xz around a tar are decoded by ``codecs.stream`` (xz with the
  dictionary limit), the tar read as a stream. Extended headers (GNU long names and links,
  PAX headers) are refused beyond ``limits.TAR_MAX_EXTENDED_HEADER`` bytes before tarfile reads them
  (it reads them whole: a 600 MB long name, 600 KB compressed, was 1.3 GB of memory).

Violations raise ``errors.Unusable`` naming the entry, never the scratch folder it was
unpacked into (the caller, ``submission.unpack``, blames the participant); running out of
memory while unpacking is such a refusal too.
"""

import errno
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from evaluation import log
from evaluation import phase as phases
from evaluation.errors import Unusable
from evaluation.readers import codecs, limits

_log = log.get(__name__)
_COPY_BLOCK = 1 << 20
ZIP_SUFFIXES = (".zip",)
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")
_ZIP_METHODS = {0: "stored", 8: "deflate"}
_ZIP_METHOD_NAMES = {
    1: "shrink",
    6: "implode",
    9: "deflate64",
    12: "bzip2",
    14: "LZMA",
    93: "Zstandard",
    95: "xz",
    98: "PPMd",
    99: "AES",
}
_LOCAL_HEADER = 30
_TAR_MAGIC = {b"\x1f\x8b": codecs.GZIP, b"BZh": codecs.BZ2, b"\xfd7zXZ\x00": codecs.XZ}


def _default(name: str, kind: type):
    """The schema's default of the ``archive`` key ``name``, read when a ``Limits`` is made
    (never at import)."""
    return field(default_factory=lambda: kind(phases.key_defaults("archive")[name]))


@dataclass(frozen=True)
class Limits:
    """Caps for one archive: the phase option ``archive``, every default in
    ``schemas/phase.schema.json``. The total defaults to the CellMap reference's 50 GiB; the
    entries (files and folders, those the paths imply included) to what a platform's disk
    writes in well under a minute (a file costs 30 to 500 us there: a million could take
    minutes); the ratio only applies beyond ``ratio_min_bytes`` of output, so small, highly
    compressible files (zarr metadata, an empty mask) never trip it."""

    max_total_bytes: int = _default("max_total_bytes", int)
    max_entries: int = _default("max_entries", int)
    max_ratio: float = _default("max_ratio", float)
    ratio_min_bytes: int = _default("ratio_min_bytes", int)

    @classmethod
    def from_options(cls, options: dict | None) -> "Limits":
        """From the phase's ``archive`` option (``Phase.option``): keys left out keep the
        schema's defaults."""
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
    return path.is_file() and _is_archive_name(path.name)


def _safe_relative(name: str) -> tuple[str, ...]:
    """The entry's path inside the target as its parts, or an error if it could leave it."""
    if "\x00" in name:
        raise Unusable(f"archive entry {name!r} has a NUL byte in its name")
    normalised = name.replace("\\", "/")
    if normalised.startswith("/") or (len(normalised) > 1 and normalised[1] == ":"):
        raise Unusable(f"archive entry {name!r} has an absolute path; use paths relative to the archive root")
    parts = tuple(part for part in normalised.split("/") if part not in ("", "."))
    if ".." in parts:
        raise Unusable(f"archive entry {name!r} points outside the archive ('..' in its path)")
    try:
        longest = max((len(part.encode("utf-8")) for part in parts), default=0)
    except UnicodeEncodeError:
        raise Unusable(f"archive entry {name!r} has a name that is not valid UTF-8; rename it with plain characters") from None
    if longest > limits.MAX_NAME_BYTES:
        raise Unusable(f"archive entry {name!r} has a file or folder name longer than {limits.MAX_NAME_BYTES} bytes; shorten it")
    if len(parts) > limits.MAX_DEPTH:
        raise Unusable(f"archive entry {name!r} is nested more than {limits.MAX_DEPTH} folders deep")
    return parts


def _is_archive_name(name: str) -> bool:
    return name.lower().endswith(ZIP_SUFFIXES + TAR_SUFFIXES)


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Writer:
    """Creates entries under ``root`` while counting them (files and folders, the folders a
    path implies included, as the submission's walk counts them) and their bytes against the
    limits. Paths are strings and each folder is made once: a million-entry archive costs its
    system calls, not a path object per level of every entry."""

    def __init__(self, root: Path, limits: Limits, compressed_bytes: int):
        self.root, self.limits, self.compressed = str(root), limits, max(compressed_bytes, 1)
        self.entries = self.written = 0
        self.folders: set[tuple[str, ...]] = {()}

    def _count(self) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise Unusable(f"the archive holds more than {self.limits.max_entries} files and folders")

    def _folders(self, name: str, parts: tuple[str, ...]) -> None:
        for depth in range(1, len(parts) + 1):
            if parts[:depth] not in self.folders:
                self._count()
                with _creating(name):
                    os.mkdir(os.path.join(self.root, *parts[:depth]))
                self.folders.add(parts[:depth])

    def folder(self, name: str, parts: tuple[str, ...] | None = None) -> None:
        self._folders(name, _safe_relative(name) if parts is None else parts)

    def file(self, name: str, blocks, compressed_size: int | None = None, parts: tuple[str, ...] | None = None) -> None:
        """Write the entry ``name`` from the iterable of byte blocks ``blocks``."""
        parts = _safe_relative(name) if parts is None else parts
        if not parts:
            raise Unusable(f"archive entry {name!r} names no file")
        if _is_archive_name(parts[-1]):
            raise Unusable(
                f"the archive contains another archive ({'/'.join(parts)}); upload one archive holding the files themselves"
            )
        self._folders(name, parts[:-1])
        self._count()
        with _creating(name):
            sink = os.fdopen(os.open(os.path.join(self.root, *parts), _NEW_FILE, 0o644), "wb")
        entry_written = 0
        with sink:
            for block in blocks:
                entry_written += len(block)
                self.written += len(block)
                self._check_size(name, entry_written, compressed_size)
                with _creating(name):
                    sink.write(block)

    def _check_size(self, name: str, entry_written: int, compressed_size: int | None) -> None:
        limits = self.limits
        if self.written > limits.max_total_bytes:
            raise Unusable(f"the archive unpacks to more than {_size(limits.max_total_bytes)}, the limit for this challenge")
        # per entry when the archive says how big it is compressed (zip), else for the whole archive
        produced, packed = (entry_written, compressed_size) if compressed_size is not None else (self.written, self.compressed)
        if produced > limits.ratio_min_bytes and produced > limits.max_ratio * max(packed, 1):
            raise Unusable(
                f"archive entry {name!r} is compressed more than {limits.max_ratio:.0f}:1, which looks like a zip bomb"
            )


@contextmanager
def _creating(name: str):
    """File system errors while unpacking, in the participant's terms (the OSError's own text
    names the grader's scratch folder)."""
    try:
        yield
    except (FileExistsError, IsADirectoryError, NotADirectoryError):
        raise Unusable(
            f"archive entry {name!r} clashes with another entry of the same name (a file and a folder, or a file twice)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise Unusable(f"archive entry {name!r} has a path too long to unpack; use shorter names") from None
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise Unusable("the archive unpacks to more data than the grader has room for; reduce its size") from None
        raise


def _check_declared(names_sizes: list[tuple[str, int, bool]], limits: Limits, free_bytes: int) -> list[tuple[str, ...]]:
    """Refuse early from the archive's own index (it may lie; the copy counts again): its
    files and folders (those its paths imply included) and its total size, before a byte is
    written. Returns each entry's path parts."""
    if len(names_sizes) > limits.max_entries:
        raise Unusable(f"the archive has {len(names_sizes)} entries; at most {limits.max_entries} are accepted")
    declared = sum(size for _, size, _ in names_sizes)
    if declared > limits.max_total_bytes:
        raise Unusable(f"the archive unpacks to {_size(declared)}; at most {_size(limits.max_total_bytes)} are accepted")
    if declared > free_bytes:
        raise Unusable("the archive unpacks to more data than the grader has room for; reduce its size")
    parts = [_safe_relative(name) for name, _, _ in names_sizes]
    folders = {p[:depth] for p, (_, _, is_folder) in zip(parts, names_sizes) for depth in range(1, len(p) + is_folder)}
    files = sum(1 for _, _, is_folder in names_sizes if not is_folder)
    if files + len(folders) > limits.max_entries:
        raise Unusable(
            f"the archive holds {files} files in {len(folders)} folders; at most {limits.max_entries} files and folders are accepted"
        )
    return parts


# --------------------------------------------------------------------------------------------
# zip: the central directory by zipfile, every entry decoded here from its own span


def _extract_zip(archive: Path, writer: _Writer, limits: Limits) -> None:
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise Unusable(f"{archive.name} is not a readable zip archive ({_reason(exc)})") from None
    with zf, open(archive, "rb") as raw:
        infos = zf.infolist()
        declared = [(i.filename, i.file_size, i.is_dir()) for i in infos]
        paths = _check_declared(declared, limits, shutil.disk_usage(writer.root).free)
        spans = _zip_spans(raw, infos, getattr(zf, "start_dir", None))
        for info, start, parts in zip(infos, spans, paths):
            if stat.S_ISLNK(info.external_attr >> 16):
                raise Unusable(f"archive entry {info.filename!r} is a symbolic link; links are not accepted")
            if info.is_dir():
                writer.folder(info.filename, parts)
                continue
            writer.file(info.filename, _zip_entry(raw, info, start), info.compress_size, parts)


def _zip_spans(raw, infos: list[zipfile.ZipInfo], directory_at: int | None) -> list[int]:
    """Where each entry's data starts, after checking every entry's method, encryption and
    local header, and that no two entries (nor an entry and the central directory) share a
    byte of the file."""
    size = raw.seek(0, 2)
    starts, spans = [], []
    for info in infos:
        if info.flag_bits & 0x1:
            raise Unusable(f"archive entry {info.filename!r} is encrypted; upload an archive without a password")
        if info.compress_type not in _ZIP_METHODS:
            method = _ZIP_METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
            raise Unusable(
                f"archive entry {info.filename!r} is compressed with {method}; only stored and deflate entries are "
                "accepted: zip it again with deflate (the default of zip tools)"
            )
        raw.seek(info.header_offset)
        header = raw.read(_LOCAL_HEADER)
        if len(header) != _LOCAL_HEADER or header[:4] != b"PK\x03\x04":
            raise Unusable(f"archive entry {info.filename!r} has no valid local header; the archive is corrupt")
        name_length, extra_length = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:30], "little")
        start = info.header_offset + _LOCAL_HEADER + name_length + extra_length
        end = start + info.compress_size
        if end > size:
            raise Unusable(f"archive entry {info.filename!r} runs past the end of the archive; it is truncated")
        starts.append(start)
        spans.append((info.header_offset, end, info.filename))
    if directory_at is not None:
        spans.append((directory_at, size, "the central directory"))
    spans.sort()
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise Unusable(
                f"archive entries {first!r} and {second!r} overlap in the zip file (one compressed stream made to "
                "unpack many times); zip the files again"
            )
    return starts


def _zip_entry(raw, info: zipfile.ZipInfo, start: int):
    """The blocks of one entry, decoded from its span into exactly its declared size, CRC
    checked at the end."""
    position, end = start, start + info.compress_size

    def read(n: int) -> bytes:
        nonlocal position
        raw.seek(position)
        data = raw.read(min(n, end - position))
        position += len(data)
        return data

    name = info.filename
    crc, total = 0, 0
    try:
        if info.compress_type == zipfile.ZIP_STORED:
            if info.compress_size != info.file_size:
                raise Unusable("its stored size differs from its size")
            pieces = iter(lambda: read(_COPY_BLOCK), b"")
        else:
            pieces = codecs.stream(codecs.DEFLATE, read, info.file_size, piece=_COPY_BLOCK)
        for piece in pieces:
            crc = zlib.crc32(piece, crc)
            total += len(piece)
            yield piece
        if info.compress_type != zipfile.ZIP_STORED and position != end:
            raise Unusable("it has data after its compressed stream")
    except Unusable as exc:
        raise Unusable(f"archive entry {name!r} cannot be read: {exc}; the archive may be truncated or corrupt") from None
    if total != info.file_size or crc != info.CRC:
        raise Unusable(
            f"archive entry {name!r} cannot be read (its size or CRC does not match its header); the archive may be truncated or corrupt"
        )


# --------------------------------------------------------------------------------------------
# tar: the compression decoded here, the tar read as a stream, extended headers capped


class _BoundedTarInfo(tarfile.TarInfo):
    """A tar header whose extended headers (GNU ``L``/``K``, PAX ``x``/``g``) are refused
    beyond ``limits.TAR_MAX_EXTENDED_HEADER`` bytes before tarfile reads them into memory."""

    def _proc_member(self, tarfile_):
        extended = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
        if self.type in extended and self.size > limits.TAR_MAX_EXTENDED_HEADER:
            raise Unusable(
                f"the archive has an extended header (a long name or PAX record) of {self.size} bytes; "
                f"at most {limits.TAR_MAX_EXTENDED_HEADER} are accepted"
            )
        return super()._proc_member(tarfile_)


class _Decoded:
    """A read-only file of the decoded bytes of a compressed file (``codecs.stream``)."""

    def __init__(self, raw, codec: str, limit: int, display: str):
        self._display = display
        self._pieces = codecs.stream(
            codec, raw.read, limit, members=limits.ARCHIVE_MAX_STREAMS, padding=codec == codecs.GZIP, piece=_COPY_BLOCK
        )
        self._buffer, self._at = b"", 0

    def read(self, n: int = -1) -> bytes:
        out = []
        wanted = n if n >= 0 else float("inf")
        while wanted > 0:
            if self._at >= len(self._buffer):
                try:
                    self._buffer, self._at = next(self._pieces, b""), 0
                except Unusable as exc:
                    raise Unusable(
                        f"{self._display} cannot be read to the end ({exc}); the archive may be truncated or corrupt"
                    ) from None
                if not self._buffer:
                    break
            piece = self._buffer[self._at : self._at + int(min(wanted, len(self._buffer) - self._at))]
            self._at += len(piece)
            wanted -= len(piece)
            out.append(piece)
        return b"".join(out)


def _extract_tar(archive: Path, writer: _Writer, limits: Limits) -> None:
    with open(archive, "rb") as raw:
        head = raw.read(6)
        raw.seek(0)
        codec = next((c for magic, c in _TAR_MAGIC.items() if head.startswith(magic)), None)
        # a tar holds its files plus 512-byte headers and padding: at most 3 blocks per entry
        limit = limits.max_total_bytes + 1536 * (limits.max_entries + 2)
        source = _Decoded(raw, codec, limit, archive.name) if codec else raw
        try:
            tf = tarfile.open(fileobj=source, mode="r|", tarinfo=_BoundedTarInfo)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise Unusable(f"{archive.name} is not a readable tar archive ({_reason(exc)})") from None
        with tf:
            try:
                for member in tf:  # streamed: nothing is listed or written past the first violation
                    _tar_member(tf, member, writer, limits)
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raise Unusable(
                    f"{archive.name} cannot be read to the end ({_reason(exc)}); the archive may be truncated or corrupt"
                ) from None


def _tar_member(tf: tarfile.TarFile, member: tarfile.TarInfo, writer: _Writer, limits: Limits) -> None:
    if member.issym() or member.islnk():
        raise Unusable(f"archive entry {member.name!r} is a link; links are not accepted")
    if member.isdir():
        writer.folder(member.name)
    elif member.isfile():
        if writer.written + member.size > limits.max_total_bytes:
            raise Unusable(f"the archive unpacks to more than {_size(limits.max_total_bytes)}, the limit for this challenge")
        source = tf.extractfile(member)
        writer.file(member.name, iter(lambda: source.read(_COPY_BLOCK), b""))
    else:
        raise Unusable(f"archive entry {member.name!r} is a special file; only files and folders are accepted")


def extract(archive: Path, target: Path, limits: Limits | None = None) -> Path:
    """Unpack ``archive`` (zip or tar) into the new folder ``target`` and return it, within
    ``limits`` (default: the schema's)."""
    limits = Limits() if limits is None else limits
    target.mkdir(parents=True, exist_ok=False)
    writer = _Writer(target.resolve(), limits, archive.stat().st_size)
    try:
        if archive.name.lower().endswith(ZIP_SUFFIXES):
            _extract_zip(archive, writer, limits)
        else:
            _extract_tar(archive, writer, limits)
    except MemoryError:
        raise Unusable(
            f"{archive.name} needs more memory to unpack than the grader has; upload a plain zip of the files"
        ) from None
    _log.info("archive_extracted", archive=archive.name, entries=writer.entries, bytes=writer.written)
    return target
