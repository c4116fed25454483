"""Late ranks: who made the others wait at the collectives, in which steps, and why.

Per step, the wait a rank caused is the sum of the others' waits at the collectives where it
arrived last. A rank late in a good share of the steps without stalls is a persistent straggler;
a step where the late rank caused clearly more waiting than usual (the job's usual lateness and
that rank's) is an episodic stall, a cause of its own beside any persistent lateness. Why it was late: at the
collectives where it arrived last, did its kernel start right after the host launched it (the
host was late: which host ops took longer than on the other ranks, or than on its own other
steps; input when those are the data loader's) or long after (its GPU was busy: which kernels
took longer than on the other ranks)? Ranks that arrive together last (late_group) are one late
group: the others waited for all of them, and the last of them is compared with the ranks that
waited.

This is the reduce's: it reads the ranks' maps (analysis/rankmap.py: step windows, arrivals with
their launch times, per step the time per op name), never the events.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..model.categories import GPU_LANE_KINDS, LaneKind
from ..model.fmt import number_list
from ..model.trace import Trace
from .breakdown import RankBreakdown
from .collectives import Collectives
from .host import IDLE_WAIT, _per_name, _step_markers, sync_intervals
from .lateness_text import EXPLAINS, HOST_WORK, LAG_STEPS, beside, blocked_clause, explain_split, halves_clause
from .merge import rank_list

MAX_COMPARED = 16  # other ranks a late rank is compared with
PERSISTENT_SHARE = 1 / 3  # late in at least this share of the steps (and two of them)
# Ranks that reach a collective within 2% of the wait they cause of the last one, or within
# 0.5 ms, arrive together: the others wait for all of them, so blaming the one that happened to
# start a few microseconds later would be arbitrary.
TIE_SHARE = 0.02
TIE_NS = 500_000
_INPUT = re.compile(r"DataLoader|dataloader|_next_data|__next__|enumerate\(", re.IGNORECASE)
# Python object addresses differ between processes: strip them so ranks' ops compare by name.
ADDRESS = re.compile(r" (?:object )?at 0x[0-9a-fA-F]+")


def _ms(ns: float | np.floating) -> float:
    return round(float(ns) / 1e6, 3)


def late_ranks(
    parts: dict, rbs: list[RankBreakdown], colls: Collectives, hosts: dict[int, str | None], alignment: dict | None
) -> list[dict]:
    """Straggler findings' parts (dicts with title, metrics, ranks, steps, impact): persistent
    ones first, then episodic stalls. parts: rank -> its map (rankmap.RankPart); hosts: rank ->
    host; alignment: how the hosts' clocks were put on one axis."""
    if len(rbs) < 2 or not colls.instances:
        return []
    warm = {s.step for rb in rbs for s in rb.steps if s.warmup}
    per_step = {s: d for s, d in colls.per_step().items() if s not in warm}
    if len(per_step) < 2:
        return []
    steps = sorted(per_step)
    windows = [s.window_ns for rb in rbs for s in rb.measured]
    med_window = float(np.median(windows)) if windows else 0.0
    floor = max(1e6, 0.02 * med_window)  # below this a step has no meaningful late rank
    late = {}  # step -> (its late group: ranks arriving together last, the wait it caused)
    each_of: dict[int, float] = {}  # step -> that wait per rank that waited
    caused_all = []
    for s in steps:
        caused = per_step[s]["caused"]
        r = max(caused, key=caused.get)
        g = late_group(colls, s, r)
        c, each = _caused_by(colls, s, g)
        caused_all.append(c)
        if c >= floor and set(g) != set(colls.ranks):
            late[s] = (g, c)
            each_of[s] = each
    caused_arr = np.array(caused_all, np.float64)
    usual_job = float(np.median(caused_arr))
    spread = 1.4826 * float(np.median(np.abs(caused_arr - usual_job)))

    # episodic stalls: far above the job's usual lateness and above the rank's own usual
    episodic = []
    for s, (r, c) in late.items():
        own = [late[t][1] for t in late if t != s and late[t][0] == r]
        usual_r = float(np.median(own)) if own else 0.0
        # the spread of a handful of steps says little: used from five steps on
        thr = max(2e6, 0.25 * usual_job, 3 * spread if len(steps) >= 5 else 0.0, 0.1 * med_window)
        if c - usual_job >= thr and c - usual_r >= thr:
            episodic.append((s, r, c, usual_r))
    # a late group's stalls in half the steps or more are no exception where it is late in most
    # steps: its lateness varies, which its persistent finding's range says (ddp_nop2p, nothing
    # planted: steps 2 and 3 of 4 were two "stalls" 5.0 and 8.5 ms above the median against a
    # usual read from the other two; an audit). A group late in few steps keeps its stalls (ddp
    # cut to 2 steps: its planted sleep in one of them; a review)
    for g in {e[1] for e in episodic}:
        mine = [e for e in episodic if e[1] == g]
        late_in = sum(1 for x in late.values() if x[0] == g)
        # (late in most steps: as the persistent finding below asks, in two of them at least)
        if 2 * len(mine) >= len(steps) and late_in >= max(2, PERSISTENT_SHARE * len(steps)):
            episodic = [e for e in episodic if e[1] != g]
    stall_steps = {e[0] for e in episodic}

    # The step after a stall carries its after-effect (the late rank still catching up while the
    # others went on): what a rank usually causes is read from the steps free of every stall and
    # of the step after each, not from that after-effect (ddp: rank 1's "usual" was step 4's wait,
    # the stall's own carry-over, in a run where rank 1 was not late otherwise). Detection below
    # keeps its threshold; this is what the sentences say, the persistent finding's median too
    # (nsys_ddp: "a median 14.2 ms a step" beside "its usual 14.0 ms" of the same waits).
    after = {a: b for a, b in zip(steps, steps[1:]) if a in stall_steps}
    touched = stall_steps | set(after.values())
    out = []
    n = len(steps)
    by_rank: dict[tuple, list[int]] = {}
    typical_of: dict[tuple, list[int]] = {}  # a persistently late group's steps its usual wait is read from
    for s, (g, _) in late.items():
        by_rank.setdefault(g, []).append(s)
    for g, ss in sorted(by_rank.items(), key=lambda kv: -len(kv[1])):
        usual = sorted(x for x in ss if x not in stall_steps)  # its lateness without the stalls
        # persistence is judged on the steps without stalls: a stall and the lateness it leaves
        # in the next step (the rank still catching up) are not a rank that keeps falling behind
        if len(usual) < 2 or len(usual) < PERSISTENT_SHARE * (n - len(stall_steps)):
            continue
        free = [x for x in usual if x not in touched]
        typical_of[g] = free if len(free) >= 2 else usual
        out.append(_persistent(parts, rbs, colls, g, typical_of[g], (len(ss), n), per_step, sorted(ss), late, each_of))
    # A step where another rank was the late one counts as none caused: ddp_long's rank 1 is late
    # only from its stall on (the ranks' phase shifted), and "its usual 27 ms" would hide that.
    clean = [t for t in steps if t not in touched]
    for s, g, c, _ in sorted(episodic):
        caused = [late[t][1] if t in late and late[t][0] == g else 0.0 for t in clean]
        typical = float(np.median(caused)) if caused else None
        if typical and g in typical_of:
            # late in most of the clean steps and persistently: its usual wait is the persistent
            # finding's median, one figure (nsys_ddp_big: "its usual 18.6" counted the 3 of 23
            # clean steps it was not late as 0, beside "a median 19.0 ms a step"). A rank late in
            # no more than half of them keeps its 0 and the sentence that says so (ddp_long)
            typical = float(np.median([late[t][1] for t in typical_of[g]]))
        nxt = after.get(s)
        carry = None
        if nxt in late and late[nxt][0] == g and nxt not in stall_steps:
            # the next step's wait is an after-effect only where it exceeds what the rank causes in
            # the clean steps it is late in (ddp_long: 25.7 ms in step 7 against 25.6 and 28.7 in
            # steps 8 and 9, said 'right after it'; an audit's finding): those steps, else none
            like = [t for t in clean if t in late and late[t][0] == g]
            as_in = sorted(like) if like and late[nxt][1] <= 1.2 * max(late[t][1] for t in like) else []
            carry = (nxt, late[nxt][1], as_in)
        not_late = [t for t, x in zip(clean, caused) if x == 0.0]
        out.append(_episodic(parts, rbs, colls, g, s, c, typical, carry, (not_late, clean), per_step, each_of[s]))
    if len({h for h in hosts.values() if h}) > 1 and (alignment or {}).get("method") != "collectives":
        for x in out:  # arrival order across hosts includes their clock offset: say so
            x["title"] += " (host clocks not aligned: part of this may be clock offset)"
            x["clocks_aligned"] = False
    for x in out:  # where it sits on the timeline: its steps on every rank, host and GPU
        spans = [
            (min(sb.start_ns, sb.host_start_ns), max(sb.end_ns, sb.host_end_ns))
            for rb in rbs
            for sb in rb.steps
            if sb.step in set(x["steps"])
        ]
        x["window"] = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
    return out


