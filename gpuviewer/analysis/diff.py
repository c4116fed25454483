"""Compare two runs, or two ranks of one run (`gpuviewer diff`): step time and its parts, GPU ops,
host ops and collectives of side A against side B, each table sorted by impact (|delta| per step).

Alignment. Ranks pair by number (rank r of A with rank r of B), or as chosen: rank I of A with
rank J of B, or rank I with the median of the other ranks (per step and name, the median over
those ranks). Steps pair by number (step N with step N; by position when the runs share no step
number), warm-up left out, or as chosen: a step, a list, or `median` (per name, the median over
the side's steps; the steps chosen for the other side are left out when both sides are the same
rank of the same session, so `--steps 7 median` is step 7 against the median of the others).

What a number means. Every value is per step: for each rank and step the total of a name (the
sum of its durations in that step), then a side's value is the mean of those per-step totals
over its steps (the median for a `median` side), averaged over the rank pairs. a_total_ns is so
"time a step spends in this name, on a typical step of A"; a_count the calls a step, likewise.

Noise. Each run's own step-to-step variation says how large a delta can be by chance: per name
and rank pair, the sample standard deviation of the per-step totals across each side's steps
(1.4826 x MAD for a median side, so that the outlier it is compared with does not count as
noise), pooled over both sides with their degrees of freedom; the standard error of the delta
is s * sqrt(1/nA + 1/nB) (n scaled by 2/pi for a median, whose error is larger), combined over
rank pairs as for a mean. A delta is significant when it exceeds K_SIGMA standard errors and the
floor, FLOOR_FRAC of the smaller side's step time: within-run noise cannot see run-to-run
effects (clocks, another tenant), so deltas too small to matter for the step are never called
out. With one step on each side there is no noise estimate (noise_ns is null) and the floor
alone decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import GpuviewerError
from .collectives import bus_factor
from .diff_tables import GPU_PARTS, HOST_PARTS, PARTS, Measured

K_SIGMA = 3.0
FLOOR_FRAC = 0.01
FLOOR_MIN_NS = 1_000

__all__ = ["DiffError", "Pair", "diff", "pairs", "parse_steps"]


class DiffError(GpuviewerError, ValueError):
    """A comparison that cannot be made as asked; str(e) says why in the user's terms, side which
    session it is about ("a", "b", or None for both)."""

    def __init__(self, message: str, side: str | None = None) -> None:
        super().__init__(message)
        self.side = side


@dataclass
class Pair:
    a_ranks: list[int]  # one rank, or several whose per-step median is the side
    b_ranks: list[int]
    a_steps: list[int]
    b_steps: list[int]
    a_how: str = "mean"  # or "median": how the side's steps are summarised
    b_how: str = "mean"

    def as_dict(self) -> dict:
        def side(ranks, steps, how):
            return {"ranks": ranks, "ranks_how": "median" if len(ranks) > 1 else None, "steps": steps, "how": how}

        return {"a": side(self.a_ranks, self.a_steps, self.a_how), "b": side(self.b_ranks, self.b_steps, self.b_how)}


def parse_steps(spec: str) -> str | list[int]:
    """'all', 'median', '7', '3-5' or '2,4,6'."""
    s = spec.strip().lower()
    if s in ("all", "median"):
        return s
    out: list[int] = []
    try:
        for part in s.split(","):
            lo, _, hi = part.partition("-") if not part.startswith("-") else (part, "", "")
            a, b = int(lo), int(hi) if hi else int(lo)
            if b < a or b - a > 1_000_000:
                raise ValueError
            out += range(a, b + 1)
    except ValueError:
        raise DiffError(f"--steps {spec!r}: expected all, median, a step number, a range 3-5 or a list 2,4") from None
    return sorted(set(out))


def _common(steps: dict[int, list[int]], ranks: list[int]) -> list[int]:
    first = steps.get(ranks[0], [])
    rest = [set(steps.get(r, [])) for r in ranks[1:]]
    return [s for s in first if all(s in x for x in rest)]


def _steps_of(m: Measured, ranks: list[int], spec, other: list[int] | None, side: str) -> list[int]:
    """The steps of one side: spec explicit, or the measured steps (less `other`)."""
    if isinstance(spec, list):
        have = _common(m.steps, ranks)
        have_set = set(have)  # (a list's `in` made this quadratic in the steps)
        missing = [s for s in spec if s not in have_set]
        if missing:
            raise DiffError(
                f"step {missing[0]} is not on rank {', '.join(map(str, ranks))} "
                f"(its steps: {', '.join(map(str, have)) or 'none'})",
                side,
            )
        return spec
    avail = _common(m.measured, ranks)
    if other:
        skip = set(other)
        avail = [s for s in avail if s not in skip] or avail
    return avail


def _rank_pairs(a: Measured, b: Measured, ranks) -> list[tuple[list[int], list[int]]]:
    same = a is b
    if ranks is None:
        if same:
            return [([r], [r]) for r in a.ranks]
        b_ranks = set(b.ranks)
        common = [r for r in a.ranks if r in b_ranks]
        if common:
            return [([r], [r]) for r in common]
        if len(a.ranks) == 1 and len(b.ranks) == 1:
            return [([a.ranks[0]], [b.ranks[0]])]
        raise DiffError("the two sessions share no rank number: choose with --ranks I J")
    i, j = ranks
    if i not in a.ranks:
        raise DiffError(f"no rank {i} (ranks {', '.join(map(str, a.ranks))})", "a")
    if j == "median":
        others = [r for r in b.ranks if not (same and r == i)]
        if not others:
            raise DiffError(f"no other rank than {i} to take the median of", "b")
        return [([i], others)]
    if j not in b.ranks:
        raise DiffError(f"no rank {j} (ranks {', '.join(map(str, b.ranks))})", "b")
    return [([i], [j])]


def pairs(a: Measured, b: Measured, ranks=None, steps=("all", "all")) -> list[Pair]:
    """ranks: None (pair by number), (I, J) or (I, "median"); steps: two specs of parse_steps."""
    sa, sb = steps
    out = []
    for ra, rb in _rank_pairs(a, b, ranks):
        same_side = a is b and ra == rb
        if not isinstance(sa, list) and not isinstance(sb, list) and sa == sb == "all" and not same_side:
            avail_a, avail_b = _common(a.measured, ra), _common(b.measured, rb)
            # one set, not one per step: set(avail_b) inside the comprehension made a diff of
            # 40,000 steps spend 40 s here
            in_b = set(avail_b)
            common = [s for s in avail_a if s in in_b]
            if common:
                st_a = st_b = common
            else:  # the runs number their steps differently: the n-th with the n-th
                n = min(len(avail_a), len(avail_b))
                st_a, st_b = avail_a[:n], avail_b[:n]
        else:
            st_a = _steps_of(a, ra, sa, sb if same_side and isinstance(sb, list) else None, "a")
            st_b = _steps_of(b, rb, sb, sa if same_side and isinstance(sa, list) else None, "b")
        if not st_a or not st_b:
            raise DiffError(
                f"no steps to compare on rank {', '.join(map(str, ra if not st_a else rb))}", "a" if not st_a else "b"
            )
        out.append(
            Pair(ra, rb, st_a, st_b, "median" if sa == "median" else "mean", "median" if sb == "median" else "mean")
        )
    return out


# -- the comparison, table by table --------------------------------------------------------------


@dataclass
class _Stats:
    a: np.ndarray  # per key: side A's value per step
    b: np.ndarray
    se: np.ndarray  # standard error of b - a (NaN: unknown)


def _keyed(fa: pd.DataFrame, fb: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The union of both tables' keys, and each row's key id."""
    both = pd.concat([fa[keys], fb[keys]], ignore_index=True)
    kid = both.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    uniq = both.drop_duplicates(keys).reset_index(drop=True)
    return uniq, kid[: len(fa)], kid[len(fa) :]


