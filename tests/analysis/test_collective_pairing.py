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


def _arrivals():
    import gpuviewer
    from gpuviewer.analysis.breakdown import breakdown
    from gpuviewer.analysis.collectives import rank_comm
    from gpuviewer.io.comm_args import collective_args

    s = gpuviewer.open(trace_path("kineto", "ddp_clean"))
    args = collective_args(s.trace)
    return {rb.rank: rank_comm(s.trace, rb, args) for rb in breakdown(s.trace)}


def _true_partners(per) -> dict[int, int]:
    """Rank 0's kernel -> rank 1's, from the arrivals' own times: the members of an all-reduce
    end within 0.1 ms of each other (the spread on the shared H200 traces is at most 0.03 ms
    here), and the all-reduces of a step are milliseconds apart."""
    out = {}
    for key, rows in per[0].items():
        for a in rows:
            near = [b for b in per[1].get(key, []) if abs(b[1] - a[1]) <= 100_000]
            if len(near) == 1:
                out[a[2]] = near[0][2]
    return out


def test_lists_holding_different_collectives_pair_by_their_ends():
    """Each rank lacks another of a step's all-reduces (events sampled away, as in HTA's
    trace_filter): the lists are as long, and by position every pair after the first gap would
    join different all-reduces. The ranks' kernels pair with their true partners, the two left
    without one are unmatched; and with rank 1's GPU clock 8 ms behind, the same."""
    from gpuviewer.analysis.collectives import match_arrivals

    per = _arrivals()
    truth = _true_partners(per)
    before = match_arrivals(per, [0, 1])
    assert {int(i.idx[0]): int(i.idx[1]) for i in before.instances} == truth  # the premise
    key = next(k for k, rows in per[0].items() if k[1] >= 0 and len(rows) >= 6)
    cut = {r: dict(v) for r, v in per.items()}
    cut[0][key] = per[0][key][:1] + per[0][key][2:]  # rank 0 lacks the 2nd
    cut[1][key] = per[1][key][:4] + per[1][key][5:]  # rank 1 the 5th
    survivors = {row[2] for row in cut[0][key]}, {row[2] for row in cut[1][key]}
    want = {a: b for a, b in truth.items() if a in survivors[0] and b in survivors[1]}
    assert len(want) == len(per[0][key]) - 2
    for shift in (0, 8_000_000):
        moved = dict(cut)
        moved[1] = {
            k: [(e[0] + shift, e[1] + shift, *e[2:5], e[5] + shift, *e[6:]) for e in rows] for k, rows in cut[1].items()
        }
        after = match_arrivals(moved, [0, 1])
        got = {int(i.idx[0]): int(i.idx[1]) for i in after.instances if (i.group, i.step) == key}
        assert got == {a: b for a, b in want.items() if a in got or b in got.values()} == want, shift
        assert after.unmatched == before.unmatched + 2
        other = {int(i.idx[0]): int(i.idx[1]) for i in after.instances if (i.group, i.step) != key}
        assert other == {a: b for a, b in truth.items() if a in other}  # the other steps as before
        assert len(after.instances) == len(before.instances) - 2


def test_a_gpu_clock_offset_moves_no_pair():
    """Rank 1's GPU clock 8 ms behind (every kernel of it later by as much, longer than its
    all-reduces): its kernels end 8 ms from their partners', all alike: its usual offset, not a
    disagreement; every instance is kept."""
    from gpuviewer.analysis.collectives import match_arrivals

    per = _arrivals()
    before = match_arrivals(per, [0, 1])
    moved = dict(per)
    moved[1] = {k: [(e[0] + 8_000_000, e[1] + 8_000_000, *e[2:]) for e in rows] for k, rows in per[1].items()}
    after = match_arrivals(moved, [0, 1])
    assert [(int(i.idx[0]), int(i.idx[1])) for i in after.instances] == [
        (int(i.idx[0]), int(i.idx[1])) for i in before.instances
    ]
    assert after.unmatched == before.unmatched == 0


def test_sampled_ranks_pair_only_kernels_that_ran_together():
    """HTA's trace_filter: 2 of 128 ranks with events sampled away; paired by position, rank 0's
    kernels 'waited' up to 226 ms for kernels that began after they had ended. From the raw
    files: no matched instance has a kernel that ended before another member's began; the pair
    whose kernels end at the same nanosecond is one instance; the others are unmatched, and the
    rank lines say how much of the NCCL time they are."""
    import gzip
    import json

    import gpuviewer

    folder = trace_path("..", "compat", "facebookresearch__HolisticTraceAnalysis", "trace_filter")
    raw = {}
    for r in (0, 1):
        with gzip.open(f"{folder}/sampled_rank-{r}.json.gz", "rt") as fh:
            evs = json.load(fh)["traceEvents"]
        raw[r] = {
            int(e["ts"] * 1000): int((e["ts"] + e["dur"]) * 1000)
            for e in evs
            if e.get("cat") == "kernel" and e.get("name", "").startswith("ncclKernel")
        }
    s = gpuviewer.open(folder)
    rows = s.sql('SELECT rank, step, "group", "order", start FROM collectives WHERE step IS NOT NULL')
    inst: dict = {}
    for r, step, group, order, start in rows.itertuples(index=False):
        inst.setdefault((step, group, order), []).append((int(start), raw[int(r)][int(start)]))
    assert inst
    for members in inst.values():
        assert len(members) == 2
        assert min(e for _, e in members) >= max(b for b, _ in members)  # all ran at once
        assert abs(members[0][1] - members[1][1]) <= 1_000_000
    same_end = [(a, b) for a, ea in raw[0].items() for b, eb in raw[1].items() if ea == eb]
    assert same_end and all(sorted([a, b]) in [sorted(x for x, _ in m) for m in inst.values()] for a, b in same_end)
    paired = {(r, st) for r, st, *_ in rows[["rank", "start"]].itertuples(index=False)}
    lines = s.analysis.ranks
    for r in (0, 1):
        lone = sum(raw[r][st] - st for st in raw[r] if (r, st) not in paired)
        steps = [x for x in lines[r]["steps"] if not x["warmup"]] or lines[r]["steps"]
        gpu = sum(x["end_ns"] - x["start_ns"] + x["idle_before_ns"] + x["idle_after_ns"] for x in steps)
        assert abs(lines[r]["nccl_unmatched"] - lone / gpu) <= 0.005, r
