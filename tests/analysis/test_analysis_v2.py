"""Analysis v2 (issue 11): `gpuviewer analyze --json` checked against numbers computed here from
the raw files (tests/analysis_truth.py: json/gzip/sqlite3 + numpy, nothing from gpuviewer), plus
invariants and metamorphic tests (tests/shift_gpu.py moves a trace's GPU side in time).

The JSON is read from the real CLI in a subprocess (conftest.run_cli_once), once per input; the
`info` runs of section 8 share one child (tests/cli_batch.py)."""

from __future__ import annotations

import glob
import json
import math
import os
import re
import statistics

import analysis_truth as T
import pytest
import shift_gpu
from cli_batch import run_cli_batch
from conftest import COMPAT, TRACES, load_truth, run_cli_once, trace_path

TRUTH = load_truth()
NSYS_DDP_TRUTH = next((v for k, v in TRUTH.items() if k.startswith("ddp_plain")), {})

KINETO_FILES = sorted(os.path.relpath(p, TRACES) for p in glob.glob(os.path.join(TRACES, "kineto", "*.json.gz")))
KINETO_DIRS = sorted(
    os.path.relpath(p, TRACES) for p in glob.glob(os.path.join(TRACES, "kineto", "*")) if os.path.isdir(p)
)
RANK_FILES = sorted(
    os.path.relpath(p, TRACES) for d in KINETO_DIRS for p in glob.glob(os.path.join(TRACES, d, "*.json.gz"))
)
NSYS_FILES = sorted(os.path.relpath(p, TRACES) for p in glob.glob(os.path.join(TRACES, "nsys", "*.sqlite")))
ALL_TRACES = KINETO_FILES + KINETO_DIRS + NSYS_FILES  # what a user opens: files and per-rank folders
MULTI_RANK = [p for p in ALL_TRACES if p in KINETO_DIRS or "ddp" in p]
NO_REFERENCE = {"kineto/launch_bound_big.json.gz"}  # 288 MB of JSON: JSON-internal checks only
COMPAT_FILES = sorted(
    os.path.relpath(p, COMPAT)
    for p in glob.glob(os.path.join(COMPAT, "**", "*"), recursive=True)
    if os.path.isfile(p) and p.endswith((".json", ".json.gz", ".sqlite"))
)

MS = 1e6


# -- the two sides ------------------------------------------------------------------------------

_out: dict = {}
_ref: dict = {}


def _strict_json(text: str):
    def bad(c):
        raise ValueError(f"{c} is not JSON")

    return json.loads(text, parse_constant=bad)


def analyze(path: str) -> dict:
    """`gpuviewer analyze PATH --json`, parsed; once per path."""
    if path not in _out:
        p = run_cli_once("analyze", path, "--json")  # one run per path for the test run (other modules too)
        assert p.returncode == 0, f"analyze {path}: exit {p.returncode}\n{p.stderr[-4000:]}"
        _out[path] = _strict_json(p.stdout)
    return _out[path]


class Ref:
    """Independent numbers for one trace: per rank and step, and the matched collectives."""

    def __init__(self, path: str):
        self.ranks = {r.rank: r for r in T.load(path)}
        self.steps = {k: {d["step"]: d for d in T.step_breakdown(r)} for k, r in self.ranks.items()}
        self.instances = T.match(list(self.ranks.values())) if len(self.ranks) > 1 else []
        self.waits = T.step_waits(self.instances)  # step -> wait / caused / late_rank

    def wait_ms(self, rank: int, step: int) -> float:
        return self.waits.get(step, {"wait": {}})["wait"].get(rank, 0) / MS

    def caused_ms(self, rank: int, step: int) -> float:
        return self.waits.get(step, {"caused": {}})["caused"].get(rank, 0) / MS

    def late_steps(self, rank: int) -> list[int]:
        return sorted(s for s, d in self.waits.items() if d["late_rank"] == rank)

    def compute_excess_ms(self, rank: int, steps) -> float:
        """Mean over `steps` of the rank's GPU compute minus the mean of the other ranks'."""
        ex = []
        for s in steps:
            others = [self.steps[r][s]["compute_ns"] for r in self.ranks if r != rank and s in self.steps[r]]
            if others and s in self.steps[rank]:
                ex.append((self.steps[rank][s]["compute_ns"] - statistics.mean(others)) / MS)
        return statistics.mean(ex) if ex else 0.0


def ref(path: str) -> Ref:
    if path not in _ref:
        _ref[path] = Ref(path)
    return _ref[path]


# -- reading the JSON -----------------------------------------------------------------------------


def json_steps(out: dict, rank: int) -> dict:
    r = next(x for x in out["ranks"] if x["rank"] == rank)
    return {s["step"]: s for s in r["steps"] if s["step"] is not None}


def json_collective_steps(out: dict) -> dict:
    return {c["step"]: c for c in out["collective_steps"]}


