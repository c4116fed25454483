"""What the HTML and the Markdown reports say alike, so that they never drift apart: where a
finding is, and the time spans of a step's row."""

from __future__ import annotations

from collections.abc import Callable

# A step's spans in ns, by column. Each report picks its columns and unit (HTML: durations in
# their own unit; Markdown: ms); older analyses lack wait/transfer, hence the defaults.
STEP_SPANS: dict[str, Callable[[dict], float]] = {
    "window": lambda s: s["end_ns"] - s["start_ns"],
    "busy": lambda s: s["busy_ns"],
    "compute": lambda s: s["compute_ns"],
    "comm": lambda s: s["comm_ns"],
    "wait": lambda s: s.get("wait_ns", 0),
    "transfer": lambda s: s.get("transfer_ns", s["comm_ns"]),
    "exposed_comm": lambda s: s["exposed_comm_ns"],
    "memcpy": lambda s: s["memcpy_ns"],
    "idle": lambda s: s["idle_ns"],
}


def step_cells(step: dict, columns: tuple[str, ...], fmt: Callable[[float], str]) -> list[str]:
    """One step's spans (STEP_SPANS keys, in order), each formatted by fmt."""
    return [fmt(STEP_SPANS[k](step)) for k in columns]


def where(f) -> str:
    """ "ranks 0, 1, step 3": the ranks of a finding (results.Finding), and its step when it has one."""
    return f"ranks {', '.join(map(str, f.ranks))}" + (f", step {f.step}" if f.step is not None else "")
