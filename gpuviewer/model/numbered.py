"""The share of a trace's numbered host events it holds (PyTorch's "Ev Idx": io/kineto_numbered.py
reads them; the analysis says it beside a rank's host shares)."""

from __future__ import annotations

# below this share of the numbers present a file is taken as sampled or filtered: a trace the
# profiler wrote holds all of them (every shared and compat trace: 100%), a filtered one few
# (HTA's sampled ranks 1%)
KEPT_MIN = 0.9


def kept_share(n: list[int] | None) -> float | None:
    """Of [how many, lowest, highest] numbers a file holds: the share of the numbers from the
    lowest to the highest it holds, where under KEPT_MIN; None for a file that holds (nearly) all,
    or none."""
    if not n or n[0] < 1:
        return None
    share = n[0] / (n[2] - n[1] + 1)
    return share if share < KEPT_MIN else None
