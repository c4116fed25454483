"""Which arrivals of several ranks are one collective, where pairing by position is not enough.

match_arrivals pairs a group's n-th kernel of a step on every member rank. Two things break that:
- uneven lists (a capture cut through earlier work, a collective one rank ran before its steps'
  range): `lined_up` chooses which run of the longer list to pair;
- lists that hold different collectives at the same position: HTA's trace_filter holds 2 of 128
  ranks with events sampled away, so rank 0's 2nd all-to-all of a step is rank 1's 1st (both end
  at the same nanosecond) and, paired by position, kernels "waited" up to 226 ms for kernels that
  began after they had ended.

The members of an all-reduce, all-gather, reduce-scatter or all-to-all finish together: the last
arrival's transfer ends the collective for all (on the shared H200 traces the spread of a matched
instance's ends is at most 0.1 ms). So each rank's usual distance from its instances' median end
is its clock's offset (a GPU clock behind its host's moves them all alike); an instance where one
member ends far from where its offset puts it holds kernels of different collectives. Such a
group-and-step is paired again, two members by the order-keeping pairing with the most instances
whose ends agree (the rest unmatched), more members by dropping the instances that disagree.
Rooted ones (a broadcast, a reduce, a send/receive pair) are not judged by their ends: a sender
may finish before its receiver arrives.
"""

from __future__ import annotations

import numpy as np

WINDOW_NS = 1_000_000  # the width in which a rank's usual end offset is looked for
AGREE_MIN_NS = 1_000_000  # an end this close to its usual offset agrees, whatever the spread


def lined_up(lists: list[list[tuple]], n: int, from_last: bool) -> list[list[tuple]]:
    """The n arrivals of each member to pair, where some hold more than others (a capture cut
    through earlier work, a collective one rank ran before its steps' range): the run whose kernels'
    ends keep the steadiest distance to the shortest list's (a clock offset moves them all alike),
    as the members of a collective finish together. With one to pair, or a tie: from the first,
    or from the last (from_last: kernels from before the capture, pp_gpu's 5 and 7)."""
    ref = min(lists, key=len)
    ref_end = np.array([e[1] for e in ref], np.int64)
    out = []
    for x in lists:
        extra = len(x) - n
        default = extra if from_last else 0
        best = default
        if extra and n > 1:
            ends = np.array([e[1] for e in x], np.int64)

            def spread(o: int) -> int:
                d = ends[o : o + n] - ref_end
                return int(np.abs(d - np.median(d)).sum())

            cost = spread(default)
            for o in range(extra + 1):
                c = spread(o)
                if c < cost:
                    best, cost = o, c
        out.append(x[best : best + n])
    return out


def end_offsets(instances) -> dict[int, tuple[float, float]]:
    """Per rank: (its usual end offset from its instances' median end, the distance from it an
    end may have), from the 1 ms window holding most of its non-rooted instances' offsets: the
    median there, and ten times their median distance from it, at least AGREE_MIN_NS. A rank
    whose densest window holds fewer than two has no usual offset (absent: never judged)."""
    devs: dict[int, list[float]] = {}
    for ins in instances:
        if ins.rooted or len(ins.ranks) < 2:
            continue
        mid = float(np.median(ins.ends))
        for r, e in zip(ins.ranks, ins.ends.tolist()):
            devs.setdefault(r, []).append(e - mid)
    out: dict[int, tuple[float, float]] = {}
    for r, v in devs.items():
        d = np.sort(np.array(v, np.float64))
        hi = np.searchsorted(d, d + WINDOW_NS, side="right")
        count = hi - np.arange(len(d))
        i = int(np.argmax(count))
        if count[i] < 2:
            continue
        w = d[i : hi[i]]
        off = float(np.median(w))
        out[r] = (off, max(float(AGREE_MIN_NS), 10 * float(np.median(np.abs(w - off)))))
    return out


def _misfit(ranks, ends, offs: dict[int, tuple[float, float]]) -> tuple[bool, float]:
    """(whether some member's end is farther from its usual offset than it may be, the sum of
    the members' distances from theirs)."""
    mid = float(np.median(ends))
    far, total = False, 0.0
    for r, e in zip(ranks, ends):
        if r in offs:
            off, tol = offs[r]
            d = abs(float(e) - mid - off)
            far |= d > tol
            total += d
    return far, total


def ends_agree(ins, offs: dict[int, tuple[float, float]]) -> bool:
    """An instance's members end where their usual offsets put them (rooted ones always do)."""
    return ins.rooted or not _misfit(ins.ranks, ins.ends.tolist(), offs)[0]


def repaired(a: list[tuple], b: list[tuple], ranks: list[int], offs) -> list[tuple[int, int]]:
    """Two members' arrivals (rank_comm's rows) paired again: (i, j) index pairs in order, the
    most whose kinds match and whose ends agree, of those the closest to the usual offsets."""
    n, m = len(a), len(b)
    # best[i][j]: (pairs, -distance) over a[:i], b[:j]; came[i][j]: the move that got there
    best = [[(0, 0.0)] * (m + 1) for _ in range(n + 1)]
    came = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            cand = [(best[i - 1][j], 1), (best[i][j - 1], 2)]
            x, y = a[i - 1], b[j - 1]
            if x[3] == y[3]:
                far, dist = _misfit(ranks, (x[1], y[1]), offs)
                if not far:
                    p, d = best[i - 1][j - 1]
                    cand.append(((p + 1, d - dist), 3))
            best[i][j], came[i][j] = max(cand, key=lambda c: c[0])
    pairs = []
    i, j = n, m
    while i and j:
        move = came[i][j]
        if move == 3:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif move == 1:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]
