"""The share of a trace's numbered host events it holds (PyTorch's "Ev Idx": io/kineto_numbered.py
reads them; the analysis says it beside a rank's host shares)."""

from __future__ import annotations

# below this share of the numbers present a file is taken as sampled or filtered: a trace the
# profiler wrote holds all of them (every shared and compat trace: 100%), a filtered one few
# (HTA's sampled ranks 1%)
KEPT_MIN = 0.9


def kept_share(n: list[int] | None) -> float | None:
    """Of [how many, lowest, highest, widest gap, ...] numbers a file holds: the share of the
    numbers from the lowest to the highest it holds, where under KEPT_MIN and the missing ones
    spread through them (the widest gap under half of them: one stray number far off, or two
    captures' numbers side by side, leave one gap that is most of them, and no filter did that);
    None for a file that holds (nearly) all, or none, or an entry without the gaps (an older one)."""
    if not n or len(n) < 4 or n[0] < 2:
        return None
    span = n[2] - n[1] + 1
    share = n[0] / span
    return share if share < KEPT_MIN and n[3] < 0.5 * (span - n[0]) else None


def kept_pct(share: float) -> str:
    """A kept share as words: 'under 0.1%', '1.0%', '46%'."""
    return "under 0.1%" if share < 0.001 else f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


def kept_range(shares) -> str:
    """Several files' kept shares as words: '1.0%', or the least and most, '0.9%-1.0%'."""
    lo, hi = kept_pct(min(shares)), kept_pct(max(shares))
    return lo if lo == hi else f"{lo}-{hi}"