def _per_step(f: pd.DataFrame, kid: np.ndarray, k: int, ranks: list[int], steps: list[int], col: str) -> np.ndarray:
    """keys x steps: the column's value per step (the median over ranks when several)."""
    rk = f["rank"].to_numpy()
    st = f["step"].to_numpy()
    rpos = pd.Index(ranks).get_indexer(rk)
    spos = pd.Index(steps).get_indexer(st)
    m = (rpos >= 0) & (spos >= 0)
    cube = np.zeros((k, len(ranks), len(steps)))
    np.add.at(cube, (kid[m], rpos[m], spos[m]), f[col].to_numpy(np.float64)[m])
    return cube[:, 0, :] if len(ranks) == 1 else np.median(cube, axis=1)


def _side(x: np.ndarray, how: str) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Centre, spread, effective n and degrees of freedom of each row."""
    n = x.shape[1]
    if how == "median" and n > 1:
        c = np.median(x, axis=1)
        return c, 1.4826 * np.median(np.abs(x - c[:, None]), axis=1), n * 2 / np.pi, n - 1
    return x.mean(axis=1), (x.std(axis=1, ddof=1) if n > 1 else np.zeros(len(x))), float(n), n - 1


def _compare(fa, fb, kid_a, kid_b, k: int, col: str, prs: list[Pair]) -> _Stats:
    a_c, b_c, var = [], [], []
    for p in prs:
        xa = _per_step(fa, kid_a, k, p.a_ranks, p.a_steps, col)
        xb = _per_step(fb, kid_b, k, p.b_ranks, p.b_steps, col)
        ca, sa, na, da = _side(xa, p.a_how)
        cb, sb, nb, db = _side(xb, p.b_how)
        dof = da + db
        s2 = (da * sa**2 + db * sb**2) / dof if dof else np.full(k, np.nan)
        a_c.append(ca)
        b_c.append(cb)
        var.append(s2 * (1 / na + 1 / nb))
    n = len(prs)
    return _Stats(np.mean(a_c, axis=0), np.mean(b_c, axis=0), np.sqrt(np.sum(var, axis=0)) / n)


def _present(f, kid, k: int, prs: list[Pair], side: str) -> np.ndarray:
    out = np.zeros(k, bool)
    for p in prs:
        ranks, steps = (p.a_ranks, p.a_steps) if side == "a" else (p.b_ranks, p.b_steps)
        m = f["rank"].isin(ranks).to_numpy() & f["step"].isin(steps).to_numpy() & (f["count"].to_numpy() > 0)
        out[kid[m]] = True
    return out


class _Judge:
    """Whether a delta is beyond noise and the floor."""

    def __init__(self, step_a: float, step_b: float) -> None:
        self.floor = max(FLOOR_MIN_NS, FLOOR_FRAC * min(step_a, step_b))

    def __call__(self, delta: float, se: float) -> bool:
        if abs(delta) < self.floor:
            return False
        return bool(np.isnan(se) or abs(delta) > K_SIGMA * se)


def _ns(x) -> int:
    return int(round(float(x)))


def _noise(se) -> int | None:
    return None if np.isnan(se) else _ns(se)


def _named_table(fa, fb, prs, judge: _Judge, steps: tuple[float, float]) -> list[dict]:
    """Kernels or host ops: per (name, kind), total and count per step, A vs B."""
    if not len(fa) and not len(fb):
        return []
    keys, kid_a, kid_b = _keyed(fa, fb, ["name", "kind"])
    k = len(keys)
    tot = _compare(fa, fb, kid_a, kid_b, k, "total", prs)
    cnt = _compare(fa, fb, kid_a, kid_b, k, "count", prs)
    in_a, in_b = _present(fa, kid_a, k, prs, "a"), _present(fb, kid_b, k, prs, "b")
    rows = []
    for i, (name, kind) in enumerate(zip(keys["name"], keys["kind"])):
        if not (in_a[i] or in_b[i]):
            continue
        a, b, d = tot.a[i], tot.b[i], tot.b[i] - tot.a[i]
        rows.append(
            {
                "name": name,
                "kind": kind,
                "a_total_ns": _ns(a),
                "b_total_ns": _ns(b),
                "delta_ns": _ns(d),
                "a_count": round(float(cnt.a[i]), 3),
                "b_count": round(float(cnt.b[i]), 3),
                "a_mean_ns": _ns(a / cnt.a[i]) if cnt.a[i] else None,
                "b_mean_ns": _ns(b / cnt.b[i]) if cnt.b[i] else None,
                "a_share": round(float(a / steps[0]), 4) if steps[0] else None,
                "b_share": round(float(b / steps[1]), 4) if steps[1] else None,
                "noise_ns": _noise(tot.se[i]),
                "significant": judge(d, tot.se[i]),
                "only": "a" if not in_b[i] else "b" if not in_a[i] else None,
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["name"], r["kind"]))
    return rows


def _parts_table(ma: Measured, mb: Measured, prs: list[Pair], judge: _Judge | None = None) -> list[dict]:
    keys, kid_a, kid_b = _keyed(ma.parts, mb.parts, ["part"])
    st = _compare(ma.parts, mb.parts, kid_a, kid_b, len(keys), "value", prs)
    rows = []
    for i, part in enumerate(keys["part"]):
        d = st.b[i] - st.a[i]
        rows.append(
            {
                "part": part,
                "a_ns": _ns(st.a[i]),
                "b_ns": _ns(st.b[i]),
                "delta_ns": _ns(d),
                "noise_ns": _noise(st.se[i]),
                "significant": judge(d, st.se[i]) if judge else False,
            }
        )
    # the step, the GPU's time and its parts, then the host's parts (each part where it belongs)
    rows.sort(key=lambda r: PARTS.index(r["part"]))
    return rows


def _collective_table(
    ma: Measured, mb: Measured, prs: list[Pair], judge: _Judge, by: tuple[str, ...] = ("group", "name", "bytes")
) -> list[dict]:
    """Per collective: count, wait, transfer and bus bandwidth a step, A vs B. Its impact is the
    larger change of its two parts: the wait is the other ranks' lateness, the transfer the
    collective's own speed, and one can grow while the other shrinks."""
    fa, fb = ma.collectives, mb.collectives
    if not len(fa) and not len(fb):
        return []
    fa, fb = fa.assign(total=fa["wait"] + fa["transfer"]), fb.assign(total=fb["wait"] + fb["transfer"])
    if "bytes" not in by:  # every size of a collective together
        fa, fb = fa.assign(bytes=-1), fb.assign(bytes=-1)
    keys, kid_a, kid_b = _keyed(fa, fb, ["group", "name", "bytes"])
    k = len(keys)
    st = {c: _compare(fa, fb, kid_a, kid_b, k, c, prs) for c in ("count", "wait", "transfer", "nbytes", "total")}
    in_a, in_b = _present(fa, kid_a, k, prs, "a"), _present(fb, kid_b, k, prs, "b")
    nranks = np.ones(k, np.int64)
    matched = np.ones(k, bool)
    for f, kid in ((fa, kid_a), (fb, kid_b)):
        np.maximum.at(nranks, kid, f["nranks"].to_numpy(np.int64))
        np.logical_and.at(matched, kid, f["matched"].to_numpy(bool))

    def busbw(side: str, i: int, name: str) -> float | None:
        nb, tr = getattr(st["nbytes"], side)[i], getattr(st["transfer"], side)[i]
        return round(float(bus_factor(name, int(nranks[i])) * nb / tr), 2) if nb > 0 and tr > 0 else None

    rows = []
    for i, (group, name, nbytes) in enumerate(zip(keys["group"], keys["name"], keys["bytes"])):
        if not (in_a[i] or in_b[i]):
            continue
        t, w, x = st["total"], st["wait"], st["transfer"]
        d, dw, dx = t.b[i] - t.a[i], w.b[i] - w.a[i], x.b[i] - x.a[i]
        sig_w, sig_x = judge(dw, w.se[i]), judge(dx, x.se[i])
        rows.append(
            {
                "group": group,
                "name": name,
                "bytes": None if nbytes < 0 else int(nbytes),
                "ranks": int(nranks[i]),
                "matched": bool(matched[i]),
                "a_count": round(float(st["count"].a[i]), 3),
                "b_count": round(float(st["count"].b[i]), 3),
                "a_wait_ns": _ns(w.a[i]),
                "b_wait_ns": _ns(w.b[i]),
                "a_transfer_ns": _ns(x.a[i]),
                "b_transfer_ns": _ns(x.b[i]),
                "a_total_ns": _ns(t.a[i]),
                "b_total_ns": _ns(t.b[i]),
                "delta_ns": _ns(d),
                "delta_wait_ns": _ns(dw),
                "delta_transfer_ns": _ns(dx),
                "impact_ns": _ns(max(abs(dw), abs(dx))),
                "a_busbw_gbps": busbw("a", i, name),
                "b_busbw_gbps": busbw("b", i, name),
                "wait_noise_ns": _noise(w.se[i]),
                "transfer_noise_ns": _noise(x.se[i]),
                "significant": sig_w or sig_x,
                "wait_significant": sig_w,
                "transfer_significant": sig_x,
            }
        )
    rows.sort(key=lambda r: (-r["impact_ns"], r["group"], r["name"], r["bytes"] or 0))
    return rows


