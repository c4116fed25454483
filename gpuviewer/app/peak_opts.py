"""--peak-tflops and --peak-gbps (analyze, stats): the device's roofs for the efficiency results
when the table's (model/peaks.py) are wrong for this machine (clocks, power cap) or it has none."""

from __future__ import annotations

import math


def add_options(p) -> None:
    p.add_argument(
        "--peak-tflops",
        metavar="TFLOPS",
        default=None,
        help="the device's dense peak TFLOP/s, used for every precision (default: the table's for "
        "the GPU the trace names)",
    )
    p.add_argument(
        "--peak-gbps", metavar="GBPS", default=None, help="the device's memory bandwidth, GB/s (default: the table's)"
    )


def values(args) -> tuple[dict, str | None]:
    """({peak_tflops, peak_gbps}, None), or ({}, one line saying which value is wrong)."""
    out = {}
    for opt, key in (("--peak-tflops", "peak_tflops"), ("--peak-gbps", "peak_gbps")):
        raw = getattr(args, key, None)
        if raw is None:
            out[key] = None
            continue
        try:
            v = float(raw)
        except ValueError:
            v = math.nan
        if not (math.isfinite(v) and 0 < v <= 1e7):
            return {}, f"{opt} {raw}: give a number above 0 (e.g. {'989' if key == 'peak_tflops' else '4800'})"
        out[key] = v
    return out, None
