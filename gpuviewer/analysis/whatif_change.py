"""A what-if's change (whatif.py replays it): what it alters and how it is said. Apart from the
replay so that the modules a change needs at replay time (usual_op.py) can build one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# NVLink 4 (H100 / H200 SXM): 18 links x 25 GB/s each way = 450 GB/s, the bus bandwidth an
# NVLink all-reduce can reach at best (NVIDIA's H200 datasheet: 900 GB/s bidirectional).
DEFAULT_PEAK_BUSBW_GBPS = 450.0
# no_launch_overhead: a host gap this long between launches is other work, kept (the line
# host_bound.HOST_GAP_MIN_NS draws between launch gaps and host stalls)
OTHER_WORK_NS = 1_000_000


# a load imbalance's fix moves work, it makes no GPU faster, and the other ranks take on what the
# heavy one sheds (pp_gpu's last stage; an audit's finding): its what-if is an upper bound, said so
EVEN_SPLIT = (
    "rank {rank}'s GPU compute a step as the median of the other ranks' (the work split evenly; an upper "
    "bound: the work moved adds to theirs)"
)


@dataclass
class Change:
    # remove_gap | rank_like_median | no_launch_overhead | comm_at_peak | faster | no_copies | no_syncs |
    # shorten_host | overlap_comm
    kind: str
    rank: int | None = None
    step: int | None = None
    part: str = "both"
    regex: str | None = None
    pct: float = 0.0
    peak_gbps: float = DEFAULT_PEAK_BUSBW_GBPS
    # faster: these GPU ops (event indices) instead of the names matching regex, and what they are
    # in words (the efficiency findings name a kernel family or a GEMM shape, not a regex)
    events: np.ndarray | None = field(default=None, repr=False, compare=False)
    label: str | None = None
    label_whole: bool = False  # the label says the whole change: no "Nx faster" after it
    after: str = ""  # faster: said after "Nx faster ..." (what the speed-up rests on)
    # faster: each op's first fixed_ns are not shortened (a kernel's fixed cost: filling the GPU,
    # the first tiles' loads, the epilogue), only its time past them; ops shorter keep their time
    fixed_ns: int = 0
    # shorten_host: the op's spans (rows of start, end relative to the model's t0) and the time cut
    windows: np.ndarray | None = field(default=None, repr=False, compare=False)
    cut_ns: int = 0
    # no_launch_overhead: host gaps between two launches shorter than this are the launch path's and
    # go; longer ones are other work and stay (100_000: the launch path proper, launch_bound's limit)
    gap_ns: int = OTHER_WORK_NS
    # rank_like_median, once replayed: per step the change scaled, the rank's host work and the
    # others' median (ns), what a saving's sentence says it rests on (savings._host_basis)
    host_scaled: list[tuple[int, float, float]] = field(default_factory=list, repr=False, compare=False)

    def describe(self) -> str:
        if self.kind == "faster" and self.label:
            # a label naming its own target ("... as long as in the other steps") says it all
            if self.label_whole:
                return self.label
            said = f"{self.label} {1 / max(1 - self.pct / 100, 1e-9):.1f}x faster"
            return said + (f" past their first {_us(self.fixed_ns)} µs each" if self.fixed_ns else "") + self.after
        if self.kind == "shorten_host":  # "": said by another change of the same fix
            return self.label if self.label is not None else f"rank {self.rank}'s host op at its usual time"
        if self.kind == "remove_gap":
            return f"remove the longest host gap of rank {self.rank} in " + (
                f"step {self.step}" if self.step is not None else "every step"
            )
        if self.kind == "rank_like_median":
            if self.label:
                return self.label
            part = {"both": "host and GPU", "host": "host", "gpu": "GPU"}[self.part]
            return f"rank {self.rank}'s {part} as fast as the median of the other ranks'"
        if self.kind == "no_launch_overhead":
            gap = "1 ms" if self.gap_ns == OTHER_WORK_NS else f"{_us(self.gap_ns)} µs"
            # (what the replay does: every CUDA call but syncs, allocations and the like goes, and a
            # stream's kernels follow each other at the spacing it shows back to back; the sentence
            # said 'launch calls' and no spacing: launch_bound_big's 25% left read as unexplained)
            return (
                "no launch overhead: the CUDA calls a graph would capture (launches, event records and waits) and "
                f"the host's work between two of them (gaps under {gap}) gone, each stream's kernels then at its "
                "recorded back-to-back spacing (as CUDA graphs would)"
            )
        if self.kind == "comm_at_peak":
            return f"collectives at {self.peak_gbps:g} GB/s bus bandwidth"
        if self.kind == "overlap_comm":
            which = f"collectives matching /{self.regex}/" if self.regex else "collectives"
            return (
                f"{which} overlapped with the compute before them on other streams (their inputs "
                "taken as ready, run beside compute at their recorded speed; sends left waiting)"
            )
        if self.kind == "no_copies":
            return (
                "memory copies take no time, nor their calls on the host (the most that moving less data, "
                "keeping it on the GPU, could save; copying behind compute hides at most the compute beside it)"
            )
        if self.kind == "no_syncs":
            who = "the host" if self.rank is None else f"rank {self.rank}'s host"
            return (
                f"{who} does not wait in synchronize calls (stream, event, device syncs, a framework's wait for the device; not one reading a "
                "copy's result)"
            )
        past = f" past their first {_us(self.fixed_ns)} µs each" if self.fixed_ns else ""
        # PCT is time taken off (50: half the time, twice the speed); 100: the ops take no time
        if self.pct >= 100:
            return f"GPU ops matching /{self.regex}/ take no time{past}"
        x = 1 / (1 - self.pct / 100)
        fast = f"{x:,.0f}x" if x >= 10 else f"{x:.2g}x"  # 200x, not 2e+02x
        return f"GPU ops matching /{self.regex}/ take {self.pct:g}% less time ({fast} as fast){past}"

    def to_json(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "text": self.describe()}
        for k in ("rank", "step", "regex"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.kind == "rank_like_median":
            d["part"] = self.part
        if self.kind == "faster":
            d["pct"] = self.pct
            if self.fixed_ns:
                d["fixed_us"] = self.fixed_ns / 1e3
        if self.kind == "comm_at_peak":
            d["peak_gbps"] = self.peak_gbps
        if self.kind == "shorten_host" and self.windows is not None:
            d["cut_ms"] = round(self.cut_ns / 1e6, 3)
        return d


def _us(ns: int) -> str:
    """Microseconds as a sentence writes them: "3", "2.5", "1,000,000" (never "1e+06")."""
    v = ns / 1e3
    return f"{v:,.0f}" if v == int(v) else f"{v:,.3f}".rstrip("0")


def parse_change(opt: str, value: str | None = None, peak: float | None = None) -> Change:
    """A change from the command line's words: remove-gap RANK:STEP (STEP may be 'all'),
    rank-like-median RANK[:host|gpu], no-launch-overhead, comm-at-peak, faster NAME_REGEX:PCT,
    usual-op RANK:STEP:NAME_REGEX, overlap-comm all|NAME_REGEX."""
    if opt == "remove-gap":
        r, _, s = (value or "").partition(":")
        try:
            return Change("remove_gap", rank=int(r), step=None if s in ("all", "*") else int(s))
        except ValueError:
            raise ValueError(f"--remove-gap {value}: give RANK:STEP, e.g. 1:3 (STEP 'all' for every step)") from None
    if opt == "rank-like-median":
        r, _, part = (value or "").partition(":")
        if part not in ("", "host", "gpu"):
            raise ValueError(f"--rank-like-median {value}: give RANK, RANK:host or RANK:gpu")
        try:
            return Change("rank_like_median", rank=int(r), part=part or "both")
        except ValueError:
            raise ValueError(f"--rank-like-median {value}: give RANK, RANK:host or RANK:gpu") from None
    if opt == "usual-op":
        r, _, rest = (value or "").partition(":")
        s, _, rx = rest.partition(":")
        if s in ("all", "*"):
            raise ValueError(f"--usual-op {value}: give one step (an op's usual time is its time in the other steps)")
        try:
            ch = Change("shorten_host", rank=int(r), step=int(s), regex=rx)
        except ValueError:
            ch = None
        if ch is None or not rx:
            raise ValueError(f"--usual-op {value}: give RANK:STEP:NAME_REGEX, e.g. '1:3:run_backward'")
        try:
            re.compile(rx)
        except re.error as e:
            raise ValueError(f"--usual-op {value}: /{rx}/ is not a regular expression ({e})") from None
        return ch
    if opt == "overlap-comm":
        rx = value or "all"
        try:
            re.compile(rx)
        except re.error as e:
            raise ValueError(f"--overlap-comm {value}: /{rx}/ is not a regular expression ({e})") from None
        return Change("overlap_comm", regex=None if rx == "all" else rx)
    if opt == "no-launch-overhead":
        return Change("no_launch_overhead")
    if opt == "no-copies":
        return Change("no_copies")
    if opt == "no-syncs":
        if value in (None, "", "all"):
            return Change("no_syncs")
        try:
            return Change("no_syncs", rank=int(value))
        except ValueError:
            raise ValueError(f"--no-syncs {value}: give a rank, or 'all'") from None
    if opt == "comm-at-peak":
        return Change("comm_at_peak", peak_gbps=peak or DEFAULT_PEAK_BUSBW_GBPS)
    if opt == "faster":
        rx, _, pct = (value or "").rpartition(":")
        try:
            p = float(pct)
        except ValueError:
            raise ValueError(f"--faster {value}: give NAME_REGEX:PCT, e.g. 'gemm|matmul:20'") from None
        if not rx:
            raise ValueError(f"--faster {value}: give a NAME_REGEX before the ':', e.g. 'gemm|matmul:20'")
        if not 0 <= p <= 100:
            raise ValueError(f"--faster {value}: give NAME_REGEX:PCT with PCT between 0 and 100")
        try:
            re.compile(rx)
        except re.error as e:
            raise ValueError(f"--faster {value}: /{rx}/ is not a regular expression ({e})") from None
        return Change("faster", regex=rx, pct=p)
    raise ValueError(f"unknown change {opt}")