def all_findings(findings):
    for f in findings:
        yield f
        yield from all_findings(f.get("children") or [])


def stragglers(out: dict, kind: str | None = None) -> list[dict]:
    return [
        f
        for f in all_findings(out["findings"])
        if f["rule"] == "straggler" and (kind is None or f["metrics"]["kind"] == kind)
    ]


def close(a, b, rel, floor=0.0) -> bool:
    return abs(a - b) <= max(rel * abs(b), floor)


def window(s: dict) -> int:
    return s["end_ns"] - s["start_ns"]


# -- 1. pp_gpu: GPU step windows ----------------------------------------------------------------

PP_GPU = trace_path("kineto", "pp_gpu")


def test_pp_gpu_idle_is_small_in_gpu_step_windows():
    """The GPU runs back to back: per-step idle <= 5% of the step's GPU window on both ranks, and
    per-step compute and idle agree with the independent count within 1%."""
    R = ref(PP_GPU)
    out = analyze(PP_GPU)
    for rank, mine in R.steps.items():
        assert sorted(mine) == [2, 3, 4]
        js = json_steps(out, rank)
        assert sorted(js) == sorted(mine), f"rank {rank}"
        for st, d in mine.items():
            assert d["idle_ns"] <= 0.05 * d["window_ns"], f"reference: rank {rank} step {st}"
            j = js[st]
            assert j["idle_ns"] <= 0.05 * window(j), (
                f"rank {rank} step {st}: idle {j['idle_ns'] / MS:.1f} ms of a {window(j) / MS:.1f} ms window "
                f"(independent: {d['idle_ns'] / MS:.2f} of {d['window_ns'] / MS:.1f} ms)"
            )
            assert close(j["compute_ns"], d["compute_ns"], 0.01), (
                f"rank {rank} step {st}: compute {j['compute_ns'] / MS:.2f} ms, independent {d['compute_ns'] / MS:.2f}"
            )
            assert close(j["idle_ns"], d["idle_ns"], 0.01), (
                f"rank {rank} step {st}: idle {j['idle_ns'] / MS:.3f} ms, independent {d['idle_ns'] / MS:.3f}"
            )


def test_pp_gpu_non_compute_fraction_is_the_bubble():
    """Stage 1 (the heavier, last stage) is not computing about the ideal bubble (p-1)/(m+p-1) =
    1/9 of its step; stage 0 waits for it, so its fraction is higher."""
    t = TRUTH["pp_gpu"]
    ideal = (t["ranks"] - 1) / (t["micro_batches"] + t["ranks"] - 1)
    assert ideal == pytest.approx(1 / 9)
    R = ref(PP_GPU)
    out = analyze(PP_GPU)
    for st in R.steps[1]:
        mine = {r: 1 - R.steps[r][st]["compute_ns"] / R.steps[r][st]["window_ns"] for r in (0, 1)}
        assert abs(mine[1] - ideal) <= 0.02 and mine[0] > mine[1], f"reference, step {st}: {mine}"
        js = {r: json_steps(out, r)[st] for r in (0, 1)}
        frac = {r: 1 - js[r]["compute_ns"] / window(js[r]) for r in (0, 1)}
        assert abs(frac[1] - ideal) <= 0.02, (
            f"step {st}: stage 1 not computing {frac[1]:.3f} (independent {mine[1]:.3f})"
        )
        assert frac[0] > frac[1], f"step {st}: stage 0 {frac[0]:.3f} <= stage 1 {frac[1]:.3f}"


# -- 2. invariants on every trace ---------------------------------------------------------------