def _lead(colls: Collectives, g: tuple, steps) -> int:
    """Of a late group, the rank that came last most often in these steps (its host and GPU are
    the ones compared with the others'); lowest rank on a tie."""
    ss = set(steps)
    n = {r: 0 for r in g}
    for ins in colls.instances:
        if ins.step in ss and ins.late_rank in n:
            n[ins.late_rank] += 1
    return max(g, key=lambda r: (n[r], -r))


def _who(g: tuple) -> str:
    return f"Rank {g[0]}" if len(g) == 1 else f"Ranks {rank_list(list(g))}"


def _persistent(parts, rbs, colls, g, typical, counts, per_step, all_steps, late, each_of) -> dict:
    """g: the late rank, or the ranks arriving together last; typical: its late steps without
    stalls and the step after each (its usual lateness: the median and the lag's parts said are
    theirs); all_steps: every late step; counts: (its late steps, all steps)."""
    n_late, n_steps = counts
    r = _lead(colls, g, all_steps)
    per = float(np.median([late[s][1] for s in typical]))
    each = float(np.median([each_of[s] for s in typical]))  # per rank that waited
    total = float(sum(late[s][1] for s in all_steps))
    cause, excess, split = _why(parts, rbs, colls, r, typical, g)
    waiting = _waiting(colls, g, all_steps)
    kind = "persistent"
    lead = f"rank {r}, the last of them: " if len(g) > 1 else ""
    what = "; " + lead + explain_split(cause, split, excess)
    # the same said where several late ranks' steps are listed before it (merge.merge_persistent):
    # the rank and the steps named, not 'its' and 'the steps'
    named = "; " + lead + explain_split(cause, split, excess, f"rank {r}'s", typical)
    arrive = "arrives last" if len(g) == 1 else "arrive together last"
    # where stalls and their next steps are left out, the median (and the lag's parts after it)
    # says which steps it is of (ddp_nop2p: 7.4 ms over steps 4 and 5 read as all four steps')
    of = (
        f" in step{'s' if len(typical) > 1 else ''} {number_list(typical)} (the others hold a stall or follow one)"
        if set(typical) != set(all_steps)
        else ""
    )
    # the total of those steps too: nsys_ddp's 168 ms 'in all' held the stall's steps' 78 ms
    usual_total = _ms(sum(late[s][1] for s in typical))
    in_those = f"{usual_total:.0f} ms in those steps, " if of else ""
    if of:  # the lag's figures are of the same steps (_why was given them)
        what = what.replace("its host starts the steps", "its host starts those steps", 1).replace(
            "from its first late step to its last", "from the first of those steps to the last", 1
        )
    blocked = blocked_clause(rbs, waiting, typical, each)
    title = (
        f"{_who(g)} {arrive} at the collectives in {n_late} of {n_steps} steps{halves_clause(colls, g, all_steps)}: "
        f"{_others(waiting)} "
        f"a median {_ms(each):.1f} ms a step{of} ({in_those}{_ms(total):.0f} ms in all; the waits at the collectives "
        f"{'it' if len(g) == 1 else 'they'} came last at, summed){blocked[0]}{what}"
    )
    return {
        "kind": kind,
        "late_rank": r,
        "late_group": list(g),
        "steps": all_steps,
        "title": title,
        "waiting": waiting,
        "impact_ns": total,
        "cause": cause,
        "excess": excess,
        "wait_caused_ms": _ms(total),
        "wait_caused_ms_per_step": {str(s): _ms(late[s][1]) for s in all_steps},
        "usual_ms_per_step": _ms(per),
        "usual_from_steps": typical,
        "wait_caused_ms_usual": usual_total,  # over usual_from_steps
        "wait_caused_ms_each_per_step": _ms(each),
        **({} if blocked[1] is None else {"waiting_host_sync_ms": blocked[1]}),
        "lateness_parts_ms": beside(split)[0],
        **beside(split)[1],
        "explained_named": named,
    }


