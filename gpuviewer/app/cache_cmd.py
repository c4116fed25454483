"""`gpuviewer cache --verify | --clear`: check or empty the column cache (io/cache.py)."""

from __future__ import annotations

import os
import shutil
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="check (--verify) or empty (--clear) the column cache")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--verify",
        action="store_true",
        help="check every entry's files against their checksums (exit 1 if any is damaged)",
    )
    what.add_argument("--clear", action="store_true", help="remove every cache entry gpuviewer wrote")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(func=cmd_cache)


def _entries(root: str) -> tuple[list[str], list[str]]:
    """(entry folders, temporary build folders) in root: only names gpuviewer gives them (32 hex
    digits, .tmp-...) and only real folders, so nothing else in the folder is touched."""
    entries, tmps = [], []
    for n in sorted(os.listdir(root)):
        p = os.path.join(root, n)
        if os.path.islink(p) or not os.path.isdir(p):
            continue
        if len(n) == 32 and all(c in "0123456789abcdef" for c in n):
            entries.append(p)
        elif n.startswith(".tmp-"):
            tmps.append(p)
    return entries, tmps


def cmd_cache(args) -> int:
    from ..io import cache
    from ..io.cache_check import Damaged, verify_entry
    from ..model.plain import term

    root = cache.cache_root()
    if not os.path.lexists(root):
        print(term(f"no cache at {root}"))
        return 0
    try:
        entries, tmps = _entries(root)
    except OSError as e:
        print(term(f"gpuviewer: {root}: cannot list the cache folder ({e.strerror})"), file=sys.stderr)
        return 2
    if args.clear:
        size = sum(cache.dir_size(d) for d in entries + tmps)
        for d in entries + tmps:
            shutil.rmtree(d, ignore_errors=True)
        left = [d for d in entries + tmps if os.path.lexists(d)]
        print(
            term(
                f"removed {len(entries) - len([d for d in left if d in entries])} cache entries "
                f"({size / 1e6:.1f} MB) from {root}"
            )
        )
        if left:
            print(term(f"gpuviewer: {left[0]}: could not be removed ({len(left)} in all)"), file=sys.stderr)
            return 2
        return 0
    damaged = 0
    size = 0
    for d in entries:
        size += cache.dir_size(d)
        try:
            verify_entry(d)
        except (Damaged, OSError) as e:
            damaged += 1
            print(term(f"damaged     {d}: {e}"))
    stale = cache.sweep(root)  # builds left behind, as at the start of any command
    print(
        term(
            f"{len(entries)} cache entries ({size / 1e6:.1f} MB) in {root}: "
            f"{damaged} damaged"
            + (f"; {len(stale)} unfinished builds removed" if stale else "")
            + ("; each damaged entry is rebuilt from its trace when next opened" if damaged else "")
        )
    )
    return 1 if damaged else 0
