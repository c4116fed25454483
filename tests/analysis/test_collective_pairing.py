"""Where one rank holds more of a group's collectives than another in a step (a capture cut
through earlier work, a collective one rank ran outside its steps' range), the n-th is not the
n-th: the run of each rank's kernels whose ends keep the steadiest distance to the other's pairs
(members of a collective finish together). Metamorphic, on ddp_clean's real arrivals: remove a
rank's first all-reduce of a step and the others still pair with the same partners as before."""

from __future__ import annotations

from conftest import trace_path


def test_a_missing_first_collective_leaves_the_others_paired_with_their_partners():
    import gpuviewer
    from gpuviewer.analysis.breakdown import breakdown
    from gpuviewer.analysis.collectives import match_arrivals, rank_comm
    from gpuviewer.io.comm_args import collective_args

    s = gpuviewer.open(trace_path("kineto", "ddp_clean"))
    args = collective_args(s.trace)
    per = {rb.rank: rank_comm(s.trace, rb, args) for rb in breakdown(s.trace)}
    before = match_arrivals(per, [0, 1])
    partner = {int(ins.idx[0]): int(ins.idx[1]) for ins in before.instances}
    key = next(k for k, rows in per[1].items() if k[1] >= 0 and len(rows) >= 3)
    cut = {r: dict(v) for r, v in per.items()}
    cut[1][key] = per[1][key][1:]  # rank 1's capture lacks its first collective of that step
    after = match_arrivals(cut, [0, 1])
    got = {int(ins.idx[0]): int(ins.idx[1]) for ins in after.instances if (ins.group, ins.step) == key}
    want = {a: b for a, b in partner.items() if b in {row[2] for row in cut[1][key]}}
    assert got == want and len(got) == len(per[1][key]) - 1
    assert after.unmatched == before.unmatched + 1