@pytest.mark.parametrize("rel", ALL_TRACES)
def test_step_invariants(rel):
    """Per rank: GPU windows ordered and disjoint; busy <= window and idle = window - busy;
    compute, comm <= busy; wait + transfer = comm (within 1% of comm or 0.1 ms: the same kernels
    split in two); a rank's wait in a step's collectives (collective_steps) is its wait_ns there and
    fits in its communication time; the per-step busy adds up to at most the rank's GPU busy (the
    union of all its GPU ops, computed here)."""
    path = trace_path(*rel.split("/"))
    out = analyze(path)
    R = None if rel in NO_REFERENCE else ref(path)
    assert out["ranks"]
    for rk in out["ranks"]:
        steps = [s for s in rk["steps"] if s["step"] is not None]
        assert [s["step"] for s in steps] == sorted(s["step"] for s in steps), "steps in order"
        prev = None
        for s in steps:
            where = f"rank {rk['rank']} step {s['step']}"
            assert s["start_ns"] <= s["end_ns"], where
            if prev is not None:
                assert s["start_ns"] >= prev["end_ns"], f"{where} starts before step {prev['step']}'s GPU window ends"
            assert 0 <= s["busy_ns"] <= window(s), where
            assert s["idle_ns"] == window(s) - s["busy_ns"], where
            assert s["compute_ns"] <= s["busy_ns"] and s["comm_ns"] <= s["busy_ns"], where
            assert s["wait_ns"] >= 0 and s["transfer_ns"] >= 0, where
            assert abs(s["wait_ns"] + s["transfer_ns"] - s["comm_ns"]) <= max(0.01 * s["comm_ns"], 100_000), (
                f"{where}: wait {s['wait_ns']} + transfer {s['transfer_ns']} != comm {s['comm_ns']}"
            )
            prev = s
        by_step = {s["step"]: s for s in steps}
        for c in out.get("collective_steps", []) if len(out["ranks"]) > 1 else []:
            s = by_step.get(c["step"])
            w = c["wait_ms"].get(str(rk["rank"]), 0.0) * MS
            if s is None:
                assert w == 0, f"rank {rk['rank']} waits {w / MS:.3f} ms in step {c['step']}, which it does not have"
                continue
            where = f"rank {rk['rank']} step {c['step']}"
            assert w <= s["comm_ns"] * 1.01 + 100_000, (
                f"{where}: waits {w / MS:.3f} ms at the collectives, more than its {s['comm_ns'] / MS:.3f} ms "
                "of communication kernels"
            )
            assert abs(w - s["wait_ns"]) <= max(0.01 * s["wait_ns"], 100_000), (
                f"{where}: collective_steps wait {w / MS:.3f} ms, ranks[].steps wait_ns {s['wait_ns'] / MS:.3f} ms"
            )
        if R is not None:
            total = T.total_busy(R.ranks[rk["rank"]])
            summed = sum(s["busy_ns"] for s in steps)
            assert summed <= total * 1.0001 + 10_000, (
                f"rank {rk['rank']}: per-step busy adds to {summed / MS:.3f} ms, the rank's GPU is busy {total / MS:.3f} ms"
            )


@pytest.mark.parametrize("rel", [p for p in ALL_TRACES if p not in NO_REFERENCE])
def test_per_step_numbers_match_reference(rel):
    """Step attribution by launch (correlation id), unlinked ops by their stream neighbours: the
    same ops per step as counted here, and the same window, busy, compute and comm (1%, or 20 µs)."""
    path = trace_path(*rel.split("/"))
    out, R = analyze(path), ref(path)
    bad = []
    for rank, mine in R.steps.items():
        js = json_steps(out, rank)
        assert sorted(js) == sorted(mine), f"rank {rank}: steps {sorted(js)}, independent {sorted(mine)}"
        for st, d in mine.items():
            j = js[st]
            where = f"rank {rank} step {st}"
            if j["ops"] != d["ops"]:
                bad.append(f"{where}: {j['ops']} GPU ops, independent {d['ops']}")
            # the window: the step's first op to its last (idle before its first op, e.g. while
            # the host sleeps or loads data with the GPU drained, is in no step's window)
            for k, got, exp in (
                ("window", window(j), d["window_ns"]),
                ("busy", j["busy_ns"], d["busy_ns"]),
                ("compute", j["compute_ns"], d["compute_ns"]),
                ("comm", j["comm_ns"], d["comm_ns"]),
            ):
                if not close(got, exp, 0.01, 20_000):
                    bad.append(f"{where}: {k} {got / MS:.3f} ms, independent {exp / MS:.3f} ms")
    assert not bad, f"{len(bad)} differences:\n" + "\n".join(bad[:12])


P2P_TRACES = ["kineto/pp", "kineto/pp_gpu"]  # pipeline stages: NCCL send/recv only


@pytest.mark.parametrize("rel", [p for p in MULTI_RANK if p not in NO_REFERENCE and p not in P2P_TRACES])
def test_collective_waits_match_reference(rel):
    """Collectives matched per process group by order: per step, the collectives counted, each
    rank's wait (2%, or 0.1 ms), the late rank and the wait it caused agree with the reference.
    (The reference caps a rank's wait at its own kernel's duration: a send or a broadcast root
    that finished before its peer arrived did not wait - kineto/pp, nsys_ddp step 1.)"""
    _check_collective_waits(rel)


def _check_collective_waits(rel: str) -> None:
    path = trace_path(*rel.split("/"))
    out, R = analyze(path), ref(path)
    cs = json_collective_steps(out)
    per_step: dict = {}
    for ins in R.instances:
        per_step[ins.steps[0]] = per_step.get(ins.steps[0], 0) + 1
    assert sorted(cs) == sorted(s for s in R.waits), f"steps with collectives: {sorted(cs)} vs {sorted(R.waits)}"
    for st, mine in R.waits.items():
        c = cs[st]
        assert c["collectives"] == per_step[st], (
            f"step {st}: {c['collectives']} collectives, independent {per_step[st]}"
        )
        for rank in R.ranks:
            got, exp = c["wait_ms"][str(rank)], R.wait_ms(rank, st)
            assert close(got, exp, 0.02, 0.1), f"step {st} rank {rank}: waits {got:.3f} ms, independent {exp:.3f}"
        if max(mine["caused"].values()) > 1 * MS:  # a clear late rank
            assert c["late_rank"] == mine["late_rank"], f"step {st}"
            late = str(mine["late_rank"])
            assert close(c["wait_caused_ms"][late], R.caused_ms(mine["late_rank"], st), 0.02, 0.1), f"step {st}"


