"""Clocks of different hosts aligned by the collectives.

A collective's kernels end within microseconds of each other on every member rank: the last
arrival's transfer ends it for all. So, per host, the difference between the reference host's
collective ends and its own is the clock offset, plus a little noise. Estimated robustly: the
median over the matched collectives, then the mean of those within a few spreads of it, and a
linear drift when the collectives span a long capture. Ranks of one host keep one offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .collectives import Collectives

DRIFT_MIN_SPAN_NS = 10_000_000_000  # fit a drift only over captures of 10 s or more
DRIFT_MIN_POINTS = 20


@dataclass
class Alignment:
    method: str  # "collectives", "same-host" or "none"
    reference: str | None = None
    offsets: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # host -> (ns, ns/ns, t0)
    residual_ns: float | None = None  # median spread of collective ends across hosts, after
    before_ns: float | None = None  # ... and before
    matched: int = 0
    unaligned: list[str] = field(default_factory=list)  # hosts with no collective in common

    def offset_at(self, host: str, t: np.ndarray | float):
        a, b, t0 = self.offsets.get(host, (0.0, 0.0, 0))
        if b == 0.0:
            return np.full(np.shape(t), a) if np.ndim(t) else a
        # subtract in integers first: epoch ns (~1.8e18) lose 256 ns in float64
        return a + b * (np.asarray(t, np.int64) - np.int64(t0)).astype(np.float64)

    def record(self) -> dict:
        """What a session's metadata says of a fit by collectives (the window, info and the
        reduce of --dask read the same keys): one writer for both places that align."""
        return {
            "method": "collectives",
            "reference_host": self.reference,
            "residual_ns": self.residual_ns,
            "spread_before_ns": self.before_ns,
            "collectives": self.matched,
            "hosts": {
                h: {"offset_ns": round(a, 1), "drift_ppm": round(b * 1e6, 4)} for h, (a, b, _t0) in self.offsets.items()
            },
            "unaligned_hosts": self.unaligned,
        }


def _host_ends(colls: Collectives, host_of: dict[int, str], base: int) -> list[dict[str, float]]:
    """Per matched collective: host -> median end of its member ranks on that host, in ns
    after `base` (small numbers: float64 keeps them exact)."""
    out = []
    for ins in colls.instances:
        by: dict[str, list[int]] = {}
        for r, e in zip(ins.ranks, ins.ends.tolist()):
            by.setdefault(host_of.get(r, f"rank{r}"), []).append(e - base)
        if len(by) > 1:
            out.append({h: float(np.median(v)) for h, v in by.items()})
    return out


def _rank_ends(colls: Collectives, host_of: dict[int, str], base: int) -> list[list[tuple[str, float]]]:
    """Per matched collective spanning hosts: (host, end after base) of every member rank."""
    out = []
    for ins in colls.instances:
        row = [(host_of.get(r, f"rank{r}"), float(e - base)) for r, e in zip(ins.ranks, ins.ends.tolist())]
        if len({h for h, _ in row}) > 1:
            out.append(row)
    return out


def estimate(colls: Collectives, host_of: dict[int, str], reference_rank: int | None = None) -> Alignment:
    hosts = sorted(set(host_of.values()))
    if len(hosts) < 2:
        return Alignment("same-host")
    base = int(min((int(i.ends.min()) for i in colls.instances), default=0))
    ends = _host_ends(colls, host_of, base)
    ref_rank = min(host_of) if reference_rank is None else reference_rank
    ref = host_of[ref_rank]
    al = Alignment("collectives", reference=ref, matched=len(ends))
    al.offsets[ref] = (0.0, 0.0, 0)
    # hosts reached through others: offsets chain host -> host until every host that shares a
    # collective with an aligned one is aligned
    pending = [h for h in hosts if h != ref]
    progress = True
    while pending and progress:
        progress = False
        for h in list(pending):
            d, t = [], []
            for e in ends:
                if h not in e:
                    continue
                known = [k for k in e if k in al.offsets]
                if not known:
                    continue
                k = known[0]
                corrected = e[k] + float(al.offset_at(k, e[k]))
                d.append(corrected - e[h])
                t.append(e[h])
            if not d:
                continue
            al.offsets[h] = _fit(np.array(d), np.array(t, np.float64))
            pending.remove(h)
            progress = True
    al.unaligned = pending
    rows = _rank_ends(colls, host_of, base)
    al.before_ns = _spread(rows, None)
    al.residual_ns = _spread(rows, al)
    # the fits ran on times after `base`: their reference times become absolute again
    al.offsets = {h: (a, b, t0 + base) for h, (a, b, t0) in al.offsets.items()}
    return al


def _fit(d: np.ndarray, t: np.ndarray) -> tuple[float, float, int]:
    med = float(np.median(d))
    mad = 1.4826 * float(np.median(np.abs(d - med)))
    keep = np.abs(d - med) <= max(3 * mad, 5_000.0)  # within 3 spreads, or 5 µs
    dk, tk = d[keep], t[keep]
    t0 = int(tk.min()) if len(tk) else 0
    if len(dk) >= DRIFT_MIN_POINTS and float(tk.max() - tk.min()) >= DRIFT_MIN_SPAN_NS:
        b, a = np.polyfit(tk - t0, dk, 1)
        return float(a), float(b), t0
    return float(dk.mean()) if len(dk) else med, 0.0, t0


def _spread(rows: list[list[tuple[str, float]]], al: Alignment | None) -> float | None:
    """Median over collectives of the spread (max - min) of their ranks' end times."""
    spreads = []
    for row in rows:
        v = [x + (float(al.offset_at(h, x)) if al is not None and h in al.offsets else 0.0) for h, x in row]
        spreads.append(max(v) - min(v))
    return float(np.median(spreads)) if spreads else None