def _episodic(parts, rbs, colls, g, s, c, usual_r, carry, quiet, per_step, each) -> dict:
    """usual_r: the median wait g caused in the steps free of stalls and their after-effects (none
    where another rank was late; None: no such step); carry: (the next step, the wait g caused in
    it, the clean steps g is late in that wait as long, empty where it waits longer) where g was late
    there too; quiet: (the clean steps where g was not late, the clean steps)."""
    r = _lead(colls, g, [s])
    cause, excess, split = _why(parts, rbs, colls, r, [s], g)
    # what this rank's host did in this step beyond its own other steps (host.explain_steps)
    host = [
        h for h in parts[r].table("host_explain").get(s, []) if h["excess_ms"] >= 0.5 and not IDLE_WAIT.match(h["name"])
    ][:3]
    over = c - (usual_r or 0.0)
    whose = "" if len(g) == 1 else f"rank {r}'s "
    waiting = _waiting(colls, g, [s])
    k = len(waiting)
    share = each / c if c else 0.0  # total -> per rank that waited
    # an op is named as the reason only where its extra time is a real part of the extra wait it
    # is blamed for (nsys_ddp_big step 1: 'aten::empty took 1 ms more than usual' beside 16 ms)
    what = ""
    named = None  # the op the title names: what the finding's what-if gives back its usual time
    if host and host[0]["excess_ms"] >= EXPLAINS * _ms(over * share):
        named = {"name": host[0]["name"], "excess_ms": host[0]["excess_ms"], "lane": host[0]["lane"]}
        what = f": {whose}{ADDRESS.sub('', host[0]['name'])} took {host[0]['excess_ms']:.0f} ms more than usual"
    elif host:
        what = (
            f": no host op {f'of rank {r} ' if whose else ''}explains it (the most extra: "
            f"{ADDRESS.sub('', host[0]['name'])}, {host[0]['excess_ms']:.1f} ms more than usual)"
        )
    who = f"rank {r}" if len(g) == 1 else f"ranks {rank_list(list(g))}, arriving together,"
    its = "its" if len(g) == 1 else "their"
    usual = f", {_ms(over * share):.1f} ms more than {its} usual {_ms(usual_r * share):.1f} ms" if usual_r else ""
    notes = []
    if carry is not None and carry[2]:  # no more than it causes where it is late otherwise
        notes.append(
            f"and {_ms(carry[1] * share):.1f} ms in step {carry[0]}, as in step{'s' if len(carry[2]) > 1 else ''} "
            f"{number_list(carry[2])}, where it is late without a stall"
        )
    elif carry is not None:
        notes.append(f"and {_ms(carry[1] * share):.1f} ms in step {carry[0]}, right after it")
    not_late, clean = quiet
    if not usual_r and not_late:  # late in no more than half the clean steps: said, not "its usual 0.0 ms"
        notes.append(
            f"not the late rank in step {not_late[0]}"
            if len(clean) == 1
            else f"not the late rank in {len(not_late)} of the {len(clean)} other steps"
        )
    then = f" ({'; '.join(notes)})" if notes else ""
    # the waits of each collective it came last at, added up: they overlap the waiting rank's
    # compute where it ran beside them (ddp: 46.4 ms summed over 14 all-reduces, about 27 ms of
    # step time; an audit's finding)
    n = sum(1 for ins in colls.instances if ins.step == s and ins.late_rank in g)
    # ...and the longest single wait: the later collectives queue behind the first on the NCCL
    # stream, each then waiting a little (ddp step 3: 31.7 ms of the 46.4; helper-102)
    longest = _ms(_longest_wait(colls, s, g))
    single = f"; the longest single wait {longest:.1f} ms" if longest <= 0.9 * _ms(c * share) else ""
    summed = (
        f" (summed over the {n} collectives {'it' if len(g) == 1 else 'they'} came last at{single})" if n > 1 else ""
    )
    title = (
        f"Step {s}: {who} held {'the other rank' if k == 1 else f'each of the other {k} ranks'} back "
        f"{_ms(c * share):.1f} ms{summed}{usual}{then}{what}"
    )
    return {
        "kind": "episodic",
        "late_rank": r,
        "late_group": list(g),
        "steps": [s],
        "title": title,
        "waiting": waiting,
        "impact_ns": float(over),
        "cause": cause,
        "excess": excess,
        "evidence": host,
        **({} if named is None else {"named_op": named}),
        "wait_caused_ms": _ms(c),
        "longest_wait_ms": longest,
        "wait_caused_ms_per_step": {str(s): _ms(c)},
        "excess_over_usual_ms": _ms(over),
        **({} if usual_r is None else {"usual_ms": _ms(usual_r)}),
        "usual_from_steps": clean,
        **({} if carry is None else {"next_step": carry[0], "next_step_wait_ms": _ms(carry[1])}),
        "lateness_parts_ms": beside(split)[0],
        "wait_caused_ms_each": _ms(c * share),
        "excess_over_usual_ms_each": _ms(over * share),
        "others_wait_ms": {str(k): _ms(v) for k, v in per_step[s]["wait"].items() if k not in g},
    }