@pytest.mark.parametrize("rel", P2P_TRACES)
def test_send_recv_waits_reported(rel):
    """Issue 11 matches every NCCL operation of a process group by order, send/recv included (bus
    factor 1): a pipeline stage waiting in recv for the other stage shows in collective_steps and
    in its wait_ns (pp_gpu: stage 0 waits ~70-76 ms a step, stage 1 ~39 ms)."""
    _check_collective_waits(rel)
    out, R = analyze(trace_path(*rel.split("/"))), ref(trace_path(*rel.split("/")))
    for rank in R.ranks:
        js = json_steps(out, rank)
        for st in R.steps[rank]:
            assert close(js[st]["wait_ns"] / MS, R.wait_ms(rank, st), 0.02, 0.1), f"rank {rank} step {st}"


# -- 3. metamorphic ------------------------------------------------------------------------------


def _median_host_step_us(R: Ref) -> float:
    return statistics.median((h[2] - h[1]) / 1000 for r in R.ranks.values() for h in r.steps)


@pytest.mark.parametrize(
    "rel,steps_later", [("kineto/pp_gpu", 1.0), ("kineto/pp_gpu", 2.0), ("kineto/dataloader_stall.json.gz", 2.0)]
)
def test_moving_the_gpu_side_later_changes_no_step_numbers(tmp_path, rel, steps_later):
    """The GPU side of every rank moved 1 or 2 step durations later (the host side stays): per-step
    compute, comm and idle change by at most 1%, and each GPU window moves by exactly that much
    against its host step. pp_gpu's GPU never drains; dataloader_stall's drains before every step
    (the host sleeps 30 ms), so its idle must not depend on where the host step starts."""
    path = trace_path(*rel.split("/"))
    R = ref(path)
    delta_us = round(steps_later * _median_host_step_us(R))
    d = tmp_path / "shifted"
    d.mkdir()
    for f in T.kineto_files(path):
        assert shift_gpu.shift(f, str(d / os.path.basename(f)), delta_us) > 0
    moved_path = str(d) if os.path.isdir(path) else str(d / os.path.basename(path))
    base, moved = analyze(path), analyze(moved_path)
    for rk in base["ranks"]:
        a, b = json_steps(base, rk["rank"]), json_steps(moved, rk["rank"])
        assert sorted(a) == sorted(b), f"rank {rk['rank']}"
        for st in a:
            where = f"rank {rk['rank']} step {st} ({steps_later} steps later)"
            for k in ("compute_ns", "comm_ns", "idle_ns"):
                assert close(b[st][k], a[st][k], 0.01, 10_000), f"{where}: {k} {a[st][k]} -> {b[st][k]}"
            lag_a = a[st]["start_ns"] - a[st]["host_start_ns"]
            lag_b = b[st]["start_ns"] - b[st]["host_start_ns"]
            assert abs((lag_b - lag_a) - delta_us * 1000) <= 2_000, (
                f"{where}: the window moved {(lag_b - lag_a) / MS:.3f} ms"
            )


CLOCK_TRACE = "kineto/step_outlier.json.gz"


def test_clock_offset_changes_nothing(tmp_path):
    """Every event of a single-rank trace 3.7 s later: per-step durations and numbers identical
    (1 µs of rounding), the same findings (rule, ranks, step)."""
    src = trace_path(*CLOCK_TRACE.split("/"))
    dst = tmp_path / "clock.json.gz"
    shift_gpu.shift(src, str(dst), 3_700_000, everything=True)
    a, b = analyze(src), analyze(str(dst))
    absolute = {"start_ns", "end_ns", "host_start_ns", "host_end_ns"}
    for rk in a["ranks"]:
        sa, sb = json_steps(a, rk["rank"]), json_steps(b, rk["rank"])
        assert sorted(sa) == sorted(sb)
        for st in sa:
            x, y = sa[st], sb[st]
            assert set(x) == set(y)
            for k in ("start_ns", "end_ns", "host_end_ns"):  # every time against the host step start
                assert abs((y[k] - y["host_start_ns"]) - (x[k] - x["host_start_ns"])) <= 1_000, f"step {st} {k}"
            for k, v in x.items():
                if k in absolute or isinstance(v, (bool, str)) or v is None:
                    assert k in absolute or y[k] == v, f"step {st} {k}"
                elif k.endswith("_ns"):
                    assert abs(y[k] - v) <= 1_000, f"step {st} {k}: {v} -> {y[k]}"
                else:
                    assert y[k] == pytest.approx(v, rel=1e-3, abs=1e-4), f"step {st} {k}: {v} -> {y[k]}"

    def key(out):
        return sorted((f["rule"], tuple(f["ranks"]), f["step"]) for f in all_findings(out["findings"]))

    assert key(a) == key(b)