def align_parts(parts: list, host_of: dict[int, str | None]) -> tuple[list, dict, dict[int, int], list[str]]:
    """The reduce's clock alignment: the same estimate open_session makes on a loaded trace
    (session.align_clocks), from the ranks' maps (rankmap.RankPart) instead of their events.
    host_of: rank -> host. Returns the parts moved onto the reference host's clock, the
    alignment as open_session records it (trace.metadata["alignment"]), per rank its clock
    offset, and warnings."""
    from .collectives import match_arrivals, world_of

    hosts = {p.rank: host_of.get(p.rank) or f"rank{p.rank}" for p in parts}
    none = {p.rank: 0 for p in parts}
    if len(set(hosts.values())) < 2:
        return parts, {"method": "same-host", "residual_ns": None}, none, []
    ranks = sorted(hosts)
    world = world_of(p.info.get("world_size") for p in parts)
    al = estimate(match_arrivals({p.rank: p.arrivals for p in parts}, ranks, world), hosts)
    if al.method != "collectives" or len(al.offsets) < 2:
        return (
            parts,
            {"method": "none", "residual_ns": None, "why": "no collective matched across hosts"},
            none,
            ["hosts could not be aligned: no collective matched across them"],
        )
    if al.before_ns is not None and al.residual_ns is not None and al.residual_ns >= al.before_ns:
        # the hosts already agree (one clock after all, or NTP did its job): keep the recording
        return (
            parts,
            {
                "method": "none",
                "residual_ns": al.before_ns,
                "why": "the recorded clocks already agree at the collectives",
            },
            none,
            [],
        )
    # as model.align moves an event: by the offset at its time, rounded to the ns
    moved = [p.shifted(lambda t, h=hosts[p.rank]: int(np.rint(al.offset_at(h, t)))) for p in parts]
    starts = [p.info["start_ns"] for p in moved if p.info.get("events")]
    t0 = min(starts) if starts else 0
    offsets = {p.rank: int(round(float(al.offset_at(hosts[p.rank], t0)))) for p in moved}
    alignment = al.record()
    warnings = (
        [f"hosts {', '.join(al.unaligned)} share no collective with the others: their clocks are left as recorded"]
        if al.unaligned
        else []
    )
    return moved, alignment, offsets, warnings
