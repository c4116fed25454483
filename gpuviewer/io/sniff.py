"""Decide what a file is from its content, never from its name (the tests themselves are the
readers' own, in io/formats/, asked through io/registry)."""

from __future__ import annotations

import os
import stat

from . import registry
from .streams import GZIP_MAGIC, first_text_bytes, head


def sniff(path: str) -> str | None:
    """Return the format name, or None when the content is not something we read."""
    r = registry.sniff(path)
    return r.name if r is not None else None


def expand(paths: list[str], warnings: list[str] | None = None) -> list[str]:
    """Files named directly are kept; folders contribute every trace file inside them
    (a tensorboard_trace_handler log dir), found by content. A sub-folder that cannot be listed
    or a file that cannot be read is skipped with one line in `warnings` naming it (a rank
    missing without a word reads as a smaller job)."""
    out: list[str] = []
    said = warnings if warnings is not None else []

    def unlisted(e: OSError) -> None:
        said.append(
            f"{e.filename}: a folder that cannot be read ({e.strerror or type(e).__name__}); "
            "its files are not in the session"
        )

    for p in paths:
        if os.path.isdir(p):
            for root, _dirs, files in os.walk(p, onerror=unlisted):
                for f in sorted(files):
                    if f.endswith(".gpuviewer.json") or f.startswith(".gpuviewer-"):
                        continue  # our own annotation sidecars
                    fp = os.path.join(root, f)
                    if not is_regular(fp):
                        continue  # a FIFO or device would block the read
                    if not os.access(fp, os.R_OK):
                        said.append(f"{fp}: a file that cannot be read (permission denied); not in the session")
                        continue
                    r = registry.sniff(fp)
                    if r is not None and r.in_folders:
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