def late_group(colls: Collectives, s: int, r: int) -> tuple[int, ...]:
    """The ranks that arrive together with r, the last, at the collectives of step s: at each
    collective where r is among the last, those within TIE_SHARE of the longest wait (or
    TIE_NS) of the last arrival; a rank is in the group when it is there for most of that wait."""
    score: dict[int, float] = {}
    total = 0.0
    for ins in colls.instances:
        if ins.step != s:
            continue
        lag = ins.last - ins.starts
        tol = max(TIE_SHARE * float(lag.max()), TIE_NS)
        tied = [k for k, x in zip(ins.ranks, lag.tolist()) if x <= tol]
        if r not in tied or len(tied) == len(ins.ranks):
            continue  # r was not among the last, or nobody waited for anyone
        w = float(ins.waits().sum())
        total += w
        for k in tied:
            score[k] = score.get(k, 0.0) + w
    return tuple(sorted({r} | {k for k, v in score.items() if total and v >= 0.5 * total}))


def _waits_caused(colls: Collectives, s: int, g: tuple):
    """At each collective of step s where one of the ranks g came last: the other ranks' waits."""
    gs = set(g)
    for ins in colls.instances:
        if ins.step == s and ins.late_rank in gs:
            out = [k for k, r in enumerate(ins.ranks) if r not in gs]
            if out:
                yield ins.waits()[out]


