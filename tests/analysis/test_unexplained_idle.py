"""A GPU mostly idle that no finding explains is priced: memory_pressure's GPU idles 41% of its
steps, in gaps longer than launch_bound counts, with the host loop on the critical path; its
low-utilization finding carries what the launches without host time between them save (the what-if
an audit ran by hand: 38.8%), not '-'. Where a cause is found (a late rank, launch-bound), the cause
carries the saving and the symptom none; a whole capture without a loop's steps gets none."""

from __future__ import annotations

import gzip
import json
import os
import re

import analysis_truth as T
import pytest
from conftest import compat_path, launch_waits, run_cli, run_cli_once, trace_path

# the no-launch-overhead what-if in words (whatif_change.Change.describe)
NO_LAUNCH_OVERHEAD = (
    "no launch overhead: the CUDA calls a graph would capture (launches, event records and waits) and the host's "
    "work between two of them (gaps under 1 ms) gone, each stream's kernels then at its recorded back-to-back "
    "spacing (as CUDA graphs would)"
)


def _analyze(path: str) -> dict:
    p = run_cli_once("analyze", path, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def test_memory_pressure_idle_is_priced_by_the_launch_whatif():
    path = trace_path("kineto", "memory_pressure.json.gz")
    out = _analyze(path)
    rules = [f["rule"] for f in out["findings"]]
    assert "launch_bound" not in rules and "host_bound_idle" not in rules and "straggler" not in rules
    f = next(f for f in out["findings"] if f["rule"] == "low_gpu_utilization")
    assert f["metrics"]["mostly"] == "idle" and f["saving"] == NO_LAUNCH_OVERHEAD
    p = run_cli("whatif", path, "--no-launch-overhead", "--json")
    assert p.returncode == 0, p.stderr
    alone = json.loads(p.stdout)
    assert f["saves_ms"] == pytest.approx(alone["saves_ms"], abs=2e-3)
    # the saving is bounded by the GPU's idle time in the steps (the kernels' own time stays)
    assert 0 < f["saves_ms"] <= f["metrics"]["idle_ms"] + 1e-3
    assert out["findings"][0] is f  # the largest saving: listed first


@pytest.mark.parametrize(
    "path",
    [
        trace_path("kineto", "fsdp"),  # a late rank explains its idle
        trace_path("kineto", "ddp_clean"),  # launch-bound explains it
        compat_path("facebookresearch__HolisticTraceAnalysis", "critical_path", "alexnet"),  # one whole capture
    ],
)
def test_explained_or_loopless_idle_has_no_saving_of_its_own(path):
    for f in _analyze(path)["findings"]:
        if f["rule"] == "low_gpu_utilization":
            assert f.get("saves_ms") is None, f["title"]


_HOST_WAS_IN = re.compile(r"the host was in (.+?) for ([\d,.]+) ms of its ([\d,.]+) ms gap")


@pytest.mark.parametrize(
    "path",
    [
        compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz"),
        compat_path("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"),
    ],
)
def test_the_op_the_host_was_in_is_timed_with_its_children(path):
    """'the host was in enumerate(DataLoader)#...__next__ for 50.7 ms of the 51.2 ms': the op's
    wall time inside the gap, children included (its self time, 25.2 ms, was printed as 'its
    longest op'). From the raw file: a gap between the GPU's ops (from its step's host start on) as
    long as the one said, and an op of that name on the host that spans the said time of it."""
    f = next(f for f in _analyze(path)["findings"] if f["rule"] == "host_bound_idle")
    m = _HOST_WAS_IN.search(f["title"])
    assert m, f["title"]
    name, said, gap = m.group(1), float(m.group(2).replace(",", "")), float(m.group(3).replace(",", ""))
    assert said >= 0.5 * gap
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    ev = doc if isinstance(doc, list) else doc["traceEvents"]
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e.get("cat") in ("Kernel", "Memcpy", "Memset", "kernel", "gpu_memcpy", "gpu_memset")
    )
    reach, gaps = gpu[0][1], []
    for s, e in gpu[1:]:
        if s > reach:
            gaps.append((reach, s))
        reach = max(reach, e)
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("ph") == "X" and e.get("name") == name]
    # a gap is the step's from its host start on (what idles before it belongs to the step before)
    starts = sorted(e["ts"] for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    gaps = [(max([a] + [t for t in starts if t <= b]), b) for a, b in gaps]
    found = [max(min(b, o1) - max(a, o0) for o0, o1 in ops) / 1e3 for a, b in gaps if abs((b - a) / 1e3 - gap) <= 0.051]
    assert any(abs(x - said) <= 0.051 for x in found), (f["title"], found)


NCCL_PARSER = compat_path("facebookresearch__HolisticTraceAnalysis", "nccl_parser_config")
_SPLIT = re.compile(
    r"where the GPU idles: ([\d,.]+) ms a step in gaps under 0\.1 ms between its ops \(launch gaps\), "
    r"([\d,.]+) ms in gaps of 0\.1-1 ms and ([\d,.]+) ms in gaps of 1 ms or more"
)


MEMORY = trace_path("kineto", "memory_pressure.json.gz")
# (trace, the finding that names the idle, its gaps' windows: with the idle before and after the
# steps' GPU windows, or between their first op and last only)
NAMED = [(MEMORY, "low_gpu_utilization", True), (NCCL_PARSER, "launch_bound", False)]


def _raw(path: str) -> tuple[dict, list[dict]]:
    (name,) = os.listdir(path) if os.path.isdir(path) else [path]
    with gzip.open(os.path.join(path, name) if os.path.isdir(path) else path, "rt") as fh:
        doc = json.load(fh)
    return doc, [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.mark.parametrize("path, rule, around", NAMED)
def test_idle_says_where_the_gpu_waits_and_what_the_host_runs(path, rule, around):
    """memory_pressure (no cause found: low utilization priced by the CUDA-graph bound) says how
    its idle splits by gap length; HTA's nccl_parser_config (an auditor measured about 20, 99 and
    52 ms a step), now host-bound between launches, keeps the split in its metrics. Both name the
    host ops running through the longer gaps. The split is measured here from the raw file: the
    GPU ops' union, its gaps inside the analysis' measured step windows (ns = ts x 1000 + the
    file's baseTimeNanoseconds); each named op's time is at most the gaps of 0.1 ms or more that
    an event of its name covers half of."""
    out = _analyze(path)
    f = out["findings"][0]
    assert f["rule"] == rule and f["saving"].startswith("no launch overhead")
    doc, ev = _raw(path)
    base = doc.get("baseTimeNanoseconds", 0)
    gpu = sorted(
        (round(e["ts"] * 1000) + base, round((e["ts"] + e["dur"]) * 1000) + base)
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    ig = f["metrics"]["idle_gaps"]
    steps = [s for s in out["ranks"][ig["rank"]]["steps"] if not s["warmup"] and s["busy_ns"] > 0]
    gaps = []
    for s in steps:
        w0, w1 = (
            (s["start_ns"] - s["idle_before_ns"], s["end_ns"] + s["idle_after_ns"])
            if around
            else (s["start_ns"], s["end_ns"])
        )
        gaps += T.gaps(gpu, w0, w1)
    n = len(steps)
    lens = [b - a for a, b in gaps]
    want = [
        sum(x for x in lens if x < 100_000) / n / 1e6,
        sum(x for x in lens if 100_000 <= x < 1_000_000) / n / 1e6,
        sum(x for x in lens if x >= 1_000_000) / n / 1e6,
    ]
    if rule == "launch_bound":  # host-paced: its ops named over its own waits (the title's)
        (name,) = os.listdir(path)
        waits = launch_waits(os.path.join(path, name))
        hit = set(f["metrics"]["launch_bound_steps"])
        # the raw steps' waits, up to their launches' returns (ns, on the analysis' clock)
        gaps = [
            (round(a * 1000) + base, round(b * 1000) + base)
            for k, w in waits.items()
            if k in hit
            for a, b in w["spans"]
        ]
        n = len(hit)
        assert ig["waits_ms"] == pytest.approx(sum(b - a for a, b in gaps) / n / 1e6, rel=0.05)
        assert "waits of 0.1 ms or more (each up to its launch's return) the launching thread was in: " in f["title"]
    else:
        assert [ig["short_ms"], ig["mid_ms"], ig["long_ms"]] == pytest.approx(want, abs=0.01)
        assert ig["ops"] and "in the gaps of 0.1 ms or more the launching thread was in: " in f["title"]
    if rule == "low_gpu_utilization":
        m = _SPLIT.search(f["title"])
        assert m, f["title"]
        got = [float(g.replace(",", "")) for g in m.groups()]
        assert got == pytest.approx(want, abs=0.06), (got, want)
        # the split is the GPU's idle time in the steps: the utilization line's idle share of it
        idle = sum(s["idle_ns"] + s["idle_before_ns"] + s["idle_after_ns"] for s in steps) / n / 1e6
        assert sum(want) == pytest.approx(idle, rel=1e-3)
    # the ops named: each at most what events of its name cover half of, in the longer gaps
    assert ig["ops"]
    # the op is the launching thread's (the one whose launch ended the gap): the main thread sits in
    # '## backward ##' through the backward while the autograd thread runs AccumulateGrad in those gaps
    # (ranked by their time inside the gaps, the range fills the gaps where no shorter op spans half)
    assert ig["ops"][0]["name"] != "## backward ##", ig["ops"]
    if path == NCCL_PARSER:
        assert any("AccumulateGrad" in op["name"] for op in ig["ops"][:5]), ig["ops"]
    for op in ig["ops"][:3]:
        mine = [
            (round(e["ts"] * 1000) + base, round((e["ts"] + e["dur"]) * 1000) + base)
            for e in ev
            if e.get("name") == op["name"] and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
        ]
        # its time inside the gaps it spans half of (not their whole length)
        bound = 0
        for a, b in gaps:
            over = [min(b, o1) - max(a, o0) for o0, o1 in mine if min(b, o1) > max(a, o0)]
            if b - a >= 100_000 and over and max(over) >= (b - a) / 2:
                bound += max(over)
        assert 0 < op["ms"] <= bound / n / 1e6 + 1e-3, (op, bound / n / 1e6)


@pytest.mark.parametrize("path, rule, around", NAMED)
def test_the_launch_path_alone_is_priced_beside_the_bound(path, rule, around):
    """Beside the CUDA-graph bound (gaps under 1 ms between launches gone), the finding says what
    the launch path alone saves: `whatif --no-launch-overhead --gap-us 100`, the same replay with
    only gaps under 0.1 ms gone. It is less than the bound; on nccl_parser_config by more than the
    0.1-1 ms framework gaps' share left in: most of the bound is the host's framework work."""
    f = _analyze(path)["findings"][0]
    said = float(re.search(r"the launch path alone \(.*?\) would save about ([\d,.]+) ms a step", f["title"])[1])
    p = run_cli("whatif", path, "--no-launch-overhead", "--gap-us", "100", "--json")
    assert p.returncode == 0, p.stderr
    alone = json.loads(p.stdout)
    assert "(gaps under 100 µs)" in alone["change"]["text"]
    per_step = alone["saves_ms"] / len(alone["steps"])
    assert said == pytest.approx(per_step, abs=0.06)
    assert f["metrics"]["idle_gaps"]["launch_path_saves_ms"] == pytest.approx(per_step, abs=1e-3)
    assert 0 < said < f["saves_ms_in_steps"]
    if path == NCCL_PARSER:
        assert said < f["saves_ms_in_steps"] - 0.5 * f["metrics"]["mid_gap_ms_per_step"]


@pytest.mark.parametrize(
    "argv", [["--faster", "gemm:10", "--gap-us", "100"], ["--no-launch-overhead", "--gap-us", "0"]]
)
def test_gap_us_is_refused_alone_or_out_of_range(argv):
    p = run_cli("whatif", NCCL_PARSER, *argv)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "--gap-us" in p.stderr, p.stderr