def diff(a: Measured, b: Measured, *, ranks=None, steps=("all", "all")) -> dict:
    """The comparison as plain data (what `gpuviewer diff --json` prints, less the file names).
    Pass the same Measured twice to compare ranks or steps of one session."""
    steps = tuple(parse_steps(s) if isinstance(s, str) else s for s in steps)
    prs = pairs(a, b, ranks, steps)
    parts = _parts_table(a, b, prs)
    step = next(r for r in parts if r["part"] == "step")
    judge = _Judge(step["a_ns"], step["b_ns"])
    parts = _parts_table(a, b, prs, judge)
    step_ns = (step["a_ns"], step["b_ns"])
    out = {
        "a": _side_json(prs, "a"),
        "b": _side_json(prs, "b"),
        "steps": [p.as_dict() for p in prs],
        "noise": {
            "method": "per-step totals; standard error of the delta of means from the pooled "
            "step-to-step standard deviation (1.4826 x MAD for a median side)",
            "k_sigma": K_SIGMA,
            "floor_ns": _ns(judge.floor),
            "floor_frac_of_step": FLOOR_FRAC,
            "estimated": any(len(p.a_steps) + len(p.b_steps) > 2 for p in prs),
        },
        "step_parts": parts,
        "step_parts_by_rank": [
            {"a_ranks": p.a_ranks, "b_ranks": p.b_ranks, "parts": _parts_table(a, b, [p], judge)} for p in prs
        ]
        if len(prs) > 1
        else [],
        "kernels": _named_table(a.kernels, b.kernels, prs, judge, step_ns),
        "host_ops": _named_table(a.host_ops, b.host_ops, prs, judge, step_ns),
        "collectives": _collective_table(a, b, prs, judge),
        "collective_totals": _collective_table(a, b, prs, judge, by=("group", "name")),
    }
    out["top"] = top_changes(out)
    # GPU ops a step on each side: runs of different programs (dataloader_stall's 843 kernels a
    # step against single_gpt_train's 1,620) compare different work, not the same work's speed
    out["gpu_ops_per_step"] = [round(sum(r[f"{x}_count"] for r in out["kernels"]), 3) for x in ("a", "b")]
    # the highest peak of allocated GPU memory among each side's ranks (None: not recorded)
    out["memory_peak_bytes"] = [
        max((m.memory_peak[r] for p in prs for r in getattr(p, f"{x}_ranks") if r in m.memory_peak), default=None)
        for m, x in ((a, "a"), (b, "b"))
    ]
    return out


