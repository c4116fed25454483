"""Issue 30, item 1 for every output path: screenshot, report and diff -o write over nothing that
gpuviewer did not write (a file of someone else's, a folder, a link, a FIFO stay as they are, exit
2 and one line); what gpuviewer wrote before is replaced, atomically, with the mode of a file the
user creates. Real subprocesses on samples/ddp; the files compared byte for byte."""

import os
import stat

import pytest
from conftest import SAMPLES, run_cli

DDP = os.path.join(SAMPLES, "ddp")
RANK0 = os.path.join(DDP, "ddp_rank0.json.gz")
RANK1 = os.path.join(DDP, "ddp_rank1.json.gz")


def _foreign_png() -> bytes:
    """A real PNG written by someone else (Qt, without gpuviewer's mark)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QColor, QImage

    img = QImage(8, 8, QImage.Format_RGB32)
    img.fill(QColor("red"))
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.WriteOnly)
    img.save(buf, "PNG")
    return bytes(ba)


def refused(r, path) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr and "\n" not in err and str(path) in err, r.stderr
    return err


FOREIGN = {
    "screenshot": ("out.png", lambda: _foreign_png()),
    "timeline": ("out.svg", lambda: b"<svg xmlns='http://www.w3.org/2000/svg'><title>my drawing</title></svg>"),
    "report": ("out.html", lambda: b"<!DOCTYPE html><html><head><title>my page</title></head></html>"),
    "report_md": ("out.md", lambda: b"# my notes\n\nkeep me\n"),
    "diff": ("out.md", lambda: b"# Results of Tuesday\n"),
}


def _cmd(kind: str, out: str) -> list[str]:
    if kind == "screenshot":
        return ["screenshot", DDP, "-o", out]
    if kind == "timeline":
        return ["screenshot", DDP, "-o", out, "--timeline-only"]
    if kind in ("report", "report_md"):
        return ["report", DDP, "-o", out]
    return ["diff", RANK0, RANK1, "-o", out]


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_someone_elses_file_is_not_replaced(tmp_path, kind):
    name, content = FOREIGN[kind]
    out = tmp_path / name
    data = content()
    out.write_bytes(data)
    err = refused(run_cli(*_cmd(kind, str(out))), out)
    assert "not written by gpuviewer" in err and "not replaced" in err
    assert out.read_bytes() == data and os.listdir(tmp_path) == [name]


@pytest.mark.parametrize("what", ["folder", "symlink", "fifo"])
def test_a_folder_a_link_or_a_fifo_is_left(tmp_path, what):
    out = tmp_path / "out.png"
    target = tmp_path / "real.png"
    if what == "folder":
        out.mkdir()
    elif what == "symlink":
        target.write_bytes(_foreign_png())
        os.symlink(target, out)
    else:
        os.mkfifo(out)  # opening it to look inside would block: a hang is the failure
    before = sorted(os.listdir(tmp_path))
    refused(run_cli("screenshot", DDP, "-o", str(out)), out)
    assert sorted(os.listdir(tmp_path)) == before
    assert {"folder": os.path.isdir, "symlink": os.path.islink, "fifo": lambda p: stat.S_ISFIFO(os.lstat(p).st_mode)}[
        what
    ](out)


def test_what_gpuviewer_wrote_is_replaced_with_the_users_mode(tmp_path):
    out = tmp_path / "shot.png"
    assert run_cli("--version").returncode == 0  # a command run before, under the usual umask
    old = os.umask(0o027)  # not the usual 022: the command must follow the umask it is run with
    try:
        for _ in range(2):  # the second run replaces the first run's picture
            r = run_cli("screenshot", DDP, "-o", str(out), "--timeline-only", "--size", "800x500")
            assert r.returncode == 0, r.stderr
    finally:
        os.umask(old)
    head = out.read_bytes()[:4096]
    assert head.startswith(b"\x89PNG") and b"Software" in head and b"gpuviewer" in head
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["shot.png"]  # no temporary file left


@pytest.mark.parametrize("name", ["d.md", "d.html"])
def test_a_diff_written_twice_replaces_its_own_file(tmp_path, name):
    out = tmp_path / name
    for _ in range(2):
        r = run_cli("diff", RANK0, RANK1, "-o", str(out))
        assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path) == [name] and out.stat().st_size > 100
