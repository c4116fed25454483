"""Synchronize calls that drain the GPU (an nsys audit of cloverleaf: 1,312 cudaDeviceSynchronize,
one after every kernel, 11% idle, and no finding said so).

The finding (analysis/syncs.py) counts a rank's stream, event and device syncs in its measured
steps, their wait, and the GPU's idle from each one's return to the next GPU op; its saving is the
`no_syncs` what-if (the host does not wait in them). Checked against the raw export (sqlite3 here,
nothing from gpuviewer), against a bound a replay must keep (removing waits saves no more than the
waits) and the GPU's idle after them, and on a trace whose idle after its syncs is a
sleep's (stall_on): no finding there, and the what-if saves no more than the syncs waited."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics

import numpy as np
import pytest
from conftest import compat_path, run_cli, run_cli_once, trace_path

CLOVERLEAF = compat_path("hpcgroup__pipit", "perlmutter-cloverleaf-cuda.sqlite")
STALL_ON = trace_path("whatif", "stall_on.json.gz")
_SYNC = re.compile(r"(?:Stream|Device|Event|Ctx)Synchroni[sz]e")


def _raw_nsys(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sync call starts, ends; GPU op starts, ends) of a one-process export, from its tables."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = {i: v for i, v in db.execute("SELECT id, value FROM StringIds") if _SYNC.search(v)}
        runtime = db.execute("SELECT start, end, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
        calls = [(s, e) for s, e, n in runtime if n in names]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ops = []
        for t in ("KERNEL", "MEMCPY", "MEMSET"):
            if f"CUPTI_ACTIVITY_KIND_{t}" in tables:
                ops += list(db.execute(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}"))
    finally:
        db.close()
    c = np.array(sorted(calls), np.int64).reshape(-1, 2)
    o = np.array(sorted(ops), np.int64).reshape(-1, 2)
    return c[:, 0], c[:, 1], o[:, 0], o[:, 1]


def _idle_after(ret: np.ndarray, os_: np.ndarray, oe: np.ndarray) -> np.ndarray:
    """Per return time: the time to the next GPU op's start where no op was running then."""
    out = np.zeros(len(ret), np.int64)
    run_end = np.maximum.accumulate(oe)
    for k, t in enumerate(ret.tolist()):
        p = int(np.searchsorted(os_, t, side="left"))
        if p < len(os_) and (p == 0 or run_end[p - 1] <= t):
            out[k] = os_[p] - t
    return out


def _finding(out: dict, rule: str):
    def flat(fs):
        for f in fs:
            yield f
            yield from flat(f["children"])

    return next((f for f in flat(out["findings"]) if f["rule"] == rule), None)


def test_a_sync_after_every_kernel_is_a_finding_with_the_raw_numbers():
    cs, ce, os_, oe = _raw_nsys(CLOVERLEAF)
    idle = _idle_after(ce, os_, oe)
    out = json.loads(run_cli_once("analyze", CLOVERLEAF, "--json").stdout)
    f = _finding(out, "host_sync")
    assert f is not None, [x["title"] for x in out["findings"]]
    m = f["metrics"]
    assert m["syncs"] == len(cs) == 1312
    assert abs(m["wait_ms_per_step"] - (ce - cs).sum() / 1e6) <= 0.01
    assert abs(m["idle_after_ms_per_step"] - idle.sum() / 1e6) <= 0.01
    assert abs(m["capped_ms_per_step"] - np.minimum(ce - cs, idle).sum() / 1e6) <= 0.01
    # the calls, and those that waited (the others returned within 20 µs: the GPU was drained)
    waited = int(((ce - cs) >= 20_000).sum())
    assert 0 < waited < 1312
    assert "calls cudaDeviceSynchronize 1,312 times" in f["title"] and f"waits in {waited:,} of them" in f["title"], f[
        "title"
    ]
    assert f"{idle.sum() / 1e6:,.1f} ms" in f["title"], f["title"]
    # that idle follows every sync: said, and the part after those that waited (helper-115: 22.4 ms
    # read as the 404's, after which the GPU idles 14.8 ms)
    after = idle[(ce - cs) >= 20_000].sum() / 1e6
    assert (
        f"after all of them, those that returned at once too ({after:,.1f} ms after those that waited)" in f["title"]
    ), f["title"]
    # the time said beside them is the waiting calls' (an audit: 301.7 ms was all 1,312 calls')
    long = (ce - cs)[(ce - cs) >= 20_000]
    assert f"({long.sum() / 1e6:,.1f} ms in those)" in f["title"], f["title"]
    # its saving is the replay's: no more than the waits, and here (a sync after every kernel,
    # the host's next launch right after it) close to the GPU's idle after them
    assert 0 < f["saves_ms"] <= (ce - cs).sum() / 1e6
    assert abs(f["saves_ms"] - idle.sum() / 1e6) <= 0.1 * idle.sum() / 1e6
    assert f["saving"].startswith("rank 0's host does not wait in synchronize calls")


