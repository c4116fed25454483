"""The what-if change overlap_comm (whatif.py applies it): collectives overlapped with the compute
before them on other streams, the most that overlapping them could save. Apart from whatif.py,
which holds the replay and the other changes."""

from __future__ import annotations

import re

import numpy as np

from . import depgraph as dg
from .whatif_change import Change

OFF_NEVER = -(1 << 50)  # an edge offset no replay reaches: the edge never binds


def overlap_comm(g: dg.DepGraph, ch: Change, off: np.ndarray, notes: list[str], args: dict[int, dict]) -> None:
    """Collectives (those whose kernel name or recorded collective name matches ch.regex, or all)
    stop waiting for the compute and copies on other streams of their rank (the event waits before
    them): they start when their launch, the collectives before them on their stream and the other
    members allow; what comes after them still waits for them. Left waiting: sends (their data is
    the compute just before them; a kernel that may be one, SendRecv with no recorded name, too),
    collectives behind a kernel or copy on their own stream (stream order: FSDP's copy-in of the
    all-gather's input, or NCCL on the compute stream), those without a launch on record
    (they could start before they were launched) and those no other rank's kernel matches (their
    time holds waiting for ranks not opened). An upper bound: the inputs are taken as ready and the
    collective runs beside compute at its recorded speed."""
    try:
        rx = re.compile(ch.regex or "", re.IGNORECASE)
    except re.error as e:
        raise ValueError(f"/{ch.regex}/ is not a regular expression: {e}") from None
    comm = np.flatnonzero(g.kind == dg.COMM)
    coll = {int(i): str((args.get(int(g.ev[i])) or {}).get("collective") or "") for i in comm}
    if ch.regex:
        comm = np.array([i for i in comm if rx.search(g.names[g.name[i]]) or rx.search(coll[int(i)])], np.int64)
    if not len(comm):
        notes.append("no collective on record" + (f" matches /{ch.regex}/" if ch.regex else "") + ": nothing changed")
        return
    pick = np.zeros(g.n, bool)
    pick[comm] = True
    src_node, dst_node = g.e_src // 2, g.e_dst // 2
    into = pick[dst_node] & (g.e_dst % 2 == 0)  # into a picked collective's start
    on_compute = np.isin(g.kind[src_node], (dg.KERNEL, dg.COPY))

    def having(mask) -> np.ndarray:
        has = np.zeros(g.n, bool)
        has[dst_node[mask]] = True
        return has

    launched = having(into & (g.e_kind == dg.E_LAUNCH))
    matched = having(pick[dst_node] & (g.e_kind == dg.E_COLL))
    same_stream = having(into & (g.e_kind == dg.E_STREAM) & on_compute)
    waited = same_stream | having(into & (g.e_kind == dg.E_XSTREAM) & on_compute)

    def is_send(i: int) -> bool:
        c = coll[i].lower()
        return c == "send" or (not c and "send" in g.names[g.name[i]].lower())

    send = np.zeros(g.n, bool)
    send[[i for i in comm.tolist() if is_send(i)]] = True
    free = pick & waited & launched & matched & ~same_stream & ~send
    waits = into & (g.e_kind == dg.E_XSTREAM) & on_compute & free[dst_node]
    off[waits] = OFF_NEVER
    left = [
        (int(np.count_nonzero(pick & waited & send)), "sends"),
        (int(np.count_nonzero(pick & waited & ~send & same_stream)), "behind a kernel or copy on their own stream"),
        (int(np.count_nonzero(pick & waited & ~send & ~same_stream & ~launched)), "without a launch on record"),
        (
            int(np.count_nonzero(pick & waited & ~send & ~same_stream & launched & ~matched)),
            "with no other rank's kernel matched",
        ),
    ]
    said = "; ".join(f"{n:,} {what}" for n, what in left if n)
    notes.append(
        f"{int(free.sum()):,} of the {len(comm):,} NCCL kernels (all ranks) that "
        + ("match" if ch.regex else "ran")
        + f" no longer wait for compute or copies on another stream; {int((pick & ~waited).sum()):,} waited for none"
        + (f"; left waiting: {said}" if said else "")
    )
