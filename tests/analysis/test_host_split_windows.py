"""The host split computes a rank's windows together (windows that overlap none of each other as
one interval set): a window's parts must not depend on which other windows are asked with it, and
must add up to it. Real traces: step_outlier (a framework op and frames around a whole step),
nsys_single (the loop's OS waits), ddp_clean rank 1 (Python frames, run_backward's thread waits)."""

import pytest
from conftest import trace_path

from gpuviewer.analysis.breakdown import rank_breakdown
from gpuviewer.analysis.host_split import host_split
from gpuviewer.io.session import load

CASES = [
    (("kineto", "step_outlier.json.gz"), 0),
    (("nsys", "nsys_single.sqlite"), 0),
    (("kineto", "ddp_clean", "ddp_clean_rank1.json.gz"), None),
]


@pytest.mark.parametrize("parts,rank", CASES, ids=lambda x: "-".join(x) if isinstance(x, tuple) else str(x))
def test_a_window_split_alone_is_the_split_among_others(parts, rank):
    trace = load([trace_path(*parts)])
    rank = trace.ranks[0].rank if rank is None else rank
    steps = [s for s in rank_breakdown(trace, rank).steps if s.host_end_ns > s.host_start_ns]
    assert len(steps) >= 3
    wins = [(s.host_start_ns, s.host_end_ns) for s in steps]
    # overlapping windows too: two steps in one, a step's second half, the whole span, one of no length
    a, b = wins[0][0], wins[-1][1]
    mid = (wins[1][0] + wins[1][1]) // 2
    extra = [(wins[0][0], wins[1][1]), (mid, wins[1][1]), (a, b), (mid, mid)]
    # and every step in halves: ops over the middle reach into two windows of one set
    halves = [h for x, y in wins for h in ((x, (x + y) // 2), ((x + y) // 2, y))]
    asked = list(reversed(wins)) + extra + halves
    together = host_split(trace, rank, asked)
    for w, got in zip(asked, together):
        assert got == host_split(trace, rank, [w])[0], w
        fw, la, qu, sy, wa, idle, _th, _note, coll, _lw, _py, alloc = got
        assert alloc <= la
        assert fw + la + qu + sy + wa + idle + coll == max(0, w[1] - w[0])
