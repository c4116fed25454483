"""Decide what a file is from its content, never from its name."""
from __future__ import annotations

import os
import stat

from .streams import GZIP_MAGIC, SQLITE_MAGIC, first_text_bytes, head

KINETO = "kineto"
NSYS_SQLITE = "nsys-sqlite"
NSYS_REP = "nsys-rep"
TOPO = "nvidia-smi-topo"
TOPO_AUX = "nvidia-smi-text"  # nvlink --status, -q: details joined to a topology
MEMTIMELINE = "torch-memory-timeline"
MEMSNAP = "memory-snapshot"


def sniff(path: str) -> str | None:
    """Return the format name, or None when the content is not something we read."""
    try:
        h = head(path, 16)
    except OSError:
        return None
    if h.startswith(SQLITE_MAGIC):
        return NSYS_SQLITE
    if h.startswith(b"\x80") and len(h) > 1 and h[1] in (2, 3, 4, 5):
        return MEMSNAP  # pickle protocol header
    if path.lower().endswith((".nsys-rep", ".qdrep")):
        return NSYS_REP  # proprietary container; only nsys itself can export it
    text = first_text_bytes(path, 4096) if (h[:2] == GZIP_MAGIC or h) else b""
    body = text.lstrip(b" \t\r\n\xef\xbb\xbf")
    if body[:2] == b"[[" and (body[2:3].isdigit() or body[2:4] == b"-1"):
        return MEMTIMELINE  # rows of numbers, not trace events
    if body[:1] in (b"{", b"["):
        return KINETO
    if b"GPU0" in text and (b"Legend" in text or b"\tX" in text or b" X " in text):
        return TOPO
    if (b"GPU 0:" in text and b"Link 0:" in text) or b"NVSMI LOG" in text:
        return TOPO_AUX
    return None


_TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".nsys-rep", ".pickle", ".txt")


def expand(paths: list[str]) -> list[str]:
    """Files named directly are kept; folders contribute every trace file inside them
    (a tensorboard_trace_handler log dir), found by content."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, _dirs, files in os.walk(p):
                for f in sorted(files):
                    if f.endswith(".gpuviewer.json") or f.startswith(".gpuviewer-"):
                        continue  # our own annotation sidecars
                    fp = os.path.join(root, f)
                    if not is_regular(fp):
                        continue  # a FIFO or device would block the read
                    if sniff(fp) in (KINETO, NSYS_SQLITE, MEMSNAP, MEMTIMELINE, TOPO, TOPO_AUX):
                        out.append(fp)
        else:
            out.append(p)
    return out


def is_regular(path: str) -> bool:
    """A regular file (after following links): only those are read, since opening a FIFO, a
    socket or a device can block forever."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_empty_gzip(path: str) -> bool:
    try:
        return head(path, 2) == GZIP_MAGIC and first_text_bytes(path, 1) == b""
    except OSError:
        return False
