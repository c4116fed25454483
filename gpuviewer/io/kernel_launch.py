"""Kernels' launch configurations, one shape whatever wrote them: grid and block (x, y, z),
registers per thread, shared memory bytes and occupancy %. Kineto records them as separate args
("grid": [x, y, z], "registers per thread", "shared memory", "est. achieved occupancy %"); XLA
as one string, kernel_details "regs:168 static_shared:0 dynamic_shared:213220 grid:2,66,1
block:384,1,1 occ_pct:18.75", and theoretical_occupancy_pct. Read in batches from the source
(io/args_batch.py) for the efficiency work, which the session hands them to."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np

from ..model.trace import Trace
from .args_batch import ArgsSpec, kineto_args
from .chrome_values import bounded_int

_Launch = msgspec.defstruct(
    "Launch",
    [
        ("grid", Any, msgspec.field(default=None, name="grid")),
        ("block", Any, msgspec.field(default=None, name="block")),
        ("regs", Any, msgspec.field(default=None, name="registers per thread")),
        ("shared", Any, msgspec.field(default=None, name="shared memory")),
        ("occupancy", Any, msgspec.field(default=None, name="est. achieved occupancy %")),
        ("details", Any, msgspec.field(default=None, name="kernel_details")),
        ("theoretical", Any, msgspec.field(default=None, name="theoretical_occupancy_pct")),
    ],
)
_SPEC = ArgsSpec(_Launch)
_FIELD = re.compile(r"(\w+):([^\s]+)")


def kernel_launches(trace: Trace, idx: np.ndarray) -> dict[int, dict]:
    """Event index -> {"grid", "block", "regs", "shared_bytes", "occupancy_pct"} (only those
    recorded) for the kernels idx of a Chrome JSON session (Kineto or JAX)."""
    out = {}
    for i, rec in kineto_args(trace, np.asarray(idx), _SPEC).items():
        got = launch_of(rec)
        if got:
            out[i] = got
    return out


def launch_of(a: dict) -> dict:
    """One kernel's recorded arguments (our field names) in the common shape."""
    out: dict = {}
    details = a.get("details")
    if isinstance(details, str):
        f = dict(_FIELD.findall(details[:1000]))
        grid, block = _dims(f.get("grid")), _dims(f.get("block"))
        shared = [_int(f.get(k)) for k in ("static_shared", "dynamic_shared")]
        for k, v in (
            ("grid", grid),
            ("block", block),
            ("regs", _int(f.get("regs"))),
            ("shared_bytes", sum(s for s in shared if s is not None) if any(s is not None for s in shared) else None),
            ("occupancy_pct", _num(f.get("occ_pct"))),
        ):
            if v is not None:
                out[k] = v
    for k, v in (
        ("grid", _dims(a.get("grid"))),
        ("block", _dims(a.get("block"))),
        ("regs", _int(a.get("regs"))),
        ("shared_bytes", _int(a.get("shared"))),
        ("occupancy_pct", _num(a.get("occupancy"))),
        ("occupancy_pct", _num(a.get("theoretical"))),
    ):
        if v is not None and k not in out:
            out[k] = v
    return out


def _dims(v) -> tuple[int, int, int] | None:
    if isinstance(v, str):
        v = v.split(",")
    if isinstance(v, (list, tuple)) and 1 <= len(v) <= 3:
        d = [_int(x) for x in v]
        if all(x is not None and x > 0 for x in d):
            return tuple(d + [1] * (3 - len(d)))  # type: ignore[return-value]
    return None


def _int(v) -> int | None:
    return bounded_int(v, 0, (1 << 62) - 1)


def _num(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return x if 0 <= x <= 100 else None
