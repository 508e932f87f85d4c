"""ledger/files.py: the one atomic write (report, README block, export, sweep.json)."""

from __future__ import annotations

import os
import stat

import pytest

from ledger.files import atomic_write


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_bytes_are_written_as_given_and_text_without_newline_translation(tmp_path):
    out = tmp_path / "f"
    atomic_write(out, b"a\r\nb\rc\n\xff\x00")
    assert out.read_bytes() == b"a\r\nb\rc\n\xff\x00"
    atomic_write(out, "x\r\ny\u00e9\n")
    assert out.read_bytes() == "x\r\ny\u00e9\n".encode()


def test_a_new_file_gets_the_umask_an_existing_one_keeps_its_mode(tmp_path, umask022):
    new, kept = tmp_path / "new", tmp_path / "kept"
    kept.write_text("old")
    kept.chmod(0o640)
    atomic_write(new, "n")
    atomic_write(kept, "k")
    assert (mode(new), mode(kept), kept.read_text()) == (0o644, 0o640, "k")
    os.umask(0o077)
    atomic_write(tmp_path / "private", "p")
    assert mode(tmp_path / "private") == 0o600


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.md"
    target.write_text("old")
    target.chmod(0o664)
    link = tmp_path / "link.md"
    link.symlink_to("real.md")  # relative, as a checkout's links are
    atomic_write(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real.md"
    assert (target.read_text(), mode(target)) == ("new", 0o664)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real.md"]


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "f"
    out.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(out, "a\udcff")  # text no file can hold: fails after the temp file is made
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_root_gives_the_file_back_to_its_owner(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    out = tmp_path / "readme"
    out.write_text("old")
    os.chown(out, 65534, 65534)
    out.chmod(0o664)
    atomic_write(out, "new")
    st = os.stat(out)
    assert (st.st_uid, st.st_gid, mode(out), out.read_text()) == (65534, 65534, 0o664, "new")

