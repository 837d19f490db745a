"""Seeing which files were opened: Linux inotify on folders, which reports every ``open`` (and
read) of a file in them by any process, whatever library or C code makes it. The attack tests
use it to prove that a reference to the ground truth was refused *and* never followed."""

import ctypes
import os
import struct
from pathlib import Path


class Opens:
    """Files opened (``IN_OPEN``) or read (``IN_ACCESS``) in the watched folders, by this
    process or any other; listing a folder is not reported. ``names()`` drains what was seen."""

    IN_ACCESS, IN_OPEN, IN_ISDIR, IN_NONBLOCK, IN_CLOEXEC = 0x1, 0x20, 0x40000000, 0o4000, 0o2000000

    def __init__(self, *folders: Path):
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self._libc.inotify_init1(self.IN_NONBLOCK | self.IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.folders = {}
        for folder in folders:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), self.IN_OPEN | self.IN_ACCESS)
            if wd < 0:
                os.close(self.fd)
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
            self.folders[wd] = Path(folder)

    def events(self) -> set[tuple[Path, str]]:
        """(folder, file name) of every open or read since the last call."""
        found = set()
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                wd, mask, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16 : offset + 16 + length].rstrip(b"\0").decode("utf-8", "surrogateescape")
                if not mask & self.IN_ISDIR and name:
                    found.add((self.folders[wd], name))
                offset += 16 + length

    def names(self, ignore: tuple[str, ...] = ()) -> set[str]:
        return {name for _, name in self.events() if name not in ignore}

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
