"""Lane and rank names shortened to a column's width without losing what tells them apart.

Qt's middle elision cut "GPU 0 · stream 14 · compute + NCCL" and its neighbour "... stream 18 ..."
to the same "GPU 0 · stre… compute + NCCL". A name here is parts joined by " · "; the parts
without a number (a lane's kind: "compute + NCCL", "host") give way first, cut at their end;
then the words around the numbers of the others (GPU 0, stream 14, thread 4711), whose numbers
name the lane and are never cut. Only when all of that is at its shortest is the whole name
cut in its middle, as Qt would.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SEP = " · "
ELL = "…"
_MIN = 3  # characters a part keeps besides the ellipsis


def _has_digit(s: str) -> bool:
    return any(c.isdigit() for c in s)


def _cut_end(s: str, n: int) -> str:
    return s if n >= len(s) else s[:n].rstrip() + ELL


def _cut_middle(s: str, n: int) -> str:
    if n >= len(s):
        return s
    head = (n + 1) // 2
    return s[:head].rstrip() + ELL + s[len(s) - (n - head) :]


def _longest(lo: int, hi: int, fits: Callable[[int], bool]) -> int | None:
    """The largest n in [lo, hi] with fits(n) (fits is monotonic), None when none does."""
    if not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _pieces(text: str) -> tuple[list[str], list[tuple[int, Callable[[str, int], str]]]]:
    """The text as pieces, and which of them may be shortened, in the order they give way: whole
    parts without a number first (cut at their end), longest first; then the runs without a
    digit inside numbered parts (a run that ends its part cut at its end, others in their
    middle), longest first. Digits and separators are never cut."""
    mark = re.match(r"[^\w]*", text).group()  # type: ignore[union-attr]  # the arrow and indent stay
    pieces: list[str] = [mark] if mark else []
    kinds: list[tuple[int, int, int, Callable[[str, int], str]]] = []  # (rank, -len, index, cut)
    for k, part in enumerate(text[len(mark) :].split(SEP)):
        if k:
            pieces.append(SEP)
        if not _has_digit(part):
            kinds.append((0, -len(part), len(pieces), _cut_end))
            pieces.append(part)
            continue
        runs = re.findall(r"\d+|\D+", part)
        for j, run in enumerate(runs):
            if not run[0].isdigit():
                kinds.append((1, -len(run), len(pieces), _cut_end if j == len(runs) - 1 else _cut_middle))
            pieces.append(run)
    kinds.sort(key=lambda t: t[:3])
    return pieces, [(i, cut) for _r, _l, i, cut in kinds]


def fit_label(text: str, width: float, advance: Callable[[str], float]) -> str:
    """`text` as it fits in `width` pixels, `advance` measuring a string's width."""
    if advance(text) <= width:
        return text
    pieces, order = _pieces(text)
    orig = list(pieces)
    for least in (_MIN, 1):  # each piece down to 3 characters, then all of them down to 1
        for i, cut in order:
            whole = orig[i]
            if len(whole.strip()) <= least + 1:
                continue

            def fits(n: int, i=i, whole=whole, cut=cut) -> bool:
                return advance("".join(pieces[:i] + [cut(whole, n)] + pieces[i + 1 :])) <= width

            n = _longest(least, len(whole) - 1, fits)
            if n is not None:
                pieces[i] = cut(whole, n)
                return "".join(pieces)
            pieces[i] = cut(whole, least)
    n = _longest(1, len(text) - 1, lambda k: advance(_cut_middle(text, k)) <= width)
    return _cut_middle(text, n) if n is not None else ELL
