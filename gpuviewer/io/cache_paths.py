"""Which cache entry a file's session is, by the files' identity, and its paths said as this
open spells them.

An entry is keyed by what each file is, not by how it was named: its device and inode, with
its size, mtime and ctime as validity. A link to the file, the folder reached through a link, a
bind mount, a relative path or `..` in it all find the entry one spelling wrote; a copy (another
inode) is read again. A file replaced in place is a new inode or a new size/mtime, and its ctime
always moves (no program can set it back), so it never meets the old entry. Where a file system
gives no inode number (0), the resolved path stands in for it.

The entry holds the paths of the open that wrote it; one found through another spelling says
this open's paths instead (respell), so what is printed names the files as they were asked for
and an argument fetched later opens the path given, not one that may since have gone.
"""

from __future__ import annotations

import os
import re

from ..model.trace import Trace


def identity(f: str) -> list:
    """What the key holds of one file (and of SQLite's -wal/-journal beside it)."""
    st = os.stat(f)
    out: list = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    if not st.st_ino:  # no inode numbers here: the resolved path's bytes name the file
        out.append(os.fsencode(os.path.realpath(f)).hex())
    real = os.path.realpath(f)  # SQLite puts its journal beside the resolved database file
    for side in ("-wal", "-journal"):  # SQLite commits into these without touching the file
        try:
            ss = os.stat(real + side)
            out.append([side, ss.st_size, ss.st_mtime_ns])
        except OSError:
            pass
    return out


def respell(t: Trace, stored: list[str] | None, files: list[str]) -> None:
    """Say this open's paths (files) where the entry says the ones it was written with (stored,
    file for file in the same order: the same identities)."""
    if not stored or len(stored) != len(files) or list(stored) == list(files):
        return
    spell: dict[str, str] = {}
    for old, new in zip(stored, files):
        if old != new:
            spell[old] = new
            spell[os.path.abspath(old)] = os.path.abspath(new)
            ob, nb = os.path.basename(old), os.path.basename(new)
            if ob != nb:  # warnings often name a file by its name alone
                spell.setdefault(ob, nb)
    if not spell:
        return
    for s in t.sources:
        s.path = spell.get(s.path, s.path)
    for r in t.ranks:
        r.files = [spell.get(f, f) for f in r.files]
    md = t.metadata
    for k in ("files", "skipped_files"):
        if isinstance(md.get(k), list):
            md[k] = [spell.get(f, f) for f in md[k]]
    for pf in md.get("per_file") or []:
        if isinstance(pf, dict) and isinstance(pf.get("path"), str):
            pf["path"] = spell.get(pf["path"], pf["path"])
    # a whole path or name only, never part of a longer one; the longest first
    words = sorted(spell, key=len, reverse=True)
    edge = r"[\w.\-/\\]"
    pat = re.compile(f"(?<!{edge})(?:" + "|".join(re.escape(w) for w in words) + f")(?!{edge}*[\\w/\\\\])")
    t.warnings = [pat.sub(lambda m: spell[m.group(0)], w) for w in t.warnings]
