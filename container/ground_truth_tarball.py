"""Write a phase folder as the ground-truth tarball a Grand-Challenge phase takes.

    python3 container/ground_truth_tarball.py PHASE_DIR TARBALL [--phase NAME]

Grand-Challenge's shim extracts the tarball with tarfile's ``data`` filter (rse-sagemaker-shim
``models.py`` ``download_and_extract_tarball``): a symbolic link with an absolute target or one
leaving the folder, or a device, FIFO or socket, fails *every* evaluation of the phase with
"Could not set up ground truth". So this writer stores only folders and regular files: a link
to a file inside the phase is stored as that file's content, anything else is refused with the
path to fix. Names are relative, owners 0, modes 0644/0755, times zero and the gzip header
bare, so the same folder gives the same bytes.

Grand-Challenge refuses a ground-truth upload whose SHA-256 equals any tarball already on the
platform (``evaluation/models.py`` ``EvaluationGroundTruth``, ``assign_tarball_from_upload``),
so the phase's name is written into the archive (a PAX global header comment, which
extraction ignores): two phases with the same truth get two different tarballs.

Standard library only: organizers run it on their own machine (``./export.sh --ground-truth``).
"""

import argparse
import gzip
import os
import stat
import sys
import tarfile
from pathlib import Path


class Refused(Exception):
    """An entry the platform's extraction would refuse."""


def entries(root: Path):
    """(archive name, path whose content to store or None for a folder), in a stable order."""
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        here = Path(folder)
        for name in sorted(dirs) + sorted(files):
            path = here / name
            relative = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                yield relative, None
            elif stat.S_ISREG(info.st_mode):
                yield relative, path
            elif stat.S_ISLNK(info.st_mode):
                yield relative, _link_target(root, path, relative)
            else:
                raise Refused(f"{relative} is a device, FIFO or socket; a phase holds only files and folders")


def _link_target(root: Path, path: Path, relative: str) -> Path:
    target = Path(os.path.realpath(path))
    if os.path.commonpath([target, root.resolve()]) != str(root.resolve()):
        raise Refused(
            f"{relative} is a symbolic link leaving the phase folder; Grand-Challenge's extraction refuses it: "
            "copy the file into the phase folder"
        )
    if not target.is_file():
        raise Refused(f"{relative} is a symbolic link to a folder or to nothing; replace it with the files themselves")
    return target


def write(root: Path, tarball: Path, phase: str) -> int:
    """Writes the tarball (through a temporary name); returns the number of files stored."""
    if not (root / "phase.yaml").is_file():
        raise Refused(f"{root} holds no phase.yaml at its top")
    partial = tarball.with_name(tarball.name + ".partial")
    count = 0
    try:
        with open(partial, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed:
            with tarfile.open(
                fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": f"phase {phase}"}
            ) as archive:
                for name, source in entries(root):
                    member = tarfile.TarInfo(name)
                    member.mtime, member.uid, member.gid, member.uname, member.gname = 0, 0, 0, "", ""
                    if source is None:
                        member.type, member.mode = tarfile.DIRTYPE, 0o755
                        archive.addfile(member)
                        continue
                    member.size = source.stat().st_size
                    member.mode = 0o755 if os.access(source, os.X_OK) else 0o644
                    with open(source, "rb") as content:
                        archive.addfile(member, content)
                    count += 1
        os.replace(partial, tarball)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return count


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase_dir", type=Path)
    parser.add_argument("tarball", type=Path)
    parser.add_argument("--phase", default=None, help="the phase's name, written into the archive (default: the folder's name)")
    args = parser.parse_args(argv)
    try:
        count = write(args.phase_dir, args.tarball, args.phase or args.phase_dir.resolve().name)
    except Refused as exc:
        print(f"ground-truth tarball not written: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.tarball} ({count} files, phase {args.phase or args.phase_dir.resolve().name!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
