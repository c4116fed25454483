"""Lane and rank names shortened to a column's width without losing what tells them apart.

Qt's middle elision cut "GPU 0 · stream 14 · compute + NCCL" and its neighbour "... stream 18 ..."
to the same "GPU 0 · stre… compute + NCCL". A name here is parts joined by " · "; the parts
without a number (a lane's kind: "compute + NCCL", "host") give way first, cut at their end;
then the words around the numbers of the others (GPU 0, stream 14, thread 4711), whose numbers
name the lane and are never cut. A GPU's vendor goes before all that; digits inside a word (a
model's "A100-SXM4-40GB", a file's "rank0.json") are no such number. Only when all of that is at its shortest is the whole name
cut in its middle, as Qt would.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SEP = " · "
ELL = "…"
_MIN = 3  # characters a part keeps besides the ellipsis


# a number that names a lane or rank stands alone ("GPU 0", "stream 14", "thread 4711"); digits
# inside a word are part of a name ("A100-SXM4-40GB", "perlmutter0.sqlite", "python3"), which
# split at them read as "GPU 0...100-SXM4-40GB · s...0...." (a review)
_NUMBER = re.compile(r"(?<![\w.\-])\d+(?!\w)")  # (followed by '-' or '.': "stream 14-copy")
# a GPU's vendor, the first thing a rank's title gives up (the model says it: "A100-SXM4-40GB")
_VENDOR = re.compile(r"\b(?:NVIDIA|Tesla|AMD) ")


_DIGITS = re.compile(r"\d+")


def _has_digit(s: str, number: re.Pattern = _NUMBER) -> bool:
    return number.search(s) is not None


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
    # a name of parts: its numbers stand alone; one without (a kernel's name) keeps its digits'
    # runs as they are, cut between them
    number = _NUMBER if SEP in text else _DIGITS
    kinds: list[tuple[int, int, int, Callable[[str, int], str]]] = []  # (rank, -len, index, cut)
    for k, part in enumerate(text[len(mark) :].split(SEP)):
        if k:
            pieces.append(SEP)
        if not _has_digit(part, number):
            kinds.append((0, -len(part), len(pieces), _cut_end))
            pieces.append(part)
            continue
        runs = [r for r in re.split(f"({number.pattern})", part) if r]
        for j, run in enumerate(runs):
            if not number.fullmatch(run):
                kinds.append((1, -len(run), len(pieces), _cut_end if j == len(runs) - 1 else _cut_middle))
            pieces.append(run)
    kinds.sort(key=lambda t: t[:3])
    return pieces, [(i, cut) for _r, _l, i, cut in kinds]


def fit_label(text: str, width: float, advance: Callable[[str], float]) -> str:
    """`text` as it fits in `width` pixels, `advance` measuring a string's width."""
    if advance(text) <= width:
        return text
    text = _VENDOR.sub("", text)  # lossless enough: the tooltip has the whole name
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