def _caused_by(colls: Collectives, s: int, g: tuple) -> tuple[float, float]:
    """The wait the ranks g caused in step s: at the collectives where one of them came last,
    the others' waits summed, and that sum per rank that waited."""
    tot = each = 0.0
    for w in _waits_caused(colls, s, g):
        x = float(w.sum())
        tot += x
        each += x / len(w)
    return tot, each


def _longest_wait(colls: Collectives, s: int, g: tuple) -> float:
    """The longest wait of one rank outside g at one collective of step s where one of g came last."""
    return max((float(w.max()) for w in _waits_caused(colls, s, g)), default=0.0)


def _waiting(colls: Collectives, g: tuple, steps) -> list[int]:
    """The ranks that waited for g: members of the collectives where one of g came last."""
    ss, gs = set(steps), set(g)
    out = {m for ins in colls.instances if ins.step in ss and ins.late_rank in gs for m in ins.ranks}
    return sorted(out - gs)


def _others(waiting: list[int]) -> str:
    return "the other rank waits" if len(waiting) == 1 else f"the other {len(waiting)} ranks wait"


def _why(maps: dict, rbs, colls: Collectives, r: int, steps: list[int], g: tuple = ()) -> tuple[str, list[dict], dict]:
    """Why rank r arrived last: 'host', 'gpu' or 'input'; the ops with the largest excess over
    the other ranks; and its lateness split into parts that add up to it, measured at the
    collective of each step that waited longest for it: its host started the step later
    (step_start), its host took longer from the step start to the launch (host_to_launch), or
    its kernel waited longer in the GPU queue after the launch (gpu_queue). g: the ranks late
    with r (compared with the ranks that waited, not with each other)."""
    step_set = set(steps)
    late = [ins for ins in colls.instances if ins.step in step_set and ins.late_rank == r]
    others = [rb.rank for rb in rbs if rb.rank != r and rb.rank not in g]
    if len(others) > MAX_COMPARED:  # a median over a spread sample of the others is as good
        others = [others[int(i)] for i in np.linspace(0, len(others) - 1, MAX_COMPARED)]
    parts: dict[str, list[float]] = {"step_start": [], "host_to_launch": [], "gpu_queue": []}
    at: list[int] = []  # the step of each value in parts
    host_start = {(p.rank, st): h0 for p in maps.values() for st, h0, _h1 in p.host_steps}
    for s in steps:
        ins = max((i for i in late if i.step == s), key=lambda i: float(i.waits().sum()), default=None)
        if ins is None:
            continue
        lt, lk = ins.launch, ins.linked
        assert lt is not None and lk is not None  # collectives.match gives every instance its launches
        rows = {}
        for k, rank in enumerate(ins.ranks):
            h0 = host_start.get((rank, s))
            if h0 is None or not lk[k]:
                continue
            rows[rank] = (h0, int(lt[k]) - h0, int(ins.starts[k]) - int(lt[k]))
        if r not in rows or not any(o in rows for o in others):
            continue
        base = [rows[o] for o in others if o in rows]
        for key, j in (("step_start", 0), ("host_to_launch", 1), ("gpu_queue", 2)):
            parts[key].append(rows[r][j] - float(np.median([b[j] for b in base])))
        at.append(s)
    split: dict[str, Any] = {k: _ms(np.mean(v)) if v else 0.0 for k, v in parts.items()}
    # its host's work a step (ops and launch calls; not syncs, waits such as sleeps, a full launch
    # queue or idle) beyond the others' median, over the same steps
    work = {(rb.rank, x.step): x.host_framework_ns + x.host_launch_ns for rb in rbs for x in rb.steps}
    both = [s for s in at if (r, s) in work and any((o, s) in work for o in others)]
    # medians of each side, as the what-if's basis says them (savings._host_basis)
    mine = [work[(r, s)] for s in both]
    theirs = [float(np.median([work[(o, s)] for o in others if (o, s) in work])) for s in both]
    split[HOST_WORK] = _ms(float(np.median(mine)) - float(np.median(theirs))) if both else 0.0
    split[LAG_STEPS] = [at[0], at[-1]] if at else []  # the steps the lag's growth is measured between
    # a later step start is a lag carried from step to step (a phase offset), not a cost of each
    # step: what feeds it is how much it grows a step
    # (over the steps between the first and the last, not the count of those measured: nsys_ddp's
    # 14.9 -> 7.1 ms from step 1 to 9, steps 6 and 7 left out, is 0.97 ms a step, not 1.3)
    ss = parts["step_start"]
    split["step_start_growth"] = _ms((ss[-1] - ss[0]) / (at[-1] - at[0])) if len(ss) > 1 and at[-1] > at[0] else 0.0
    # said as the median: one step's carried-over stall is not the usual lag (nsys_ddp: 55.5 ms in
    # the step after the planted sleep, 3-15 ms in the others, a mean of 13.7)
    split["step_start_median"] = _ms(np.median(ss)) if ss else 0.0
    # a lag whose swing (1 ms or more) is over twice its net change varied (ddp_nop2p: 9.3, 15.4,
    # 21.4, 5.6 ms): no rate, its range is said ("it shrank 1.2 ms a step" from its first step to its
    # last misdescribed it; an audit). nsys_ddp's 14.9 -> 7.1 ms, with bumps, keeps its rate
    if len(ss) > 2 and max(ss) - min(ss) >= 1e6 and max(ss) - min(ss) > 2 * abs(ss[-1] - ss[0]):
        split["step_start_min"], split["step_start_max"] = _ms(min(ss)), _ms(max(ss))
    host_part = split["step_start"] + split["host_to_launch"]
    if split["gpu_queue"] > host_part:
        return "gpu", _excess(maps, r, others, steps, "gpu_names"), split
    # Host: what ran longer (wall time) on this rank's host than on the others' in the same
    # step. Wall time, not self time: a main thread waiting inside run_backward for the autograd
    # thread is the backward taking longer.
    ex = _excess(maps, r, others, steps, "host_names")
    cause = "input" if ex and _INPUT.search(ex[0]["name"]) else "host"
    return cause, ex, split