# -- 4. fsdp: rank 1 late at every collective ---------------------------------------------------

FSDP = trace_path("kineto", "fsdp")


def test_fsdp_rank1_late_every_step_rank0_waits():
    R = ref(FSDP)
    out = analyze(FSDP)
    cs = json_collective_steps(out)
    js0 = json_steps(out, 0)
    steps = sorted(R.steps[0])
    assert steps == [2, 3, 4] and R.late_steps(1) == steps  # reference: rank 1 last in every step
    for st in steps:
        mine = R.wait_ms(0, st)
        assert 100 <= mine <= 115, f"reference: step {st} rank 0 waits {mine:.2f} ms"
        assert cs[st]["late_rank"] == 1, f"step {st}"
        got = cs[st]["wait_ms"]["0"]
        assert 100 <= got <= 115, f"step {st}: rank 0 waits {got:.2f} ms"
        assert close(got, mine, 0.02), f"step {st}: rank 0 waits {got:.2f} ms, independent {mine:.2f}"
        assert close(js0[st]["wait_ns"] / MS, mine, 0.02), f"step {st}: ranks[0] wait_ns {js0[st]['wait_ns']}"
        assert close(cs[st]["wait_caused_ms"]["1"], R.caused_ms(1, st), 0.02), f"step {st}"


def test_fsdp_persistent_straggler_named():
    R = ref(FSDP)
    s = stragglers(analyze(FSDP), "persistent")
    assert len(s) == 1, [f["title"] for f in s]
    m = s[0]["metrics"]
    assert m["late_rank"] == 1 and sorted(m["steps"]) == sorted(R.steps[0])
    for st in m["steps"]:
        assert close(m["wait_caused_ms_per_step"][str(st)], R.caused_ms(1, st), 0.02), f"step {st}"
    assert R.compute_excess_ms(1, m["steps"]) < 0  # rank 1 computes less than rank 0 ...
    assert m["cause"] in ("host", "input")  # ... so its GPU is not why it is late


# -- 5. gpu_straggler ---------------------------------------------------------------------------

GPU_STRAGGLER = trace_path("kineto", "gpu_straggler")


def test_gpu_straggler_one_persistent_finding():
    R = ref(GPU_STRAGGLER)
    out = analyze(GPU_STRAGGLER)
    steps = sorted(R.steps[0])
    assert len(steps) == TRUTH["gpu_straggler"]["active_steps"] == 6
    assert R.late_steps(1) == steps  # reference: rank 1 last in all 6 steps
    cs = json_collective_steps(out)
    for st in steps:
        mine = R.wait_ms(0, st)
        assert 28 <= mine <= 42, f"reference: step {st} rank 0 waits {mine:.2f} ms"
        got = cs[st]["wait_ms"]["0"]
        assert 28 <= got <= 42 and close(got, mine, 0.02), f"step {st}: rank 0 waits {got:.2f}, independent {mine:.2f}"
        assert cs[st]["late_rank"] == 1, f"step {st}"

    s = stragglers(out)
    assert len(s) == 1, [f["title"] for f in s]
    f = s[0]
    m = f["metrics"]
    assert m["kind"] == "persistent" and m["late_rank"] == 1 and sorted(m["steps"]) == steps
    assert 1 in f["ranks"]
    for st in steps:
        assert close(m["wait_caused_ms_per_step"][str(st)], R.caused_ms(1, st), 0.02), f"step {st}"
    assert close(m["wait_caused_ms"], sum(R.caused_ms(1, st) for st in steps), 0.02)
    assert m["cause"] in ("host", "gpu", "input")
    assert m["excess"] and all(e["name"] and e["ms"] > 0 for e in m["excess"]), m["excess"]
    # the extra GEMMs add ~6 ms of GPU a step, a fraction of the ~35 ms rank 0 waits: not the cause
    ex = R.compute_excess_ms(1, steps)
    assert 3 < ex < 0.5 * statistics.mean(R.caused_ms(1, st) for st in steps)
    assert m["cause"] != "gpu"


# -- 6. persistent lateness with a planted stall on top -----------------------------------------

PLANTED = [
    ("kineto/ddp", TRUTH["ddp"]),
    ("kineto/ddp_long", TRUTH["ddp_long"]),
    ("nsys/nsys_ddp.sqlite", NSYS_DDP_TRUTH),
]


