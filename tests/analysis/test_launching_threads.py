"""The threads that feed a rank's steps are those whose CUDA calls launch GPU work. An nsys export
also links cudaEventQuery to its GPU-side 'Event Sync' record, so NCCL's watchdog thread, which
polls and launches nothing, was taken as a launching thread: its calls fed the host's split ("no op
recorded 51%" on nsys_ddp rank 0, 52% without it). The set is checked against the export's own
tables (sqlite3 here): threads with a runtime call sharing a correlation id with a kernel, copy or
memset."""

from __future__ import annotations

import sqlite3

from conftest import trace_path

NSYS_DDP = trace_path("nsys", "nsys_ddp.sqlite")


def _raw_launching_tids(path: str) -> tuple[set[int], set[int]]:
    """(thread ids with a call launching GPU work, thread ids with any CUDA call), from the export."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        work = set()
        for t in ("KERNEL", "MEMCPY", "MEMSET"):
            q = f"SELECT DISTINCT globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_{t}"
            work |= {(g >> 24 & 0xFFFFFF, c) for g, c in db.execute(q)}
        calls = db.execute("SELECT globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    finally:
        db.close()
    # globalTid packs the pid (bits 24-47) and the tid (the low 24 bits); correlation ids are
    # the process's own
    launching = {g & 0xFFFFFF for g, c in calls if (g >> 24 & 0xFFFFFF, c) in work}
    return launching, {g & 0xFFFFFF for g, _c in calls}


def test_nsys_watchdog_thread_is_not_a_launching_thread():
    import gpuviewer
    from gpuviewer.analysis.host import _launching_threads

    launching, with_calls = _raw_launching_tids(NSYS_DDP)
    assert with_calls - launching, "the export should hold a thread whose CUDA calls launch nothing"
    s = gpuviewer.open(NSYS_DDP)
    found: set[int] = set()
    for r in (ri.rank for ri in s.trace.ranks):
        found |= {tid & 0xFFFFFF for _pid, tid in _launching_threads(s.trace, r)}
    assert found == launching