GPU_KINDS = GPU_LANE_KINDS
HOST_KINDS = (LaneKind.CPU, LaneKind.NVTX, LaneKind.OSRT, LaneKind.CUDA_API)


def step_name_times(trace: Trace, rb: RankBreakdown) -> tuple[dict, dict]:
    """The map's side of _excess: per step of the rank, time per op name in the step's GPU window
    (self time on its GPU lanes) and in its host window (wall time on its host lanes, less its
    blocking syncs)."""
    gpu_w = {x.step: (x.start_ns, x.end_ns) for x in rb.steps if x.step is not None}
    host_w = {x.step: (x.start, x.end) for x in trace.steps_of_rank(rb.rank)}
    sync = sync_intervals(trace, rb.rank)  # once for all its steps: not work (_wall_per_name)
    return (
        {s: _name_times(trace, rb.rank, w, GPU_KINDS) for s, w in gpu_w.items()},
        {s: _name_times(trace, rb.rank, w, HOST_KINDS, sync) for s, w in host_w.items()},
    )


def _blocked_before(sync, t0: int, t1: int):
    """x -> how much of [t0, x] the host spends blocked in a synchronize call (sync: the rank's
    union of them), for windows' offsets x from t0."""
    from . import intervals as iv

    s, e = iv.clip(sync, t0, t1)
    s, e = np.asarray(s, np.int64) - t0, np.asarray(e, np.int64) - t0
    if not len(s):
        return np.zeros_like
    before = np.r_[np.int64(0), np.cumsum(e - s)]  # length of the intervals before each one

    def at(x: np.ndarray) -> np.ndarray:
        j = np.searchsorted(s, x, side="right") - 1  # the last interval starting at or before x
        jj = np.maximum(j, 0)
        return np.where(j >= 0, before[jj] + np.minimum(x, e[jj]) - s[jj], 0)

    return at


