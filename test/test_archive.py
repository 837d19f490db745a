"""Safe unpacking: nothing leaves the target folder, nothing fills the disk."""

import os
import stat
import tarfile
import zipfile

import pytest

from evaluation.archive import Limits, extract
from evaluation.errors import Unusable


def _zip(path, entries, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in entries:
            if isinstance(name, zipfile.ZipInfo):
                archive.writestr(name, data)
            else:
                archive.writestr(name, data)
    return path


def test_regular_archive_is_unpacked(tmp_path):
    archive = _zip(tmp_path / "a.zip", [("x.zarr/.zgroup", "{}"), ("x.zarr/crop1/a", b"123")])
    target = extract(archive, tmp_path / "out")
    assert (target / "x.zarr" / "crop1" / "a").read_bytes() == b"123"


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "/abs/evil", "C:/evil", "a\\..\\..\\evil"])
def test_entries_leaving_the_folder_are_refused(tmp_path, name):
    archive = _zip(tmp_path / "a.zip", [(name, "x")])
    with pytest.raises(Unusable, match="outside|absolute"):
        extract(archive, tmp_path / "out")
    assert not (tmp_path / "evil").exists()
    assert not any((tmp_path / "out").rglob("*evil*"))


def test_symlink_entries_are_refused(tmp_path):
    info = zipfile.ZipInfo("link")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = _zip(tmp_path / "a.zip", [(info, "/etc/passwd")])
    with pytest.raises(Unusable, match="symbolic link"):
        extract(archive, tmp_path / "out")


def test_entry_count_total_size_and_ratio_are_capped(tmp_path):
    many = _zip(tmp_path / "many.zip", [(f"f{i}", "") for i in range(11)])
    with pytest.raises(Unusable, match="11 entries"):
        extract(many, tmp_path / "o1", Limits(max_entries=10))
    big = _zip(tmp_path / "big.zip", [("a", b"x" * 5000)])
    with pytest.raises(Unusable, match="at most 4.0 KB"):
        extract(big, tmp_path / "o2", Limits(max_total_bytes=4000))
    bomb = _zip(tmp_path / "bomb.zip", [("zeros", bytes(4 << 20))])
    with pytest.raises(Unusable, match="zip bomb"):
        extract(bomb, tmp_path / "o3", Limits(max_ratio=100, ratio_min_bytes=1 << 20))


def test_headers_that_understate_the_size_are_refused(tmp_path):
    """Sizes in headers are not trusted: the copy stops at what the header promised and the
    CRC check then fails, so no more than the declared bytes are ever written."""
    archive = _zip(tmp_path / "a.zip", [("a", b"y" * 10_000)])
    with zipfile.ZipFile(archive) as z:
        info = z.infolist()[0]
    # rewrite the central directory's declared size to 10 bytes
    data = bytearray(archive.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    data[central + 24 : central + 28] = (10).to_bytes(4, "little")
    archive.write_bytes(bytes(data))
    with pytest.raises(Unusable):
        extract(archive, tmp_path / "out", Limits(max_total_bytes=1000))
    assert info.file_size == 10_000


def test_not_a_zip_and_truncated_zip(tmp_path):
    fake = tmp_path / "fake.zip"
    fake.write_text("not a zip")
    with pytest.raises(Unusable, match="not a readable zip"):
        extract(fake, tmp_path / "o1")
    good = _zip(tmp_path / "good.zip", [("a", os.urandom(50_000))], zipfile.ZIP_STORED)
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(good.read_bytes()[:30_000])
    with pytest.raises(Unusable):
        extract(truncated, tmp_path / "o2")


def test_duplicate_entries_are_refused(tmp_path):
    with pytest.warns(UserWarning):
        archive = _zip(tmp_path / "a.zip", [("a", "1"), ("a", "2")])
    with pytest.raises(Unusable, match="twice"):
        extract(archive, tmp_path / "out")


def _tar(path, build, mode="w:gz"):
    import io
    import tarfile

    with tarfile.open(path, mode) as archive:
        for name, kind, data in build:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            else:
                info.type = kind
                info.linkname = data
                archive.addfile(info)
    return path


def test_tar_archives_are_unpacked(tmp_path):
    archive = _tar(tmp_path / "a.tar.gz", [("x.zarr/crop1/a", "file", b"123")])
    assert (extract(archive, tmp_path / "out") / "x.zarr" / "crop1" / "a").read_bytes() == b"123"


@pytest.mark.parametrize(
    "entry, message",
    [
        (("link", tarfile.SYMTYPE, "/etc/passwd"), "link"),
        (("hard", tarfile.LNKTYPE, "/etc/passwd"), "link"),
        (("dev", tarfile.CHRTYPE, ""), "special file"),
        (("../../evil", "file", b"x"), "outside"),
        (("/abs", "file", b"x"), "absolute"),
    ],
)
def test_tar_links_devices_and_traversal_are_refused(tmp_path, entry, message):
    archive = _tar(tmp_path / "a.tar", [entry], "w")
    with pytest.raises(Unusable, match=message):
        extract(archive, tmp_path / "out")
    assert not (tmp_path / "evil").exists()


def test_gzip_bomb_in_a_tar_is_stopped(tmp_path):
    archive = _tar(tmp_path / "bomb.tar.gz", [("zeros", "file", bytes(8 << 20))])
    with pytest.raises(Unusable, match="zip bomb"):
        extract(archive, tmp_path / "out", Limits(max_ratio=50, ratio_min_bytes=1 << 20))


def test_nested_and_truncated_archives(tmp_path):
    inner = _zip(tmp_path / "inner.zip", [("a", "1")])
    outer = _zip(tmp_path / "outer.zip", [("predictions/inner.zip", inner.read_bytes())])
    with pytest.raises(Unusable, match="another archive"):
        extract(outer, tmp_path / "o1")
    full = _tar(tmp_path / "full.tar.gz", [("a", "file", os.urandom(200_000))])
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(full.read_bytes()[:50_000])
    with pytest.raises(Unusable, match="truncated or corrupt|not a readable"):
        extract(cut, tmp_path / "o2")


def test_the_limits_default_to_the_schema_and_each_can_be_set(tmp_path):
    """The defaults are the phase schema's (the only place a default is written); a phase's
    ``archive`` option sets any of the four, ``ratio_min_bytes`` included, the rest keep theirs."""
    from evaluation import phase as phases
    from evaluation import schemas

    defaults = phases.key_defaults("archive")
    assert defaults == {"max_total_bytes": 50 << 30, "max_entries": 250_000, "max_ratio": 1000, "ratio_min_bytes": 16 << 20}
    assert Limits() == Limits.from_options(None) == Limits(**defaults)
    assert schemas.errors("phase", {"suite": "cellmap", "archive": {"ratio_min_bytes": 1 << 20}}) == []
    phase = phases.Phase(root=tmp_path, suite="cellmap", options={"archive": {"ratio_min_bytes": 1 << 20}})
    limits = Limits.from_options(phase.option("archive"))
    assert limits == Limits(ratio_min_bytes=1 << 20) and limits.max_entries == 250_000
    assert phase.keys("archive") == {**defaults, "ratio_min_bytes": 1 << 20}
    bomb = _zip(tmp_path / "bomb.zip", [("zeros", bytes(4 << 20))])
    extract(bomb, tmp_path / "default")  # 4 MiB of output: below the default's 16 MiB
    with pytest.raises(Unusable, match="zip bomb"):
        extract(bomb, tmp_path / "set", limits)