def test_the_what_if_command_removes_the_syncs_waits():
    p = run_cli("whatif", CLOVERLEAF, "--no-syncs", "all", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["change"]["kind"] == "no_syncs"
    cs, ce, os_, oe = _raw_nsys(CLOVERLEAF)
    idle = _idle_after(ce, os_, oe)
    assert 0 < r["saves_ms"] <= (ce - cs).sum() / 1e6
    assert abs(r["saves_ms"] - idle.sum() / 1e6) <= 0.1 * idle.sum() / 1e6
    out = json.loads(run_cli_once("analyze", CLOVERLEAF, "--json").stdout)
    assert abs(_finding(out, "host_sync")["saves_ms"] - r["saves_ms"]) <= 0.01  # one replay, one number
    bad = run_cli("whatif", CLOVERLEAF, "--no-syncs", "x")
    assert bad.returncode != 0 and "--no-syncs x: give a rank, or 'all'" in bad.stderr
    bad = run_cli("whatif", CLOVERLEAF, "--no-syncs", "5")
    assert bad.returncode != 0 and "rank 5 is not in this session" in bad.stderr


def test_idle_after_a_sync_that_is_a_sleeps_is_not_the_syncs():
    """stall_on: the host syncs at each step's end, then sleeps 25 ms before launching: the GPU
    idles after the syncs for the sleep, which removing the syncs would not save (they waited
    0.2 ms in all). No host_sync finding; the what-if saves at most what the syncs waited."""
    import gzip

    import gpuviewer

    with gzip.open(STALL_ON, "rt") as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    api = [e for e in evs if e.get("cat") == "cuda_runtime" and _SYNC.search(e["name"])]
    gpu = sorted((e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    ns = lambda us: np.array([round(x * 1000) for x in us], np.int64)  # noqa: E731
    idle = _idle_after(
        ns([e["ts"] + e["dur"] for e in api]), ns([e["ts"] for e in gpu]), ns([e["ts"] + e["dur"] for e in gpu])
    )
    wait = sum(e["dur"] for e in api) * 1000
    assert idle.sum() > 50 * wait, (idle.sum(), wait)  # the sleeps follow the syncs
    out = json.loads(run_cli_once("analyze", STALL_ON, "--json").stdout)
    assert _finding(out, "host_sync") is None
    assert gpuviewer.open(STALL_ON).whatif("no-syncs", "all").saves_ns <= wait


@pytest.mark.parametrize("value", ["0", "all"])
def test_no_syncs_of_one_rank_or_all(value):
    import gpuviewer

    r = gpuviewer.open(CLOVERLEAF).whatif("no-syncs", value)
    assert r.change.rank == (0 if value == "0" else None)
    assert r.saves_ns > 0


def test_a_sync_that_reads_a_copys_result_is_not_counted():
    """PyTorch's .item() and .cpu() are a cudaMemcpyAsync and a cudaStreamSynchronize right after
    it: the host needs that data, so neither the finding nor --no-syncs takes that wait away.
    tb_plugin's autograd_api trace (raw JSON): syncs on each thread, less those whose previous
    CUDA runtime call on the thread is a memcpy."""
    import gzip

    from gpuviewer.analysis.syncs import _sync_calls

    path = compat_path("pytorch__kineto", "tb_plugin_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz")
    with gzip.open(path, "rt") as f:
        evs = [
            e for e in json.load(f)["traceEvents"] if e.get("cat") in ("cuda_runtime", "Runtime") and e.get("ph") == "X"
        ]
    per_tid: dict = {}
    for e in sorted(evs, key=lambda e: e["ts"]):
        per_tid.setdefault(e["tid"], []).append(e["name"])
    syncs = reads = 0
    for names in per_tid.values():
        for k, n in enumerate(names):
            if _SYNC.search(n):
                syncs += 1
                reads += k > 0 and "memcpy" in names[k - 1].lower()
    assert reads > 0 and syncs > reads
    import gpuviewer

    s = gpuviewer.open(path)
    assert len(_sync_calls(s.trace, 0)) == syncs - reads
    # the what-if reads the same test off the dependency model: --no-syncs keeps those waits
    from gpuviewer.analysis import depgraph as dg
    from gpuviewer.analysis.whatif import _waits_for_work, graph

    g = graph(s.trace)
    sync = (g.kind == dg.SYNC) & np.array([bool(_SYNC.search(n)) for n in g.names])[np.maximum(g.name, 0)]
    assert int((sync & g.reads_copy).sum()) == reads
    assert int(_waits_for_work(g).sum()) == syncs - reads


JAX = trace_path("jax", "jax_train_stall.trace.json.gz")


def _raw_jax() -> tuple[list, list, list]:
    """jax_train_stall's raw events: its `train` steps (start, end, step_num), its GPU kernels
    (start, end, name) and its block_until_ready calls (start, end), µs."""
    import gzip

    with gzip.open(JAX, "rt") as fh:
        doc = json.load(fh)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    gpu = {e["pid"] for e in ev if e.get("ph") == "M" and "/device:GPU" in str(e.get("args", {}).get("name", ""))}
    x = [e for e in ev if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["args"]["step_num"])) for e in x if e["name"] == "train")
    kernels = [
        (e["ts"], e["ts"] + e["dur"], e["name"]) for e in x if e["pid"] in gpu and not e["name"].startswith("Memset")
    ]
    waits = [(e["ts"], e["ts"] + e["dur"]) for e in x if e["pid"] not in gpu and "block_until_ready" in e["name"]]
    return steps, kernels, waits


def test_jax_block_until_ready_is_a_sync_the_replay_and_the_finding_know():
    """JAX records no CUDA sync call: its host waits for the GPU in block_until_ready once a step
    (read here from the raw file), and the dependency model held that wait as host work, so no GPU
    change could shorten a step: `--faster nvjet:50` saved 0 ms. Now the wait ends with the GPU's
    work: halving the GEMMs saves about half their time in each usual step, removing the waits
    saves at most what they waited, and the host_sync finding names the call with its raw wait."""
    steps, kernels, waits = _raw_jax()
    usual = [s for s in steps if s[1] - s[0] < 5_000]  # (step 4 holds the planted 30 ms sleep)
    assert len(usual) >= 5 and len(waits) >= len(steps)
    p = run_cli("whatif", JAX, "--faster", "nvjet:50", "--json")
    assert p.returncode == 0, p.stderr
    got = {s["step"]: s["saves_ms"] for s in json.loads(p.stdout)["steps"]}
    for a, b, n in usual:
        gemm = sum(k1 - k0 for k0, k1, name in kernels if name.startswith("nvjet") and a <= k0 < b)
        if n in got and gemm > 0:
            assert got[n] == pytest.approx(gemm / 2 / 1e3, rel=0.35, abs=0.03), (n, got[n], gemm)
    p = run_cli("whatif", JAX, "--no-syncs", "all", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for s in out["steps"]:
        w = sum(min(w1, b) - max(w0, a) for a, b, n in steps if n == s["step"] for w0, w1 in waits if w1 > a and w0 < b)
        assert s["saves_ms"] <= w / 1e3 + 0.02, (s, w)
    assert out["saves_ms"] > 0.5
    f = next(
        f for f in json.loads(run_cli_once("analyze", JAX, "--json").stdout)["findings"] if f["rule"] == "host_sync"
    )
    assert "block_until_ready" in f["title"]
    measured = [n for _a, _b, n in steps if n != 0]  # (warm-up step 0 aside)
    inside = [w1 - w0 for w0, w1 in waits for a, b, n in steps if n in measured and a <= w0 < b]
    assert f["metrics"]["wait_ms_per_step"] == pytest.approx(sum(inside) / len(measured) / 1e3, rel=0.05)
    # the idle after each wait: a median step's, the planted sleep after one of them lifting the
    # mean (helper-116: '4.0 ms a step, 82%' was mostly step 4's sleep); from the raw trace, each
    # step's last wait's end to the next GPU op's start, in the measured steps
    starts = sorted(k0 for k0, _k1, _n in kernels)
    gaps = []
    for a, b, n in steps:
        ends = [w1 for w0, w1 in waits if a <= w0 < b]
        if n in measured and ends:
            nxt = [t for t in starts if t >= max(ends)]
            gaps.append(nxt[0] - max(ends) if nxt else 0.0)
    m = re.search(r"idles until the host's next launch: a median ([\d.]+) ms a step", f["title"])
    assert m and float(m[1]) == pytest.approx(statistics.median(gaps) / 1e3, abs=0.06), (f["title"], gaps)
    assert max(gaps) / 1e3 > 20  # the sleep after one of them
