"""Whether a session's files look like one job's ranks. Files dropped into one folder by hand
can be captures of different jobs (HTA's trace_diff: an A100 rank of 8 and a V100 rank of 2,
recorded 8.5 days apart); analysed as one job they give late ranks, imbalance and an MFU that
mean nothing. Said in one warning; the files are still read."""

from __future__ import annotations

import os

from ..model.trace import Trace

APART_NS = 3600 * 10**9  # the ranks of one job start their captures within seconds of each other


def not_one_job(trace: Trace) -> str | None:
    """A warning when the ranks record different world sizes or devices, or their first steps
    began an hour or more apart; None when they could be one job (or the session has one rank)."""
    ranks = trace.ranks
    if len(ranks) < 2:
        return None

    def who(r) -> str:
        return os.path.basename(r.files[0]) if r.files else f"rank {r.rank}"

    why = []
    sizes = {r.rank: r.world_size for r in ranks if r.world_size}
    if len(set(sizes.values())) > 1:
        why.append("world sizes " + ", ".join(f"{sizes[r.rank]} ({who(r)})" for r in ranks if r.rank in sizes))
    names = {}
    for r in ranks:
        got = {str(p.get("name")) for p in r.device_props.values() if p.get("name")}
        if len(got) == 1:
            names[r.rank] = got.pop()
    if len(set(names.values())) > 1:
        why.append("devices " + ", ".join(f"{names[r.rank]} ({who(r)})" for r in ranks if r.rank in names))
    # when each rank's first step began (the steps are small; reading the events' times here would
    # check a big cache entry's whole time column at every open, which is left to its first read)
    first = {}
    for r in ranks:
        steps = trace.steps_of_rank(r.rank)
        if steps:
            first[r.rank] = min(int(s.start) for s in steps)
    if len(first) > 1 and max(first.values()) - min(first.values()) >= APART_NS:
        span = (max(first.values()) - min(first.values())) / 3.6e12
        when = f"{span / 24:.1f} days" if span >= 48 else f"{span:.1f} hours"
        why.append(f"first steps {when} apart")
    if not why:
        return None
    return (
        "these files may not be one job's ranks (" + "; ".join(why) + "): they are analysed as one job, so late "
        "ranks, imbalance and efficiency across them mean nothing; open them one at a time, or compare two "
        "with `gpuviewer diff`"
    )