@pytest.mark.parametrize("rel,truth", PLANTED, ids=[p for p, _ in PLANTED])
def test_persistent_lateness_reported(rel, truth):
    """Who is late, by how much a step, and why: every persistent straggler finding names a rank
    that arrived last (independently) at each of its steps, with the wait it caused there."""
    path = trace_path(*rel.split("/"))
    R = ref(path)
    pers = stragglers(analyze(path), "persistent")
    # the stall's step and the one after it (its after-effect: the ranks realign) are not
    # evidence of a persistent late rank; it takes two other steps where it arrives last
    # (independent reference): ddp's rank 1 is last only in its stall step and the next
    others = [
        st
        for st, w in R.waits.items()
        if w.get("late_rank") == truth["slow_rank"] and st not in (truth["slow_step"], truth["slow_step"] + 1)
    ]
    if len(others) < 2:
        assert not pers, [f["title"] for f in pers]
        return
    assert pers, "no persistent straggler finding"
    for f in pers:
        m = f["metrics"]
        assert len(m["steps"]) >= 2
        for st in m["steps"]:
            last = R.waits.get(st, {}).get("late_rank")
            assert last == m["late_rank"], f"step {st}: rank {last} made the others wait (independent)"
            if st == truth["slow_step"]:
                continue  # the stall's step may carry the usual lateness or all of it
            assert close(m["wait_caused_ms_per_step"][str(st)], R.caused_ms(m["late_rank"], st), 0.02, 0.5), (
                f"step {st}: {m['wait_caused_ms_per_step'][str(st)]} ms, independent {R.caused_ms(m['late_rank'], st):.2f}"
            )
        assert m["cause"] in ("host", "gpu", "input") and m["excess"]
        if R.compute_excess_ms(m["late_rank"], m["steps"]) < 0.5 * statistics.mean(
            R.caused_ms(m["late_rank"], st) for st in m["steps"]
        ):
            assert m["cause"] != "gpu", "its GPU computes no longer than the others'"


@pytest.mark.parametrize("rel,truth", PLANTED, ids=[p for p, _ in PLANTED])
def test_planted_stall_called_out_first(rel, truth):
    """The planted one-step sleep is an episodic straggler finding at its step, with its excess
    over the rank's usual lateness about the planted time and the sleep named; it (or the finding
    holding it) leads the list."""
    path = trace_path(*rel.split("/"))
    R = ref(path)
    out = analyze(path)
    slow_rank, slow_step, slow_ms = truth["slow_rank"], truth["slow_step"], truth["slow_ms"]
    assert R.waits[slow_step]["late_rank"] == slow_rank  # reference
    epi = [
        f
        for f in stragglers(out, "episodic")
        if f["metrics"]["late_rank"] == slow_rank and slow_step in (f["metrics"]["steps"] or [f["step"]])
    ]
    assert len(epi) == 1, [f["title"] for f in stragglers(out)]
    f = epi[0]
    m = f["metrics"]
    assert m["steps"] == [slow_step] and f["step"] == slow_step
    assert 0 < m["excess_over_usual_ms"] and 0.5 * slow_ms <= m["excess_over_usual_ms"] <= 1.5 * slow_ms, m
    assert any("sleep" in e["name"].lower() for e in m["excess"][:3]), m["excess"]
    # the findings are ordered by what fixing them saves in the steps their cause acts in (the
    # what-if replay): the stall, a finding of its own, comes first
    assert out["findings"][0] is f, [x["title"] for x in out["findings"]]
    # the independent estimate: removing the sleep saves 20-50 ms (never more than it slept)
    assert f.get("saves_ms") is not None and 20 <= f["saves_ms"] <= slow_ms * 1.02, f.get("saves_ms")
    assert f["saves_steps"] == [slow_step] and f["saves_ms_in_steps"] <= slow_ms * 1.02


def test_nsys_ddp_warmup_step():
    path = trace_path("nsys", "nsys_ddp.sqlite")
    R = ref(path)
    out = analyze(path)
    for rank, mine in R.steps.items():
        rest = statistics.median(d["window_ns"] for s, d in mine.items() if s != 0)
        assert mine[0]["window_ns"] > 10 * rest  # reference: step 0 is ~500 ms, the others ~20 ms
        js = json_steps(out, rank)
        assert js[0]["warmup"] is True, f"rank {rank}"
        assert not any(s["warmup"] for st, s in js.items() if st != 0), f"rank {rank}"
    for f in all_findings(out["findings"]):
        if f["rule"] == "step_outlier":
            assert f["step"] != 0, f["title"]


# -- 7. bandwidth: NVLink vs no P2P -------------------------------------------------------------


def _allreduce(out: dict) -> dict:
    c = [x for x in out["collectives"] if "allreduce" in x["name"].lower().replace("_", "")]
    assert len(c) == 1, [x["name"] for x in out["collectives"]]
    return c[0]


