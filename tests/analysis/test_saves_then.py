"""A saving that comes only once the fixes above it are made is said so where it is listed ('then
5.4 ms'), not only in its what-if line: '[high] 5.4 ms load_imbalance' under gpu_straggler's late
rank read as a fix to make now, while alone it saves nothing measurable (three audits)."""

import gzip
import json

import pytest
from conftest import compat_path, profiler_steps, run_cli, trace_path

from gpuviewer.analysis.results import Finding

_cache: dict[str, tuple[dict, list[str]]] = {}


def analyzed(*parts: str) -> tuple[dict, list[str]]:
    """The CLI's JSON and its text lines for one trace (a shared trace, or a compat one by its
    folder and file)."""
    p = compat_path(*parts) if parts[0] == "pytorch__kineto" else trace_path(*parts)
    if p not in _cache:
        js, text = run_cli("analyze", p, "--json"), run_cli("analyze", p)
        assert js.returncode == 0 and text.returncode == 0, js.stderr + text.stderr
        _cache[p] = (json.loads(js.stdout), text.stdout.splitlines())
    return _cache[p]


def flat(fs):
    for f in fs:
        yield f
        yield from flat(f["children"])


def raw_gpu_idle_and_compute(path: str) -> tuple[float, float]:
    """From the raw file: per ProfilerStep (median), the ms the GPU runs no kernel or copy between
    the step's first and last GPU op launched in it, and its non-NCCL kernels' ms."""
    with gzip.open(path, "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    ranges, launch = profiler_steps(ev)  # (launch: each CUDA call's start by correlation id)
    steps = [(a, b) for _n, a, b in ranges]
    gpu = [
        e
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("args", {}).get("correlation") in launch
    ]
    idle, compute = [], []
    for s0, s1 in steps:
        mine = sorted((e["ts"], e["ts"] + e["dur"], e) for e in gpu if s0 <= launch[e["args"]["correlation"]] < s1)
        if not mine:
            continue
        busy, end = 0.0, mine[0][0]
        for a, b, _ in mine:
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        idle.append((end - mine[0][0] - busy) / 1e3)
        compute.append(
            sum(b - a for a, b, e in mine if e.get("cat") == "kernel" and "nccl" not in e["name"].lower()) / 1e3
        )
    idle.sort(), compute.sort()
    return idle[len(idle) // 2], compute[len(compute) // 2]


def test_a_slower_gpu_behind_a_slower_host_saves_only_after_the_host_fix():
    """gpu_straggler: rank 1's GPU computes more (the planted GEMMs) but idles longer than that
    extra a step, waiting for its host (the raw file): evening out its compute alone saves nothing
    (the whatif CLI's own replay agrees), and the list says its figure comes 'then'."""
    a, lines = analyzed("kineto", "gpu_straggler")
    idle1, compute1 = raw_gpu_idle_and_compute(trace_path("kineto", "gpu_straggler", "gpu_straggler_rank1.json.gz"))
    _, compute0 = raw_gpu_idle_and_compute(trace_path("kineto", "gpu_straggler", "gpu_straggler_rank0.json.gz"))
    assert idle1 > compute1 - compute0 > 1.0, (idle1, compute1, compute0)
    imb = next(f for f in flat(a["findings"]) if f["rule"] == "load_imbalance")
    w = run_cli("whatif", trace_path("kineto", "gpu_straggler"), "--rank-like-median", "1:gpu", "--json")
    assert w.returncode == 0, w.stderr
    alone = json.loads(w.stdout)["saves_ms"]
    assert alone < 0.05 * len(imb["saves_steps"]) and imb["saves_ms_alone_in_steps"] < 0.05
    assert imb["saves_once_above"] and imb["saves_ms_in_steps"] >= 1.0
    row = f"then {imb['saves_ms_in_steps']:.1f} ms  load_imbalance"
    assert any(row in ln for ln in lines), row
    assert any("'then': what it saves once the findings above it are fixed" in ln for ln in lines)


@pytest.mark.parametrize(
    "parts",
    [
        ("kineto", "gpu_straggler"),
        ("kineto", "single_gpt_train.json.gz"),
        ("nsys", "nsys_ddp.sqlite"),
        ("kineto", "ddp"),
        ("kineto", "fsdp"),
        ("pytorch__kineto", "tb_plugin_resnet50_num_workers_0_worker0.ARRAYFORM.pt.trace.json.gz"),
    ],
)
def test_then_is_said_exactly_where_alone_saves_half_or_less(parts):
    """Every listed saving is marked 'then' iff it follows fixes above and alone saves at most
    half of it (and 1 ms less or more); where alone it saves a third more or over, its what-if line
    says that figure; the first finding never has either (nothing is above it)."""
    a, lines = analyzed(*parts)
    assert not a["findings"][0].get("saves_once_above")
    rows = [ln for ln in lines if ln.lstrip().startswith(("[", "└ ["))]
    assert len(rows) == sum(1 for _ in flat(a["findings"]))
    for f, row in zip(flat(a["findings"]), rows):
        after, alone = f.get("saves_ms_in_steps"), f.get("saves_ms_alone_in_steps")
        above = bool(f.get("saves_after_above")) and alone is not None
        # 'then': alone half as much or less (and 1 ms less); the sentence says a larger alone
        # figure where it is a third more or over (and 1 ms more)
        want = above and 2 * alone <= after and after - alone >= 1.0
        assert bool(f.get("saves_once_above")) == want, (f["rule"], after, alone)
        assert ("then " in row.split(f["rule"])[0]) == want, row
        more = above and 3 * alone >= 4 * after and alone - after >= 1.0
        text = Finding.from_json(f).saving_text or ""
        assert ("time the fixes above also remove" in text) == more, (f["rule"], after, alone, text)
    said = any("'then':" in ln for ln in lines)
    assert said == any(f.get("saves_once_above") for f in flat(a["findings"]))
