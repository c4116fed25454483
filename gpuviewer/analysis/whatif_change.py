"""A what-if's change (whatif.py replays it): what it alters and how it is said. Apart from the
replay so that the modules a change needs at replay time (usual_op.py) can build one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# NVLink 4 (H100 / H200 SXM): 18 links x 25 GB/s each way = 450 GB/s, the bus bandwidth an
# NVLink all-reduce can reach at best (NVIDIA's H200 datasheet: 900 GB/s bidirectional).
DEFAULT_PEAK_BUSBW_GBPS = 450.0


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
    # shorten_host: the op's spans (rows of start, end relative to the model's t0) and the time cut
    windows: np.ndarray | None = field(default=None, repr=False, compare=False)
    cut_ns: int = 0

    def describe(self) -> str:
        if self.kind == "faster" and self.label:
            # a label naming its own target ("... as long as in the other steps") says it all
            return self.label if self.label_whole else f"{self.label} {1 / max(1 - self.pct / 100, 1e-9):.1f}x faster"
        if self.kind == "shorten_host":
            return self.label or f"rank {self.rank}'s host op at its usual time"
        if self.kind == "remove_gap":
            return f"remove the longest host gap of rank {self.rank} in " + (
                f"step {self.step}" if self.step is not None else "every step"
            )
        if self.kind == "rank_like_median":
            part = {"both": "host and GPU", "host": "host", "gpu": "GPU"}[self.part]
            return f"rank {self.rank}'s {part} as fast as the median of the other ranks'"
        if self.kind == "no_launch_overhead":
            return "no launch overhead (as CUDA graphs would)"
        if self.kind == "comm_at_peak":
            return f"collectives at {self.peak_gbps:g} GB/s bus bandwidth"
        if self.kind == "overlap_comm":
            which = f"collectives matching /{self.regex}/" if self.regex else "collectives"
            return (
                f"{which} overlapped with the compute before them on other streams (their inputs "
                "taken as ready, run beside compute at their recorded speed; sends left waiting)"
            )
        if self.kind == "no_copies":
            return "memory copies take no time (data kept on the GPU, or copies hidden behind compute)"
        if self.kind == "no_syncs":
            who = "the host" if self.rank is None else f"rank {self.rank}'s host"
            return f"{who} does not wait in synchronize calls (stream, event, device syncs)"
        return f"GPU ops matching /{self.regex}/ {self.pct:g}% faster"

    def to_json(self) -> dict:
        d: dict[str, Any] = {"kind": self.kind, "text": self.describe()}
        for k in ("rank", "step", "regex"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.kind == "rank_like_median":
            d["part"] = self.part
        if self.kind == "faster":
            d["pct"] = self.pct
        if self.kind == "comm_at_peak":
            d["peak_gbps"] = self.peak_gbps
        if self.kind == "shorten_host" and self.windows is not None:
            d["cut_ms"] = round(self.cut_ns / 1e6, 3)
        return d