def test_busbw_nvlink_beats_no_p2p():
    got, mine = {}, {}
    for name in ("ddp_clean", "ddp_nop2p"):
        path = trace_path("kineto", name)
        R = ref(path)
        bw = T.collective_bw(R.instances)[("0", "allreduce")]
        c = _allreduce(analyze(path))
        got[name], mine[name] = c["busbw_gbps"], bw["busbw_gbps"]
        assert c["count"] == bw["count"] == 56
        assert close(c["busbw_gbps"], bw["busbw_gbps"], 0.05), (
            f"{name}: busbw {c['busbw_gbps']:.1f}, independent {bw['busbw_gbps']:.1f}"
        )
        assert close(c["transfer_ms"], bw["transfer_ns"] / bw["count"] / MS, 0.05), f"{name}: mean transfer"
        assert close(c["busbw_gbps"], c["algbw_gbps"] * T.bus_factor("allreduce", 2), 0.01)
        for rank in R.ranks:
            w = sum(i.wait(rank) for i in R.instances) / len(R.instances) / MS
            assert close(c["wait_ms"][str(rank)], w, 0.05, 0.01), f"{name}: rank {rank} mean wait"
    assert mine["ddp_clean"] > 2 * mine["ddp_nop2p"]  # reference: ~243 vs ~26 GB/s
    assert got["ddp_clean"] > got["ddp_nop2p"]


# -- 8. JSON never crashes ----------------------------------------------------------------------


def _one_line_refusal(p) -> bool:
    return p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


NEVER_CRASH = [trace_path(*p.split("/")) for p in ALL_TRACES + RANK_FILES] + [
    os.path.join(COMPAT, p) for p in COMPAT_FILES
]


@pytest.fixture(scope="module")
def batch() -> dict:
    """`info PATH --json` for every input below, and `analyze PATH --json` for the single rank
    files (no other test analyses one rank of a job), in one child (tests/cli_batch.py): a child
    per command spent most of its time starting. The other analyses are run_cli_once's, which
    the tests above and other modules share, each a `python -m gpuviewer` of its own."""
    commands = [["info", p, "--json"] for p in NEVER_CRASH]
    commands += [["analyze", trace_path(*p.split("/")), "--json"] for p in RANK_FILES]
    return {tuple(c): r for c, r in zip(commands, run_cli_batch(commands))}


@pytest.mark.parametrize("path", NEVER_CRASH, ids=ALL_TRACES + RANK_FILES + ["compat/" + p for p in COMPAT_FILES])
def test_json_never_crashes(path, batch):
    info = batch["info", path, "--json"]
    analysis = batch.get(("analyze", path, "--json"))
    assert "Traceback" not in info.stderr, info.stderr[-3000:]
    if _one_line_refusal(info):  # a file it cannot read, said in one line: allowed
        a = analysis or run_cli_once("analyze", path, "--json")
        assert _one_line_refusal(a) or a.returncode == 0, f"analyze exit {a.returncode}: {a.stderr[-3000:]}"
        if a.returncode == 0:
            _strict_json(a.stdout)
        return
    assert info.returncode == 0, f"info exit {info.returncode}: {info.stderr[-3000:]}"
    _strict_json(info.stdout)
    if path in _out:
        return
    a = analysis or run_cli_once("analyze", path, "--json")
    assert a.returncode == 0 and "Traceback" not in a.stderr, f"analyze exit {a.returncode}: {a.stderr[-3000:]}"
    _out[path] = _strict_json(a.stdout)


# -- 9. findings say what their numbers say -----------------------------------------------------

TEXT_TRACES = [p for p in MULTI_RANK if p not in NO_REFERENCE]


def _numbers(x):
    if isinstance(x, bool) or x is None:
        return []
    if isinstance(x, (int, float)):
        return [float(x)]
    if isinstance(x, dict):
        return [v for y in x.values() for v in _numbers(y)]
    if isinstance(x, list):
        return [v for y in x for v in _numbers(y)]
    return []


def _candidates(f: dict) -> list[float]:
    """The numbers a finding's title may quote: its metrics and those of the findings it holds
    (a root cause's title may summarise its children), plus mean / median / min / max of the
    per-step ms and the total per step."""
    c = []
    for x in all_findings([f]):
        m = x["metrics"]
        c += _numbers(m)
        per = _numbers(m.get("wait_caused_ms_per_step") or {})
        if per:
            c += [statistics.mean(per), statistics.median(per), min(per), max(per)]
        if m.get("steps") and isinstance(m.get("wait_caused_ms"), (int, float)):
            c.append(m["wait_caused_ms"] / len(m["steps"]))
    return c


_MS = re.compile(r"(\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(\d+(?:\.\d+)?))?\s*ms\b")


