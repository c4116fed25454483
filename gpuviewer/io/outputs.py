"""Where the command line writes (screenshot, report, diff -o): never over anything gpuviewer did
not write. An output path is written when nothing is there, or when a regular file is there that
gpuviewer wrote before (each kind of output carries a mark: a PNG's Software text, an SVG's or
HTML page's title, a Markdown file's first heading); a folder, a link, a device, a FIFO or
someone else's file is left as it is, with one line saying so. (The window asks the user in its
save dialog instead.) The summary folder has its own, stricter rule (scale/summary.py)."""

from __future__ import annotations

import os
import stat

from ..errors import GpuviewerError
from .bounded import NotRegular, read_regular

SOFTWARE = "gpuviewer"  # the PNG text "Software" and the SVG title our images carry
_HEAD = 64 << 10  # a mark is near the start of the file


def _ours(path: str, head: bytes) -> bool:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".png":
        # Qt writes the text chunks before the image data
        pre = head.split(b"IDAT", 1)[0]
        return head.startswith(b"\x89PNG") and b"Software\x00" in pre and SOFTWARE.encode() in pre
    if ext == ".svg":
        return f"<title>{SOFTWARE}</title>".encode() in head[:4096]
    if ext in (".html", ".htm"):
        return b"<title>gpuviewer " in head[:4096]
    if ext == ".md":
        return head.startswith(b"# gpuviewer ")
    return False


def refusal(path: str) -> str | None:
    """Why `path` must not be written (one line, naming it), or None when it may be."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        return None if os.path.isdir(parent) else f"{path}: its folder {parent} does not exist"
    except OSError as e:
        return f"{path}: cannot write it ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path}: is a symbolic link; not replaced (write to its target's name instead)"
    if stat.S_ISDIR(st.st_mode):
        return f"{path}: is a folder; give a file name"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: is not a regular file; not replaced"
    try:
        head, _st = read_regular(path, _HEAD, whole=False)  # a FIFO swapped in cannot block
    except NotRegular:
        return f"{path}: is not a regular file; not replaced"
    except OSError as e:
        return f"{path}: exists and cannot be read ({e.strerror}); not replaced"
    if not _ours(path, head):
        return f"{path}: exists and was not written by gpuviewer; not replaced (remove it or choose another name)"
    return None


class OutputRefused(GpuviewerError, OSError):
    """An output path that must not be written (str: the one line)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg

    def __str__(self) -> str:
        return self.msg


def check(path: str) -> None:
    """OutputRefused when `path` must not be written (asked before the work and again right
    before the file is put in place)."""
    why = refusal(path)
    if why is not None:
        raise OutputRefused(why)