def _name_times(trace: Trace, rank: int, w: tuple[int, int], kinds, sync=None) -> dict[str, int]:
    """Per op name, time in the window: self time, or with `sync` (the rank's blocking syncs) wall
    time less those syncs. Wrappers that span most of the step (the training-loop function) say
    nothing and are left out."""
    inclusive = sync is not None
    lanes = [i for i, ln in enumerate(trace.lanes) if ln.rank == rank and ln.kind in kinds]
    acc: dict[str, int] = {}
    items = _wall_per_name(trace, lanes, *w, sync) if inclusive else _per_name(trace, lanes, *w)
    clean = trace.derived.setdefault("op_names_compared", {})  # name id -> its text compared, or None
    for (name, _cat, _lane), v in items.items():
        if inclusive and v >= 0.8 * (w[1] - w[0]):
            continue
        nm = clean.get(name, False)
        if nm is False:
            nm = clean[name] = _compared_name(trace.names[name])
        if nm is not None:
            acc[nm] = acc.get(nm, 0) + v
    return acc


def _compared_name(name: str) -> str | None:
    nm = ADDRESS.sub("", name)
    if "nccl" in nm.lower() or IDLE_WAIT.match(nm):
        return None  # waiting in a collective, or a helper thread idling: not a cause
    return nm