def _side_json(prs: list[Pair], side: str) -> dict:
    ranks = sorted({r for p in prs for r in getattr(p, f"{side}_ranks")})
    steps = sorted({s for p in prs for s in getattr(p, f"{side}_steps")})
    how = getattr(prs[0], f"{side}_how")
    rank_median = any(len(getattr(p, f"{side}_ranks")) > 1 for p in prs)
    return {"ranks": ranks, "steps": steps, "how": how, "ranks_how": "median" if rank_median else None}


def top_changes(d: dict) -> list[dict]:
    """What to look at first: the largest significant change of the step's GPU parts and of its
    host parts (where the step's time went: a host stall is GPU idle and host time with no op, which
    no op table shows), then of each kind of GPU op, of the collectives' wait and transfer, and of
    the host ops, in that order (GPU side first: host op totals are inclusive, so a host op that
    waits for the GPU repeats the GPU's change)."""
    out = []
    for table, names in (("step's GPU time", GPU_PARTS), ("step's host time", HOST_PARTS)):
        sig = [r for r in d["step_parts"] if r["part"] in names and r["significant"]]
        if sig:
            r = max(sig, key=lambda r: abs(r["delta_ns"]))
            what = r["part"].removeprefix("host: ").removeprefix("GPU ")
            out.append({"table": table, "what": what, "a_ns": r["a_ns"], "b_ns": r["b_ns"], "delta_ns": r["delta_ns"]})
    out.sort(key=lambda t: -abs(t["delta_ns"]))
    ops: list[dict] = []
    for kind in ("compute", "comm", "memcpy", "memset"):
        sig = [r for r in d["kernels"] if r["kind"] == kind and r["significant"]]
        if sig:
            ops.append(_change(f"GPU {kind}", sig[0]["name"], sig[0], "total"))
    out += sorted(ops, key=lambda t: -abs(t["delta_ns"]))
    for part in ("transfer", "wait"):
        sig = [r for r in d["collective_totals"] if r[f"{part}_significant"]]
        if sig:
            r = max(sig, key=lambda r: abs(r[f"delta_{part}_ns"]))
            out.append(_change(f"collective {part}", f"{r['name']} {r['group']}", r, part))
    sig = [r for r in d["host_ops"] if r["significant"]]
    if sig:
        out.append(_change("host op", f"{sig[0]['name']} ({sig[0]['kind']})", sig[0], "total"))
    return out


def _change(table: str, what: str, r: dict, part: str) -> dict:
    delta = r["delta_ns"] if part == "total" else r[f"delta_{part}_ns"]
    return {"table": table, "what": what, "a_ns": r[f"a_{part}_ns"], "b_ns": r[f"b_{part}_ns"], "delta_ns": delta}
