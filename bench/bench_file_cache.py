"""One cache for every path (issue 31, item 4): what an out-of-core session leaves its files
(pointers, io/cache_slice.py) costs in disk, and what it saves when one file is opened later.

  python bench/bench_file_cache.py FOLDER [--runs 3] [--file NAME]

Each run, in fresh processes with an empty cache: FOLDER opened cold out of core
(GPUVIEWER_OUT_OF_CORE_MB=0), the bytes of the session's entry and of its pointers; then one of
its files (the second, or NAME) opened through the cache (cut from the session's entry), and the
same file read with no cache (what that open cost before the pointers).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from _common import measure_open

from gpuviewer.io import cache
from gpuviewer.io.session import session_files


def _sizes(root: str) -> tuple[int, int, int]:
    """(bytes of entries with columns, bytes of pointers, pointers) in a cache folder."""
    full = ptr = n = 0
    for e in os.listdir(root):
        d = os.path.join(root, e)
        if e.startswith(".") or not os.path.isdir(d):
            continue
        if os.path.exists(os.path.join(d, "start.npy")):
            full += cache.dir_size(d)
        else:
            ptr += cache.dir_size(d)
            n += 1
    return full, ptr, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--file", help="the file opened alone (default: the folder's second)")
    a = ap.parse_args()
    files = session_files([a.folder])[0]
    one = os.path.join(a.folder, a.file) if a.file else files[min(1, len(files) - 1)]
    os.environ["GPUVIEWER_OUT_OF_CORE_MB"] = "0"
    print(f"# {a.folder}: {len(files)} files, {sum(os.path.getsize(f) for f in files) / 1e6:,.1f} MB; one: {one}")
    for run in range(1, a.runs + 1):
        d = tempfile.mkdtemp()
        spare = tempfile.mkdtemp()
        try:
            cold = measure_open([a.folder], True, d)
            full, ptr, n = _sizes(d)
            cut = measure_open([one], True, d)
            read = measure_open([one], False, spare)
            print(
                f"run {run}: folder cold {cold['seconds']:.2f} s, session entry {full:,} B, "
                f"{n} pointers {ptr:,} B (+{100 * ptr / max(1, full):.2f}%); one file: cut "
                f"{cut['seconds']:.2f} s (from cache: {cut['from_cache']}), read {read['seconds']:.2f} s"
            )
        finally:
            shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(spare, ignore_errors=True)


if __name__ == "__main__":
    main()
