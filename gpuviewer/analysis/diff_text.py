"""The headline of a comparison in words (the command line's text, the Compare window's
summary): which ranks and steps each side is, the step time A -> B, the largest significant
change of each kind, and the noise rule."""

from __future__ import annotations

import os

# defined here, not in diff_tables.py (pandas): `gpuviewer` builds its parsers from diff_cmd, which
# imports this, and a command other than diff should not pay for pandas' import
NO_STEP = -1  # the one unit of a rank without steps: its whole capture


def ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def dms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:+.3f}"


def verdict(sig: bool) -> str:
    return "significant" if sig else "within noise"


def significant_parts(r: dict) -> list[str]:
    """Which of a compared collective's wait and transfer changed beyond the noise."""
    return [p for p in ("wait", "transfer") if r[f"{p}_significant"]]


def collective_verdict(r: dict) -> str:
    """A compared collective's verdict: "wait and transfer significant", ..., "within noise"."""
    sig = significant_parts(r)
    return " and ".join(sig) + " significant" if sig else "within noise"


def size_text(nbytes: int | None) -> str:
    """A compared collective's size: its bytes, or "all" for a row of every size together."""
    return "all" if nbytes is None else f"{nbytes:,}"


def cut(s: str, n: int = 100) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def side_text(d: dict, side: str, name: str | None = None) -> str:
    """ "ddp_clean: rank 1, steps 2, 3, 4" (the name: the first path's base name by default)."""
    x = d[side]
    ranks = (
        "median of ranks " if x.get("ranks_how") == "median" else "rank " if len(x["ranks"]) == 1 else "ranks "
    ) + ", ".join(map(str, x["ranks"]))
    steps = ("median of steps " if x["how"] == "median" else "steps ") + ", ".join(map(str, x["steps"]))
    if x["steps"] == [NO_STEP]:
        steps = "the whole capture (no steps on record)"
    if name is None:
        name = os.path.basename(x["paths"][0].rstrip("/")) if x.get("paths") else side.upper()
    return f"{name}: {ranks}, {steps}"


def headline(d: dict, names: tuple[str, str] | None = None) -> list[str]:
    n = d["noise"]
    step = next(r for r in d["step_parts"] if r["part"] == "step")
    lines = [
        f"A  {side_text(d, 'a', names[0] if names else None)}",
        f"B  {side_text(d, 'b', names[1] if names else None)}",
        f"step {ms(step['a_ns'])} ms -> {ms(step['b_ns'])} ms ({dms(step['delta_ns'])} ms, "
        f"{verdict(step['significant'])})",
    ]
    ops = d.get("gpu_ops_per_step") or [0, 0]
    if min(ops) > 0 and max(ops) > 1.1 * min(ops):
        lines.append(
            f"not the same work: A runs {ops[0]:,.0f} GPU ops a step, B {ops[1]:,.0f}: the op tables compare "
            "different work, not the same work's speed"
        )
    mem = d.get("memory_peak_bytes") or [None, None]
    if None not in mem:
        lines.append(f"GPU memory, peak allocated (the ranks' highest): {mem[0] / 1e9:.2f} GB -> {mem[1] / 1e9:.2f} GB")
    if d["top"]:
        lines.append("largest significant change of each kind:")
        lines += [
            f"  {t['table']}: {cut(t['what'])}: {ms(t['a_ns'])} -> {ms(t['b_ns'])} ms a step ({dms(t['delta_ns'])})"
            for t in d["top"]
        ]
    else:
        lines.append("no change beyond the noise")
    est = "" if n["estimated"] else " (one step each side: no noise estimate, the floor alone decides)"
    lines.append(
        f"significant: |Δ| > {n['k_sigma']:g} standard errors of the step-to-step variation and "
        f">= {ms(n['floor_ns'])} ms ({n['floor_frac_of_step']:.0%} of the step){est}"
    )
    return lines