def _excess(parts: dict, r: int, others: list[int], steps: list[int], table: str, top: int = 5) -> list[dict]:
    """Per op name, time in rank r's window of a step minus the median of the other ranks' in
    theirs (step_name_times: `table` is gpu_names or host_names), averaged over the steps;
    largest first."""

    def per_rank(rank: int, s: int) -> dict[str, int]:
        return parts[rank].table(table).get(s, {})

    tot: dict[str, float] = {}
    for s in steps:
        mine = per_rank(r, s)
        theirs = [per_rank(o, s) for o in others]
        for nm, v in mine.items():
            base = float(np.median([t.get(nm, 0) for t in theirs])) if theirs else 0.0
            if v > base:
                tot[nm] = tot.get(nm, 0.0) + (v - base)
    rows = sorted(tot.items(), key=lambda kv: (-kv[1], kv[0]))[:top]  # ties: by name, never by load order
    return [{"name": nm, "ms": _ms(v / len(steps))} for nm, v in rows if v / len(steps) >= 1e4]


def _wall_per_name(trace: Trace, lanes: list[int], t0: int, t1: int, sync) -> dict[tuple[int, int, int], int]:
    """Per (name, cat, lane): wall time of its events inside [t0, t1] (nested calls of one name
    on one lane counted once: the union of their intervals, computed for all names at once),
    less the time the rank's host was blocked in a synchronize call within it: a waiting rank's
    backward holds its syncs on the late rank, which are not work (fsdp's rank 1 was said
    "+11.1 ms" in backward against rank 0's 49 ms of work and 14-17 ms of syncs; +26 without)."""
    from ..model import queries as q

    blocked = _blocked_before(sync, t0, t1)

    c = trace.columns
    out: dict[tuple[int, int, int], int] = {}
    markers = _step_markers(trace)
    span = max(1, t1 - t0) + 1
    for ln in lanes:
        idx = q.events_in_range(trace, ln, t0, t1)
        if not len(idx):
            continue
        names = np.asarray(c["name"][idx]).astype(np.int64)
        st = np.asarray(c["start"][idx]).astype(np.int64)
        s = np.clip(st, t0, t1) - t0
        e = np.clip(st + np.asarray(c["dur"][idx]), t0, t1) - t0
        gid, inv = np.unique(names, return_inverse=True)
        # one sorted pass: groups laid end to end (offset by the window's span), a running max
        # of ends, and each interval counts what sticks out beyond everything before it
        key = inv.astype(np.int64) * span
        o = np.lexsort((s, inv))
        ss, ee = s[o] + key[o], e[o] + key[o]
        prev = np.maximum.accumulate(np.r_[np.int64(-1), ee[:-1]])
        lo = np.maximum(ss, prev)
        contrib = np.maximum(0, ee - lo)
        # what of each counted piece the host spent blocked in a sync (pieces back in window time)
        piece = contrib > 0
        kk = key[o][piece]
        contrib[piece] -= blocked(ee[piece] - kk) - blocked(lo[piece] - kk)
        tot = np.bincount(inv[o], weights=contrib, minlength=len(gid))
        cats = np.asarray(c["cat"][idx])
        first_cat = np.zeros(len(gid), np.int64)
        first_cat[inv[::-1]] = cats[::-1]
        for g, n in enumerate(gid.tolist()):
            if n not in markers and tot[g] > 0:
                out[(n, int(first_cat[g]), ln)] = int(tot[g])
    return out
