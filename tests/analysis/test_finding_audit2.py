"""An expert's audit of the finding sentences the first audit (test_finding_audit.py) left out
(issue 24): the pipeline's bubble and launch-bound sentences, the launch-bound sentence, the
per-rank utilization lines and "bound by:", and the efficiency block (model work, MFU). Each
figure is defined as a user reads it and computed from the raw files (tests/analysis_truth.py and
the Kineto JSON read here: json, gzip and numpy, nothing from gpuviewer); the analysis is the real
CLI's, once per trace."""

from __future__ import annotations

import collections
import functools
import json
import re
import statistics

import analysis_truth as T
import launch_truth as LT
import numpy as np
import pytest
from conftest import run_cli_once, trace_path
from kineto_truth import load_json

H200_BF16_DENSE = 989.4  # TFLOP/s, NVIDIA's H200 SXM datasheet (1,979 with sparsity)


def analyze(*parts: str) -> dict:
    p = run_cli_once("analyze", trace_path(*parts), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def analyze_text(*parts: str) -> str:
    p = run_cli_once("analyze", trace_path(*parts))
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def flat(findings: list[dict]):
    for f in findings:
        yield f
        yield from flat(f["children"])


def kineto_files(*parts: str) -> list[str]:
    return T.kineto_files(trace_path(*parts))


# -- independent figures ------------------------------------------------------------------------


def _clip(u, a: int, b: int):
    s, e = np.clip(u[0], a, b), np.clip(u[1], a, b)
    keep = e > s
    return s[keep], e[keep]


def measured_steps(ranks: list[T.Rank]) -> dict[int, tuple[list[dict], int]]:
    """Each rank's steps (analysis_truth.step_breakdown), the first left out when it is over twice
    the median of the others on every rank (warm-up); and when the measured steps' time begins:
    at the first one's host start (its GPU idles while its host prepares it), not before the
    warm-up step's GPU work ended, not after the step's first op."""
    bd = {r.rank: T.step_breakdown(r) for r in ranks}
    warm = all(
        (len(v) >= 3 and v[0]["window_ns"] > 2 * statistics.median(x["window_ns"] for x in v[1:]))
        or (len(v) >= 2 and _backlog_ns(r, v[0]) >= 0.1 * v[0]["window_ns"])
        for r, v in ((r, bd[r.rank]) for r in ranks)
    )
    out = {}
    for k, v in bd.items():
        st = v[1:] if warm else v
        begin = max(st[0]["host_start_ns"], v[0]["end_ns"]) if warm else st[0]["host_start_ns"]
        out[k] = (st, min(begin, st[0]["start_ns"]))
    return out


def _backlog_ns(r: T.Rank, st: dict) -> int:
    """Of a step's GPU window: the time covered by ops launched before the capture (no launch on
    record, ahead of their stream's first op with one); 10% of it or more makes the first step
    warm-up (its figures hold the step before's work)."""
    pre = np.zeros(len(r.start), bool)
    for s in np.unique(r.stream[r.linked]).tolist():
        m = r.stream == s
        pre |= m & ~r.linked & (r.start < r.start[m & r.linked].min())
    lo, hi = st["start_ns"], st["end_ns"]
    return int(T.length(_clip(T.union(r.start[pre], r.end[pre]), lo, hi))) if pre.any() else 0


def in_measured_steps(r: T.Rank, steps: list[dict]) -> np.ndarray:
    """Per GPU op of the rank: does it start inside one of its measured steps' GPU windows (the
    efficiency block's families are those kernels')?"""
    keep = np.zeros(len(r.start), bool)
    for s in steps:
        keep |= (r.start >= s["start_ns"]) & (r.start < s["end_ns"])
    return keep


@functools.cache  # each trace read once per module (several tests ask); never mutated
def load(parts: tuple[str, ...]) -> list[T.Rank]:
    return T.load(trace_path(*parts))


@functools.cache
def rank_figures(parts: tuple[str, ...]) -> dict[int, dict]:
    """Per rank, over its measured steps' GPU time (the first step's first op to the last step's
    last op, and the GPU's idle between the steps' beginning, measured_steps, and that first op;
    work still running there from before belongs to no measured step): compute kernels, NCCL waiting (own arrival to the last rank's, at most the own
    kernel), NCCL transfer (the rest of the NCCL time), copies, idle, as shares of that time; and
    per step the launch gaps: gaps under 100 µs between stretches of non-NCCL work in the step's
    window that end at an op launched after the GPU went idle (it waited for that launch)."""
    ranks = load(parts)
    inst = T.match(ranks)
    steps = measured_steps(ranks)
    out = {}
    for r in ranks:
        st, a = steps[r.rank]
        b = st[-1]["end_ns"]
        k = r.kind
        comp = _clip(T.union(r.start[k == T.COMPUTE], r.end[k == T.COMPUTE]), a, b)
        comm = _clip(T.union(r.start[k == T.COMM], r.end[k == T.COMM]), a, b)
        copies = _clip(T.union(r.start[k >= T.MEMCPY], r.end[k >= T.MEMCPY]), a, b)
        busy = _clip(T.union(r.start, r.end), a, b)
        ws, we = [], []
        for ins in inst:
            if r.rank in ins.ranks:
                j = ins.ranks.index(r.rank)
                ws.append(ins.starts[j])
                we.append(min(ins.last, ins.ends[j]))
        wait = _clip(T.union(ws, we), a, b)
        w0 = st[0]["start_ns"]
        idle_pre = (w0 - a) - T.length(_clip(T.union(r.start, r.end), a, w0))
        a = w0
        comp, comm, copies, busy, wait = (_clip(u, a, b) for u in (comp, comm, copies, busy, wait))
        span = b - a + idle_pre
        nccl = T.union(r.start[k == T.COMM], r.end[k == T.COMM])
        per_step = []
        for s in st:
            w0, w1 = s["start_ns"], s["end_ns"]
            us, ue = _clip(T.union(r.start[k != T.COMM], r.end[k != T.COMM]), w0, w1)
            short = LT.rank_launch_gaps(r, us, ue)
            long_ = LT.rank_launch_gaps(r, us, ue, longer=True)
            mine = (r.step == s["step"]) & (k == T.COMPUTE)
            per_step.append(
                {
                    "window": s["window_ns"],
                    "compute": s["compute_ns"],
                    "gap": int(short.sum()),
                    "long": int(long_.sum()),
                    "host": LT.rank_host_gaps(r, us, ue, r.syncs),
                    # the short gaps' time NCCL kernels ran in
                    "gap_nccl": T.intersect_length(LT.rank_waited_gaps(r, us, ue)[:2], nccl),
                    # ...and the longer gaps' (df_index_resolver: a third of them; an audit's finding)
                    "long_nccl": T.intersect_length(LT.rank_waited_gaps(r, us, ue, longer=True)[:2], nccl),
                    "gaps": len(short),
                    "fed": int((ue - us).sum() + short.sum()),
                    "kernel_durs": (r.end - r.start)[mine],
                }
            )
        out[r.rank] = {
            "compute": T.length(comp) / span,
            "wait": T.length(wait) / span,
            "transfer": (T.length(comm) - T.intersect_length(comm, wait)) / span,
            "copies": T.length(copies) / span,
            "idle": (span - T.length(busy)) / span,
            "time": int(span),
            "steps": per_step,
        }
    return out


def _pct(text: str) -> float:
    return int(text) / 100


# -- 1. the per-rank lines -------------------------------------------------------------------------

_RANK_LINE = re.compile(
    r"^rank (\d+): GPU utilization (\d+)% \(compute\); NCCL waiting (\d+)%, NCCL transfer (\d+)%, "
    r"copies (\d+)%, idle (\d+)%",
    re.M,
)


@pytest.mark.parametrize(
    "parts",
    [
        ("kineto", "pp"),
        ("kineto", "pp_gpu"),
        ("kineto", "fsdp"),
        ("kineto", "tp"),
        ("kineto", "gpu_straggler"),
        ("whatif", "stall_on.json.gz"),
    ],
)
def test_the_rank_lines_say_what_filled_the_steps_gpu_time(parts):
    """'rank 0: GPU utilization 14% (compute); NCCL waiting 66%, NCCL transfer 0%, copies 0%, idle
    19%': each share of the measured steps' GPU time (rank_figures), within 1.5 points. Compute may run beside NCCL (fsdp overlaps them): the shares add up to
    at least 100% less rounding, never less; where they add up to more (gpu_straggler's rank 0:
    119%, its all-reduce under the backward) the line says so, with the printed figures' sum."""
    want = rank_figures(parts)
    lines = {int(m.group(1)): m for m in _RANK_LINE.finditer(analyze_text(*parts))}
    assert set(lines) == set(want), (sorted(lines), sorted(want))
    for rank, m in lines.items():
        said = dict(zip(("compute", "wait", "transfer", "copies", "idle"), map(_pct, m.groups()[1:])))
        for k, v in said.items():
            assert abs(v - want[rank][k]) <= 0.015, (parts, rank, k, v, want[rank][k])
        assert sum(said.values()) >= 0.97, (parts, rank, said)
        total = round(100 * sum(said.values()))
        told = f"(they add up to {total}%: work ran on two streams at once)"
        excess = sum(want[rank][k] for k in said) - 1
        line = m.string[m.start() : m.string.index("\n", m.start())]
        # 101% is said too where half a percent of the time or more held two kinds of work
        # (con_kernel's 100.84%; an audit); away from that edge, by the raw file's own figures
        if (total >= 102 and excess >= 0.015) or (total == 101 and excess >= 0.0055):
            assert told in line, (parts, rank, total)
        elif total <= 100 or (total == 101 and excess < 0.0045):
            assert "add up to" not in line, (parts, rank, excess)


_SYNC = re.compile(r"(Stream|Device|Event|Ctx)Synchroni[sz]e|^cudaMemcpy(_v\d+)?$", re.IGNORECASE)
_HOST = re.compile(
    r"^rank (\d+): .*host: framework ops (\d+)%"
    r"(?: \(including [^()]*\))?, launch calls (\d+)%, "
    r"(?:blocked on a full launch queue (\d+)%, )?syncs and blocking copies (\d+)%, no op recorded (\d+)%",
    re.M,
)


def host_shares(path: str) -> dict[str, float]:
    """One rank's ProfilerSteps on the threads that launch its GPU work (a CUDA call whose
    correlation id a GPU op carries): syncs (blocking synchronize calls and plain cudaMemcpy),
    launch calls made on a full launch queue (T.queue_full_launches), launch calls (the other
    CUDA calls, outside both), framework ops (CPU ops, annotations and
    Python functions, the step's own range left out, outside both), and the rest (nothing on
    record), as shares of the steps' time; exclusive by lengths of unions."""
    events, _ = load_json(path)
    xs = [e for e in events if e.get("ph") == "X" and "dur" in e]
    gpu = {(e.get("args") or {}).get("correlation") for e in xs if e.get("cat") in T.GPU_CATS}
    api = [e for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    threads = {(e["pid"], e["tid"]) for e in api if (e.get("args") or {}).get("correlation") in gpu}
    mine = [e for e in xs if (e["pid"], e["tid"]) in threads]
    sync = [e for e in mine if e.get("cat") in ("cuda_runtime", "cuda_driver") and _SYNC.search(e["name"])]
    full = {id(e) for e in T.queue_full_launches(xs)}
    queue = [e for e in mine if id(e) in full and not _SYNC.search(e["name"])]
    calls = [
        e
        for e in mine
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and not _SYNC.search(e["name"]) and id(e) not in full
    ]
    ops = [
        e
        for e in mine
        if e.get("cat") in ("cpu_op", "user_annotation", "python_function")
        and not e["name"].startswith("ProfilerStep#")
    ]
    steps = [
        (T._ns(e["ts"]), T._ns(e["ts"]) + T._ns(e["dur"]))
        for e in xs
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]

    def covered(es: list, a: int, b: int) -> int:
        return T.length(
            _clip(T.union([T._ns(e["ts"]) for e in es], [T._ns(e["ts"]) + T._ns(e["dur"]) for e in es]), a, b)
        )

    tot = collections.Counter()
    for a, b in steps:
        s, sq = covered(sync, a, b), covered(sync + queue, a, b)
        sc, everything = covered(sync + queue + calls, a, b), covered(sync + queue + calls + ops, a, b)
        tot["sync"] += s
        tot["queue"] += sq - s
        tot["launch"] += sc - sq
        tot["framework"] += everything - sc
        tot["none"] += (b - a) - everything
    w = sum(tot.values())
    return {k: v / w for k, v in tot.items()}


@pytest.mark.parametrize("parts", [("kineto", "pp_gpu"), ("kineto", "fsdp"), ("whatif", "stall_on.json.gz")])
def test_the_rank_lines_split_the_host_steps(parts):
    """'host: framework ops 74%, launch calls 7%, syncs 19%, no op recorded 0%' (fsdp rank 0):
    host_shares of the rank's file, within 1 point (these traces have no warm-up step left out)."""
    a = analyze(*parts)
    assert not any(s.get("warmup") for s in a["steps"])
    lines = {int(m.group(1)): m for m in _HOST.finditer(analyze_text(*parts))}
    files = kineto_files(*parts)
    assert len(lines) == len(files)
    for i, path in enumerate(files):
        want = host_shares(path)
        m = lines[T.kineto_rank(path, i).rank]
        said = dict(zip(("framework", "launch", "queue", "sync", "none"), [_pct(g or "0") for g in m.groups()[1:]]))
        assert (m.group(4) is None) == (want["queue"] < 0.005), (parts, path, want["queue"])
        for k, v in said.items():
            assert abs(v - want[k]) <= 0.01, (parts, path, k, v, want[k])


# -- 2. the pipeline's sentences -----------------------------------------------------------------------


def _sends_per_step(path: str) -> list[int]:
    """c10d's 'nccl:send A->B' host ops in each ProfilerStep of one rank's file."""
    events, _ = load_json(path)
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and str(e["name"]).startswith("ProfilerStep#")
    ]
    sends = [
        e["ts"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and re.match(r"nccl:send \d+->\d+", str(e["name"]))
    ]
    return [sum(1 for t in sends if a <= t < b) for a, b in steps]


def _bubbles(fig: dict) -> list[float]:
    """Per stage: the mean over steps of the window's share neither computing nor in launch gaps
    nor in longer gaps waiting for a launch (up to its return, less the host's sync calls)."""
    return [
        float(
            np.mean([max(0, s["window"] - s["compute"] - s["gap"] - s["host"]) / s["window"] for s in fig[r]["steps"]])
        )
        for r in sorted(fig)
    ]


def test_pp_gpu_bubble_sentence():
    """pp_gpu: 'Pipeline of 2 stages, 8 micro-batches: bubble stage 0 20%, stage 1 11% (ideal
    11.1%); rank 0 waits for the heavier rank 1'. Micro-batches: the sends each stage issues a step
    (8 on each); ideal (p-1)/(m+p-1) = 1/9; a stage's bubble: its step window not computing and
    not in launch gaps, averaged over the steps; 'waits for the heavier rank 1': rank 1 computes
    more in every step, and rank 0's NCCL kernels wait longer for rank 1 than rank 1's for rank 0
    (at the matched send/recv kernels)."""
    files = kineto_files("kineto", "pp_gpu")
    sends = [statistics.median(_sends_per_step(f)) for f in files]
    m = int(min(sends))
    fig = rank_figures(("kineto", "pp_gpu"))
    bub = _bubbles(fig)
    f = next(f for f in flat(analyze("kineto", "pp_gpu")["findings"]) if f["rule"] == "pipeline_bubble")
    said = re.search(
        r"Pipeline of 2 stages, (\d+) micro-batches: bubble stage 0 (\d+)%, stage 1 (\d+)% \(ideal ([\d.]+)%\)"
        r"; rank (\d) waits for the heavier rank (\d)",
        f["title"],
    )
    assert said, f["title"]
    assert int(said.group(1)) == m == 8
    assert abs(_pct(said.group(2)) - bub[0]) <= 0.006 and abs(_pct(said.group(3)) - bub[1]) <= 0.006, (f["title"], bub)
    assert float(said.group(4)) == round(100 * 1 / (m + 1), 1)
    waiter, heavy = int(said.group(5)), int(said.group(6))
    assert all(a["compute"] > b["compute"] for a, b in zip(fig[heavy]["steps"], fig[waiter]["steps"]))
    assert fig[waiter]["wait"] > fig[heavy]["wait"], (fig[waiter]["wait"], fig[heavy]["wait"])


def test_pp_launch_bound_pipeline_sentence():
    """pp: 'Pipeline of 2 stages, 8 micro-batches, launch-bound: stage 1 (rank 1), the busiest
    stage (compute and launch gaps), idles 57% of its step in gaps under 100 µs that end at a launch
    (2,325 kernels a step, median 5.6 µs) and 18% more in longer gaps waiting for a launch while its
    host was not in a sync; the rest, not computing and not waiting for its host: stage 0 71% (67%
    waiting in send/recv for the other stage), stage 1 9% (...)'. The busiest stage has the most compute + launch gaps a step; its launch gaps
    over its windows (mean of the steps); its kernels a step and the median of the per-step median
    durations; the longer gaps' share up to the launch's return, less the host's syncs (the audit:
    stage 1's 27% before counted 18 points of 0.1-1 ms gaps its host was late for)."""
    fig = rank_figures(("kineto", "pp"))
    busy = {r: np.mean([s["compute"] + s["gap"] for s in fig[r]["steps"]]) for r in fig}
    slow = max(busy, key=busy.__getitem__)
    st = fig[slow]["steps"]
    f = next(f for f in analyze("kineto", "pp")["findings"] if f["rule"] == "pipeline_launch_bound")
    said = re.search(
        r"launch-bound: stage (\d) \(rank (\d)\), the busiest stage \(compute and launch gaps\), idles (\d+)% of its "
        r"step in gaps under 100 µs that end at a launch \(([\d,]+) kernels a step, median ([\d.]+) µs\) and (\d+)% "
        r"more in longer gaps waiting for a launch while its host was not in a sync; the rest, not computing and not "
        r"waiting for its host: stage 0 (\d+)%(?: \(\d+% waiting in send/recv for the other stage[^)]*\))?, stage 1 "
        r"(\d+)%(?: \(\d+% waiting in send/recv for the other stage[^)]*\))? \(the schedule's own bubble, ideally 11.1%",
        f["title"],
    )
    assert said, f["title"]
    assert int(said.group(2)) == slow
    assert abs(_pct(said.group(3)) - np.mean([s["gap"] / s["window"] for s in st])) <= 0.006
    assert int(said.group(4).replace(",", "")) == round(np.mean([len(s["kernel_durs"]) for s in st]))
    assert abs(float(said.group(5)) - statistics.median(np.median(s["kernel_durs"]) / 1e3 for s in st)) <= 0.06
    assert abs(_pct(said.group(6)) - np.mean([s["host"] / s["window"] for s in st])) <= 0.006
    bub = _bubbles(fig)
    assert abs(_pct(said.group(7)) - bub[0]) <= 0.006 and abs(_pct(said.group(8)) - bub[1]) <= 0.006, bub


# -- 3. the launch-bound sentence ----------------------------------------------------------------------

_LAUNCH = re.compile(
    r"launch-bound — ([\d,]+) kernels a step of ([\d.]+) µs on average \(median ([\d.]+) µs\); (?:the GPU|its work "
    r"other than NCCL's) waits for the next launch ([\d,]+) times a step, ([\d.]+) µs on average \(gaps under 100 µs"
    r"(?:; NCCL kernels ran in (?P<nccl>\d+)% of that time)?\), ([\d.]+) ms a step, "
    r"(\d+)% of the time it spends running (?:kernels|that work) or waiting for the next launch"
    r"(?:, and ([\d.]+) ms a step more in longer gaps \(100 µs or more(?:; NCCL kernels ran in (?P<long_nccl>\d+)% "
    r"of that time)?\) that end at a launch)?; "
    r"compute (\d+)% of its time(?: \(rank (\d+), the worst\))?"
)


@pytest.mark.parametrize(
    "parts",
    [
        ("kineto", "pp"),
        ("whatif", "launch_eager.json.gz"),
        ("kineto", "ddp_clean"),
        ("kineto", "dataloader_stall.json.gz"),
        ("kineto", "ddp_long"),
    ],
)
def test_the_launch_bound_sentence(parts):
    """'2,325 kernels a step of 7.6 µs on average (median 5.6 µs); the GPU waits for the next launch
    2,103 times a step, 25.7 µs on average (gaps under 100 µs), 62.3 ms a step, 78% of the time it
    spends running kernels or waiting for the next launch; compute 16% of its time':
    of the rank named (or the only one), over its measured steps: kernels a step, their mean and
    (median of the steps') median duration, the launch gaps a step (gaps under 100 µs that end at
    an op launched after the GPU went idle), their mean and total a step, their share of the time
    running work or in launch gaps and the compute share of the GPU time."""
    f = next(f for f in flat(analyze(*parts)["findings"]) if f["rule"] == "launch_bound")
    m = _LAUNCH.search(f["title"])
    assert m, f["title"]
    fig = rank_figures(parts)
    rank = int(m.group(12)) if m.group(12) else f["ranks"][0]
    st = fig[rank]["steps"]
    durs = np.concatenate([s["kernel_durs"] for s in st])
    gap = sum(s["gap"] for s in st)
    want = {
        "kernels": round(len(durs) / len(st)),
        "mean": durs.mean() / 1e3,
        "median": statistics.median(np.median(s["kernel_durs"]) / 1e3 for s in st),
        "gaps": round(sum(s["gaps"] for s in st) / len(st)),
        "sep": gap / sum(s["gaps"] for s in st) / 1e3,
        "idle_ms": gap / len(st) / 1e6,
        "share": gap / sum(s["fed"] for s in st),
        "compute": fig[rank]["compute"],
    }
    assert int(m.group(1).replace(",", "")) == want["kernels"], (f["title"], want)
    assert abs(int(m.group(4).replace(",", "")) - want["gaps"]) <= 1, (f["title"], want)
    for i, k, tol in ((2, "mean", 0.06), (3, "median", 0.06), (5, "sep", 0.06), (7, "idle_ms", 0.06)):
        assert abs(float(m.group(i)) - want[k]) <= tol, (k, f["title"], want)
    assert abs(_pct(m.group(8)) - want["share"]) <= 0.006, (f["title"], want)
    assert abs(_pct(m.group(11)) - want["compute"]) <= 0.015, (f["title"], want)
    # NCCL kernels running in those gaps (DDP's all-reduces): the GPU is not idle there, said so
    nccl = sum(s["gap_nccl"] for s in st) / max(gap, 1)
    if m.group("nccl"):
        assert abs(_pct(m.group("nccl")) - nccl) <= 0.006 and "its work other than NCCL's waits" in f["title"]
    else:
        assert f"{nccl:.0%}" == "0%" and "the GPU waits" in f["title"], (f["title"], nccl)
    # the waits for a launch of 100 µs or more, said where they are a real part (its replay's
    # saving shortens them too: dataloader_stall said 9.8 ms a step of waits and saved 17.8)
    long_ms = sum(s["long"] for s in st) / len(st) / 1e6
    if m.group(9):
        assert abs(float(m.group(9)) - long_ms) <= 0.06, (f["title"], long_ms)
        long_nccl = sum(s["long_nccl"] for s in st) / max(1, sum(s["long"] for s in st))
        if m.group("long_nccl"):
            assert abs(_pct(m.group("long_nccl")) - long_nccl) <= 0.006, (f["title"], long_nccl)
        else:
            assert f"{long_nccl:.0%}" == "0%", (f["title"], long_nccl)
    else:
        assert long_ms < 0.1 or long_ms < 0.05 * want["idle_ms"], (f["title"], long_ms)


# -- 4. bound by ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "parts", [("kineto", "pp_gpu"), ("kineto", "ddp"), ("kineto", "tp"), ("kineto", "step_outlier.json.gz")]
)
def test_bound_by_is_where_the_critical_paths_spent_most(parts):
    """'bound by: rank 1 GPU compute' names the rank and resource the measured steps' critical
    paths spent most time on (their segments summed per rank and resource), and each path adds up
    to its step within 2%."""
    a = analyze(*parts)
    tot: collections.Counter = collections.Counter()
    for s in a["steps"]:
        if s.get("warmup"):
            continue
        cp = s["critical_path"]
        length = sum(x["end_ns"] - x["start_ns"] for x in cp)
        assert abs(length - (s["end_ns"] - s["start_ns"])) <= 0.02 * (s["end_ns"] - s["start_ns"]), s["step"]
        for x in cp:
            tot[(x["rank"], x["resource"])] += x["end_ns"] - x["start_ns"]
    per_res: collections.Counter = collections.Counter()
    for (_, res), v in tot.items():
        per_res[res] += v
    resource = per_res.most_common(1)[0][0]
    rank, held = max(((r, v) for (r, res), v in tot.items() if res == resource), key=lambda x: x[1])
    words = {"host": "host loop", "gpu": "GPU compute", "copy": "copies", "comm": "link", "idle": "idle"}[resource]
    assert words in a["bound_by"], (a["bound_by"], tot.most_common(3))
    if a["bound_by"].startswith("rank "):  # a rank is named only where it holds most of that resource's time
        assert a["bound_by"].startswith(f"rank {rank} ") and held > 0.5 * per_res[resource], (a["bound_by"], tot)


# -- 5. the efficiency block ------------------------------------------------------------------------


def _true(v) -> bool:
    return str(v).strip().lower() == "true"


def _op_flops(name: str, dims, concrete) -> float | None:
    """The model FLOPs of one recorded op from its Input Dims: a matmul 2·M·N·K (mm, addmm, bmm,
    baddbmm: the ops that run the GEMMs; linear and matmul hold them), attention QK^T and PV
    4·B·H·L·S·E, halved when causal, its backward 2.5 times that (FlashAttention's count)."""
    if not dims:
        return None
    if name == "aten::mm":
        return 2 * dims[0][0] * dims[0][1] * dims[1][1]
    if name == "aten::addmm":
        return 2 * dims[1][0] * dims[1][1] * dims[2][1]
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (dims[0], dims[1]) if name == "aten::bmm" else (dims[1], dims[2])
        return 2 * a[0] * a[1] * a[2] * b[2]
    m = re.fullmatch(r"aten::_scaled_dot_product_(flash|efficient|cudnn)_attention(_backward)?", name)
    if not m:
        return None
    bwd = bool(m.group(2))
    q, k = (dims[1], dims[2]) if bwd else (dims[0], dims[1])
    # is_causal's position in each op's schema
    at = {"flash": (4, 10), "efficient": (5, 11), "cudnn": (6, 14)}[m.group(1)][int(bwd)]
    f = 4 * q[0] * q[1] * q[2] * k[2] * q[3]
    f = f / 2 if len(concrete) > at and _true(concrete[at]) else f
    return 2.5 * f if bwd else f


def model_work(path: str) -> dict[int, tuple[float, int]]:
    """Per ProfilerStep of one rank's file: (model FLOPs of the ops that start in it, its length ns)."""
    events, _ = load_json(path)
    xs = [e for e in events if e.get("ph") == "X"]
    steps = {
        int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"])
        for e in xs
        if e.get("cat") == "user_annotation" and str(e["name"]).startswith("ProfilerStep#")
    }
    flops = dict.fromkeys(steps, 0.0)
    for e in xs:
        if e.get("cat") != "cpu_op":
            continue
        a = e.get("args") or {}
        f = _op_flops(str(e["name"]), a.get("Input Dims"), a.get("Concrete Inputs") or [])
        if f:
            for n, (t0, t1) in steps.items():
                if t0 <= e["ts"] < t1:
                    flops[n] += f
    return {n: (flops[n], T._ns(t1) - T._ns(t0)) for n, (t0, t1) in steps.items()}


_STEP_LINE = re.compile(
    r"^  rank (\d+) step (\d+): ([\d.]+) TFLOP of matmul/conv/attention work in ([\d.]+) ms of GPU time = ([\d.]+) TFLOP/s, MFU ([\d.]+)%$",
    re.M,
)


@pytest.mark.parametrize(
    "parts",
    [
        ("whatif", "stall_on.json.gz"),
        ("kineto", "dataloader_stall.json.gz"),
        ("kineto", "pp_gpu"),
        ("kineto", "tp"),
        ("kineto", "ddp"),
    ],
)
def test_model_work_and_mfu_per_step(parts):
    """'rank 0 step 2: 0.40 TFLOP of matmul/conv/attention work in 29.7 ms = 13.3 TFLOP/s, MFU 1.3%': the TFLOP are
    the step's matmuls and attention from their recorded shapes (model_work) within 0.5%; MFU is
    that work over the step's time at the H200's bf16 dense peak (989.4 TFLOP/s). The step's time
    is the wall time the step took: stall_on's host sleeps 25 ms before each step's 4 ms of GPU
    work, and its MFU was printed over the 4 ms (9.6-10.4% for a run at 1.3%). On one rank the
    step's time is its ProfilerStep's (within 2%); where ranks wait for each other a rank's GPU
    runs behind its host, so there the steps' times add up to the rank's measured GPU time (the
    denominator of its utilization line, rank_figures), within 2%."""
    text = analyze_text(*parts)
    assert f"bf16 dense peak {H200_BF16_DENSE:g} TFLOP/s" in text
    said = [m.groups() for m in _STEP_LINE.finditer(text)]
    assert said, text[-2000:]
    files = kineto_files(*parts)
    ref = {}
    for i, path in enumerate(files):
        rank = T.kineto_rank(path, i).rank
        ref[rank] = model_work(path)
    per_rank: dict = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for rank, step, tflop, ms, _rate, mfu in said:
        f, host_ns = ref[int(rank)][int(step)]
        assert abs(float(tflop) * 1e12 - f) <= 0.005 * f + 0.005e12, (rank, step, tflop, f)
        assert abs(float(mfu) / 100 - f / (float(ms) * 1e9) / H200_BF16_DENSE) <= 0.0006, (rank, step, mfu)
        if len(files) == 1:
            assert abs(float(ms) * 1e6 - host_ns) <= 0.02 * host_ns, (step, ms, host_ns / 1e6)
        acc = per_rank[int(rank)]
        acc[0] += f
        acc[1] += host_ns
        acc[2] += float(ms) * 1e6
    fig = rank_figures(parts)
    for rank, (_f, _host_ns, said_ns) in per_rank.items():
        run = fig[rank]["time"]
        assert abs(said_ns - run) <= 0.02 * run, (rank, said_ns / 1e6, run / 1e6)


_UNKNOWN = re.compile(r"work unknown for (\d+) of (\d+) compute kernels \(([\d.]+) ms\): (.*)$", re.M)


_HTA_ORPHANS = (
    "..",
    "compat",
    "facebookresearch__HolisticTraceAnalysis",
    "negative_queue_length_values_check",
    "rank0.json.gz",
)


@pytest.mark.parametrize(
    "parts", [("kineto", "pp_gpu"), ("kineto", "tp"), ("kineto", "single_gpt_train.json.gz"), _HTA_ORPHANS]
)
def test_kernels_without_a_launch_are_not_said_to_have_ops(parts):
    """pp_gpu: 'work unknown for 2837 of 10262 kernels (437.6 ms): their ops have no shapes, no
    rule, or arguments a rule cannot read' where 1,661 of them (338.4 ms: the GPU still running
    work launched before the capture) have no launch call on record and so no op at all. The
    compute kernels (not NCCL) with no CUDA launch of their correlation id in the raw file are
    counted and said apart; where there are none the sentence is as before. Since the families
    are the measured steps' kernels, pp_gpu's are not among them: it says 'their ops have ...';
    HTA's negative_queue_length_values_check has 700 inside its steps."""
    ranks = load(parts)
    steps = measured_steps(ranks)
    mine = [(r.kind == T.COMPUTE) & in_measured_steps(r, steps[r.rank][0]) for r in ranks]
    total = sum(int(m.sum()) for m in mine)
    orphan = [m & ~r.linked for r, m in zip(ranks, mine)]
    n = sum(int(m.sum()) for m in orphan)
    ms = sum(int((r.end - r.start)[m].sum()) for r, m in zip(ranks, orphan)) / 1e6
    m = _UNKNOWN.search(analyze_text(*parts))
    assert m and int(m.group(2)) == total, (m and m.group(0), total)
    if n:
        assert f"{n} ({ms:.1f} ms) have no launch call on record, so no op" in m.group(4), (m.group(0), n, ms)
    else:
        assert m.group(4).startswith("their ops have no shapes"), m.group(0)


_FAMILY = re.compile(r"^  (gemm[^:]*): (\d+)% of compute-kernel time", re.M)


@pytest.mark.parametrize("parts", [("kineto", "fsdp"), ("kineto", "pp_gpu")])
def test_family_shares_are_of_the_compute_kernels(parts):
    """fsdp: 'gemm bf16, Tensor Cores: 47% of kernel time' where its GEMMs are 17% of all kernel
    time (NCCL kernels 94% of rank 0's step) and 47% of the compute kernels' (NCCL left out, as the
    families are): the line says so. The GEMM kernels by name (cuBLAS's nvjet/gemm kernels) over
    the non-NCCL kernels' time of every rank in its measured steps, within 1 point of the gemm
    lines' shares summed."""
    ranks = load(parts)
    steps = measured_steps(ranks)
    mine = [in_measured_steps(r, steps[r.rank][0]) for r in ranks]
    gemm = sum(
        int((r.end - r.start)[np.array([("nvjet" in n or "gemm" in n.lower()) for n in r.names]) & m].sum())
        for r, m in zip(ranks, mine)
    )
    compute = sum(int((r.end - r.start)[(r.kind == T.COMPUTE) & m].sum()) for r, m in zip(ranks, mine))
    said = [int(m.group(2)) for m in _FAMILY.finditer(analyze_text(*parts))]
    assert said, "no gemm family line"
    assert abs(sum(said) / 100 - gemm / compute) <= 0.01 * len(said), (said, gemm / compute)


_ELEMENTWISE = re.compile(
    r"elementwise and norm ops take (\d+)% of the steps' time on the GPU \((\d+)% of its compute-kernel time; "
    r"([\d.]+) ms in"
)


@pytest.mark.parametrize(
    "parts",
    [
        ("whatif", "stall_on.json.gz"),
        ("kineto", "dataloader_stall.json.gz"),
        ("kineto", "single_gpt_train.json.gz"),
        ("kineto", "pp_gpu"),
    ],
)
def test_elementwise_share_is_of_the_steps_gpu_time(parts):
    """'Memory-bound elementwise and norm ops take 12% of the steps' time on the GPU (..% of its
    compute-kernel time; 2.8 ms ...)' (stall_on): the steps' GPU time there was their 4 ms windows, while the steps take 29.7 ms
    (the rank lines and MFU count 29.7). The share is the sentence's ms over the ranks' measured
    GPU time (rank_figures), within 1 point; and no elementwise finding (its floor: 10% of that
    time) where all the compute kernels together fill less than 10% of it (stall_on 4%,
    dataloader_stall 8%)."""
    fig = rank_figures(parts)
    gpu_time = sum(f["time"] for f in fig.values())
    compute = sum(f["compute"] * f["time"] for f in fig.values()) / gpu_time
    found = [f for f in flat(analyze(*parts)["findings"]) if f["rule"] == "elementwise_bound"]
    if compute < 0.10:
        assert not found, (compute, [f["title"] for f in found])
        return
    m = _ELEMENTWISE.search(found[0]["title"])
    assert m, found[0]["title"]
    assert abs(_pct(m.group(1)) - float(m.group(3)) * 1e6 / gpu_time) <= 0.01, (m.group(0), gpu_time / 1e6)
    # beside it, their share of the compute kernels' time in the same steps (the audit read "GPU
    # time" as that: 55% where the steps' share was 15%)
    assert abs(_pct(m.group(2)) - float(m.group(3)) * 1e6 / (compute * gpu_time)) <= 0.01, m.group(0)


_MEMBOUND = re.compile(
    r"^  (attention|gemm)[^:]*: \d+% of compute-kernel time, ([\d.]+) TFLOP/s \((\d+)% of peak\), memory-bound by "
    r"intensity \((\d+) FLOP/byte, below the ridge at (\d+)\); (\d+)% of the memory bandwidth"
    r"(, far from both roofs \(latency, occupancy or too little work per kernel\))?$",
    re.M,
)


@pytest.mark.parametrize("parts", [("kineto", "single_gpt_train.json.gz"), ("kineto", "fsdp")])
def test_a_memory_bound_matmul_says_how_much_bandwidth_it_uses(parts):
    """single_gpt's 'attention bf16, Tensor Cores: ... 151.2 TFLOP/s (15% of peak), memory-bound':
    its intensity (FLOPs over the bytes it must move) is below the ridge of the H200's roofs, so the
    roofline calls it memory-bound, yet it moves 1 TB/s, 21% of the 4.8 TB/s: it is held by
    neither roof, and the line says so. It says by what it is memory-bound and the bandwidth it uses: the ridge
    is 989.4 TFLOP/s over 4.8 TB/s (the datasheet's), the intensity is under it, and the bandwidth
    share is the rate over the intensity over 4.8 TB/s (the rate itself checked against the raw
    shapes in tests above)."""
    found = list(_MEMBOUND.finditer(analyze_text(*parts)))
    assert found, "no memory-bound matmul or attention line"
    for m in found:
        rate, intensity, ridge, bw = float(m.group(2)), int(m.group(4)), int(m.group(5)), int(m.group(6))
        assert ridge == round(H200_BF16_DENSE * 1e3 / 4800)
        assert intensity < ridge
        assert abs(bw - 100 * rate * 1e3 / intensity / 4800) <= 1.5, m.group(0)
        # under half of both roofs: not held by memory (an expert audit read 'memory-bound' as that)
        assert (m.group(7) is not None) == (bw < 50 and int(m.group(3)) < 50), m.group(0)