@pytest.mark.parametrize("rel", TEXT_TRACES)
def test_straggler_text_matches_numbers(rel):
    """The late rank the title names is metrics.late_rank; every "N ms" in the title is one of the
    numbers of the finding (or of the findings it holds), as rounded there."""
    out = analyze(trace_path(*rel.split("/")))
    for f in stragglers(out):
        title, m = f["title"], f["metrics"]
        named = [int(x) for x in re.findall(r"\brank (\d+)", title, re.I)]
        assert m["late_rank"] in named, title
        for w in re.finditer(r"\b(late|last)\b", title, re.I):
            clause = re.split(r"[.;:()]", title[: w.start()])[-1]
            near = re.findall(r"\brank (\d+)", clause, re.I)
            if near:
                assert int(near[-1]) == m["late_rank"], f"{title!r}: rank {near[-1]} called {w.group(1)}"
        # a signed metric is said by its word ("shrank 14.3 ms a step" for -14.3): match magnitudes
        cands = [abs(v) for v in _candidates(f)]
        for mt in _MS.finditer(title):
            for s in filter(None, mt.groups()):
                dec = len(s.split(".")[1]) if "." in s else 0
                assert any(abs(v - float(s)) <= 0.5 * 10**-dec + 1e-9 for v in cands), (
                    f"{title!r}: {s} ms is none of {sorted(round(v, 3) for v in cands)}"
                )


@pytest.mark.parametrize("rel", MULTI_RANK)
def test_findings_ranked_by_impact_and_not_repeated_per_rank(rel):
    out = analyze(trace_path(*rel.split("/")))
    top = out["findings"]
    impacts = [f["impact_ms"] for f in top]
    assert all(isinstance(x, (int, float)) and x >= 0 for x in impacts)

    def best(f):  # the most a finding or a cause nested under it saves in the steps it acts in
        got = [x for x in [f.get("saves_ms_in_steps"), *(best(c) for c in f["children"])] if x is not None]
        return max(got) if got else None

    def pct(f):  # the same, as a share of the steps it acts in
        got = [x for x in [f.get("saves_pct_in_steps"), *(pct(c) for c in f["children"])] if x is not None]
        return max(got) if got else 0.0

    # savings of 2% of a step or more, then findings without a what-if rated medium or high by
    # their evidence, then the low savings, then the low findings without one, then the last low
    # savings that are under 1% of a step (nothing a user would measure), then the notes
    # (finding_order.minor_last)
    tail = 0  # the low savings under 1% at the end of the measured ones
    for f in reversed([f for f in top if best(f) is not None]):
        if f["severity"] != "low" or pct(f) >= 0.01:
            break
        tail += 1
    tiny = [
        id(f) for f in [f for f in top if best(f) is not None][len([f for f in top if best(f) is not None]) - tail :]
    ]
    notes = ("thin_data", "warmup", "all_to_all")
    group = [
        (0 if best(f) is not None else 1)
        if f["severity"] != "low"
        else (4 if id(f) in tiny else 2)
        if best(f) is not None
        else (5 if f["rule"] in notes else 3)
        for f in top
    ]
    assert group == sorted(group)
    # ranked by what fixing them saves, each on top of the fixes above it: among the savings of 2%
    # of a step or more strictly; among the low ones a later saving may be larger, where it gains
    # from a fix above it (two fixes that each save little alone: ddp_nop2p's 0.04 and 0.11 ms)
    saves = [best(f) for f, k in zip(top, group) if k == 0]
    assert saves == sorted(saves, reverse=True)
    low = [best(f) for f, k in zip(top, group) if k in (2, 4)]
    if low:
        assert max(low) <= min(saves, default=math.inf)
        assert all(f.get("saves_after_above") for f, k in zip(top, group) if k in (2, 4) and best(f) > low[0])
    for g in (1, 3):  # those without a what-if by the time lost
        rest = [f["impact_ms"] for f, k in zip(top, group) if k == g]
        assert rest == sorted(rest, reverse=True)
    for f in all_findings(top):
        assert f["children"] is not None and isinstance(f["ranks"], list)
    seen = {}
    for f in top:
        shape = (f["rule"], re.sub(r"\d+(?:\.\d+)?", "#", f["title"]), f["step"])
        assert shape not in seen, f"one finding per rank: {seen[shape]!r} and {f['title']!r}"
        seen[shape] = f["title"]


def test_a_finding_on_many_ranks_names_them_as_ranges():
    """Merged findings name their ranks; runs of three or more are ranges, so a finding on all
    64 ranks is one short title, and every rank stays in `ranks`."""
    from gpuviewer.analysis.merge import merge_ranks, rank_list

    assert rank_list([0, 1]) == "0 and 1"
    assert rank_list(list(range(64))) == "0–63"
    assert rank_list([0, 2, 3, 4, 6, 9, 10, 11, 12]) == "0, 2–4, 6 and 9–12"
    found = [
        {
            "rule": "low_gpu_utilization",
            "severity": "medium",
            "step": None,
            "ranks": [r],
            "title": f"Rank {r}: GPU busy 40% of the time",
            "impact_ms": float(r),
            "start_ns": r,
            "end_ns": r + 10,
            "advice": "",
            "metrics": {},
        }
        for r in range(16)
    ]
    (m,) = merge_ranks(found)
    assert m["title"].startswith("Ranks 0–15: GPU busy 40%") and "(rank 15, the worst)" in m["title"]
    assert sorted(m["ranks"]) == list(range(16)) and m["ranks"][0] == 15
