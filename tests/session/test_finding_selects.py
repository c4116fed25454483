"""A click on a finding selects its evidence (Session.show_finding): a screenshot review found
launch-bound and sync findings selected nothing. Launch-bound selects the kernel launched most
often in its steps, host_sync its longest sync call; both checked against the raw export."""

from __future__ import annotations

import re
from collections import Counter

from conftest import alexnet_path, compat_path, export_rows, trace_path

import gpuviewer

NSYS_SINGLE = trace_path("nsys", "nsys_single.sqlite")
CLOVERLEAF = compat_path("hpcgroup__pipit", "perlmutter-cloverleaf-cuda.sqlite")


def _raw(path: str, sql: str, *args) -> list:
    return export_rows(path, sql, *args)


def test_launch_bound_selects_the_kernel_launched_most_often():
    s = gpuviewer.open(NSYS_SINGLE)
    f = next(x for x in s.analysis.all_findings() if x.rule == "launch_bound")
    steps = f.metrics["launch_bound_steps"]
    ranges = [
        (a, b)
        for text, a, b in _raw(NSYS_SINGLE, "SELECT text, start, end FROM NVTX_EVENTS WHERE text LIKE 'step %'")
        if int(re.match(r"step (\d+)", text).group(1)) in steps
    ]
    # kernels whose launch call started inside those steps' NVTX ranges (a kernel belongs to the
    # step that launched it)
    rows = _raw(
        NSYS_SINGLE,
        "SELECT s.value, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId",
    )
    counts = Counter(n for n, t in rows if any(a <= t < b for a, b in ranges))
    ((top, n),) = counts.most_common(1)
    assert f.metrics["evidence"][0]["name"] == top and f.metrics["evidence"][0]["count"] == n
    ev = s.show_finding(f)
    assert ev is not None and s.trace.name_of(ev) == top


def test_host_sync_selects_its_longest_sync_call():
    s = gpuviewer.open(CLOVERLEAF)
    f = next(x for x in s.analysis.all_findings() if x.rule == "host_sync")
    ((longest,),) = _raw(
        CLOVERLEAF,
        "SELECT max(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaDeviceSynchronize%'",
    )
    ev = s.show_finding(f)
    assert ev is not None and s.trace.name_of(ev).startswith("cudaDeviceSynchronize")
    assert int(s.trace.columns["dur"][ev]) == longest


def test_exposed_communication_selects_its_longest_collective_kernel():
    """fsdp rank 0: 70% of its step is communication not overlapped with compute. A click selected
    nothing (the rule sees the rank's breakdown only); its evidence is now the NCCL kernels that took
    most of its GPU time in the worst step, and the click selects the longest of the first there.
    The totals are summed here from the session's columns, by category and window."""
    import numpy as np

    from gpuviewer.model.categories import Cat

    s = gpuviewer.open(trace_path("kineto", "fsdp"))
    f = next(x for x in s.analysis.all_findings() if x.rule == "exposed_communication")
    rank = f.ranks[0]
    sb = next(b for b in s.analysis.breakdowns if b.rank == rank)
    st = next(x for x in sb.steps if x.step == f.step)
    c = s.trace.columns
    lanes = [i for i, ln in enumerate(s.trace.lanes) if ln.rank == rank]
    idx = np.concatenate([np.arange(s.trace.lane_slice(i).start, s.trace.lane_slice(i).stop) for i in lanes])
    start = np.asarray(c["start"][idx])
    m = (np.asarray(c["cat"][idx]) == Cat.COMM_KERNEL) & (start >= st.start_ns) & (start < st.end_ns)
    tot: Counter = Counter()
    for n, d in zip(np.asarray(c["name"][idx])[m].tolist(), np.asarray(c["dur"][idx])[m].tolist()):
        tot[s.trace.names[n]] += d
    ev = f.metrics["evidence"]
    assert [e["name"] for e in ev] == [n for n, _ in tot.most_common(len(ev))]
    assert all(abs(e["ms"] - tot[e["name"]] / 1e6) < 1e-3 for e in ev)
    i = s.show_finding(f)
    assert i is not None and s.trace.name_of(i) == ev[0]["name"]
    same = m & (np.asarray(c["name"][idx]) == s.trace.names.index(ev[0]["name"]))
    assert int(c["dur"][i]) == int(np.asarray(c["dur"][idx])[same].max())


def _gpu_ops_raw(path: str) -> list[tuple[float, float]]:
    import gzip
    import json

    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")], ev


def test_low_utilization_of_an_idle_gpu_shows_its_longest_idle_stretch():
    """memory_pressure: the GPU idles 41% of its steps and no rule wrote evidence, so a click
    selected nothing. It now shows the GPU's longest idle stretch in the finding's steps and
    selects the host op the launching thread spent most of it in. The stretch is found here in the
    raw JSON (placed on the session's clock by the selected op, found by name and duration)."""
    path = trace_path("kineto", "memory_pressure.json.gz")
    s = gpuviewer.open(path)
    f = next(x for x in s.analysis.all_findings() if x.rule == "low_gpu_utilization")
    assert f.metrics["mostly"] == "idle"
    i = s.show_finding(f)
    assert i is not None
    gpu, ev = _gpu_ops_raw(path)
    name, dur = s.trace.name_of(i), int(s.trace.columns["dur"][i])
    (raw,) = [e for e in ev if e.get("name") == name and abs(e["dur"] * 1e3 - dur) < 1.5]
    off = int(s.trace.columns["start"][i]) - raw["ts"] * 1e3  # ns on the session's clock - raw us * 1e3
    lo, hi = (f.start_ns - off) / 1e3, (f.end_ns - off) / 1e3
    inside = sorted((a, b) for a, b in gpu if lo <= a and b <= hi)
    best, end = (0.0, 0.0), inside[0][1]
    for a, b in inside[1:]:
        if a - end > best[1] - best[0]:
            best = (end, a)
        end = max(end, b)
    z0, z1 = s.view.range
    gap = (z1 - z0) / 2.0  # shown with half its length either side
    assert abs(gap - (best[1] - best[0]) * 1e3) < 2e3  # within 2 us (the raw file's rounding)
    # the selected op spans half the stretch or more
    a, b = raw["ts"], raw["ts"] + raw["dur"]
    assert min(b, best[1]) - max(a, best[0]) >= 0.5 * (best[1] - best[0])


def test_low_utilization_of_copies_selects_the_longest_copy():
    """h100_2gpu_1s: copies fill 97% of rank 0's GPU time; a click selects its longest copy (the
    longest memcpy of its device in the raw export)."""
    path = compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite")
    s = gpuviewer.open(path)
    f = next(x for x in s.analysis.all_findings() if x.rule == "low_gpu_utilization")
    assert f.metrics["mostly"] == "copy"
    i = s.show_finding(f)
    assert i is not None and s.trace.name_of(i).startswith("Memcpy")
    dev = s.trace.ranks[f.ranks[0]].devices[0]  # the worst rank's GPU
    ((longest,),) = _raw(path, "SELECT max(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = ?", dev)
    assert int(s.trace.columns["dur"][i]) == longest


def test_low_utilization_in_an_nsys_export_selects_what_the_host_did_in_the_gap():
    """nsys_ddp: rank 1's GPU idles for its host's 50 ms sleep before step 6. nsys exports have no
    CPU-op lanes, so a review found the click selected the kernel after the gap, never the host's
    call; it now selects the OS runtime call the launching thread spent the gap in: the process's
    one 50.3 ms clock_nanosleep in the raw export."""
    path = trace_path("nsys", "nsys_ddp.sqlite")
    s = gpuviewer.open(path)
    f = next(x for x in s.analysis.all_findings() if x.rule == "low_gpu_utilization")
    said: list[str] = []
    s.events.connect("message", lambda text, error: said.append(text))
    i = s.show_finding(f)
    assert i is not None and s.trace.name_of(i).startswith("clock_nanosleep")
    rows = _raw(
        path,
        "SELECT o.globalTid >> 24 & 16777215, max(o.end - o.start), count(*) FROM OSRT_API o "
        "JOIN StringIds n ON n.id = o.nameId WHERE n.value LIKE 'clock_nanosleep%' GROUP BY 1",
    )
    once = [d for _pid, d, n in rows if n == 1]  # the planted sleep: one call in its process
    assert once == [int(s.trace.columns["dur"][i])]
    z0, z1 = s.view.range
    gap = (z1 - z0) / 2  # shown with half its length either side
    assert gap <= once[0] and 2 * gap >= once[0]  # the idle stretch is most of the sleep
    # the window shows the GPU's lanes first; a line says why a host call is selected
    (line,) = said
    m = re.match(
        r"Rank (\d+)'s GPU idle ([\d.]+) ms \(highlighted\): its launching thread was in (.+) \(selected", line
    )
    assert m and int(m[1]) == f.ranks[0] and m[3] == s.trace.name_of(i), line
    assert abs(float(m[2]) * 1e6 - gap) < 1e3


def test_low_utilization_never_selects_an_op_many_times_the_gap():
    """tp: the longest idle stretch of the worst rank is 3.2 ms and the only op covering it is the
    script's 172.9 ms outer function, which a review found selected; an op more than 4x the gap is
    not what the host did in it."""
    s = gpuviewer.open(trace_path("kineto", "tp"))
    f = next(x for x in s.analysis.all_findings() if x.rule == "low_gpu_utilization")
    i = s.show_finding(f)
    z0, z1 = s.view.range
    assert i is not None and int(s.trace.columns["dur"][i]) <= 4 * (z1 - z0) / 2


def test_launch_bound_shows_kernels_and_their_gaps_around_the_one_selected():
    """The launch-bound finding kept the whole capture in view with a 7 µs kernel selected, a
    one-pixel tick (the window's audit): the view is now about 40 kernels' worth of the selected
    kernel's step around it. Counted in the raw export: the kernels of that process starting in
    the view are tens, not the capture's thousands, and the selected one lies inside."""
    s = gpuviewer.open(NSYS_SINGLE)
    f = next(x for x in s.analysis.all_findings() if x.rule == "launch_bound")
    ev = s.show_finding(f)
    assert ev is not None
    t0, t1 = s.view.range
    c = s.trace.columns
    assert t0 <= int(c["start"][ev]) and int(c["start"][ev]) + int(c["dur"][ev]) <= t1
    # the view's kernels, from the export: its times plus one base (the session's clock: the
    # first kernels agree, and the selected kernel is an export kernel's start)
    import numpy as np

    from gpuviewer.model.categories import Cat

    starts = sorted(a for (a,) in _raw(NSYS_SINGLE, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    cat = np.asarray(c["cat"])
    base = int(np.asarray(c["start"])[(cat == Cat.KERNEL) | (cat == Cat.COMM_KERNEL)].min()) - starts[0]
    assert int(c["start"][ev]) - base in set(starts)
    shown = sum(1 for a in starts if t0 <= a + base <= t1)
    per_step = f.metrics["kernels_per_step"]
    assert 10 <= shown <= 0.5 * per_step < len(starts), (shown, per_step, len(starts))


def test_a_host_paced_finding_shows_a_wait_in_the_op_it_names_first():
    """fsdp's top finding (host-bound between launches) names FSDP's _unshard first; a click
    selected a kernel, the host op folded away. It now shows one of rank 1's GPU waits that op ran
    through, the op selected. From the raw rank file: no GPU op of rank 1 inside the highlighted
    stretch, the selected op (found by name and duration) spans half of it or more."""
    path = trace_path("kineto", "fsdp")
    s = gpuviewer.open(path)
    f = s.analysis.findings[0]
    assert f.metrics.get("host_paced") and f.ranks == [1]
    named = f.metrics["idle_gaps"]["ops"][0]["name"]
    assert named.endswith("_unshard")
    i = s.show_finding(f)
    assert i is not None and s.trace.name_of(i) == named
    lo, hi, ranks = s.view.highlight
    assert ranks == {1} and hi - lo >= 100_000
    gpu, ev = _gpu_ops_raw(trace_path("kineto", "fsdp", "fsdp_rank1.json.gz"))
    dur = int(s.trace.columns["dur"][i])
    (raw,) = [e for e in ev if e.get("name") == named and abs(e["dur"] * 1e3 - dur) < 1.5]
    off = int(s.trace.columns["start"][i]) - raw["ts"] * 1e3
    a, b = (lo - off) / 1e3, (hi - off) / 1e3  # the stretch on the raw clock (us)
    assert not any(x < b - 0.1 and y > a + 0.1 for x, y in gpu)  # the GPU idle through it (0.1 us: the raw rounding)
    assert min(raw["ts"] + raw["dur"], b) - max(raw["ts"], a) >= 0.5 * (b - a)
    # 'its launching thread was in': the op is on the thread whose call launched the GPU op that
    # ended the wait (the backward's launches are the autograd thread's; helper-110)
    calls = {
        e["args"]["correlation"]: e["tid"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    after = min(
        (
            e
            for e in ev
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            and "nccl" not in e["name"].lower()
            and e["ts"] >= b - 0.1
        ),
        key=lambda e: e["ts"],
    )
    assert calls[after["args"]["correlation"]] == raw["tid"]


def test_the_status_line_names_a_python_frame_by_its_file_not_its_path():
    """fsdp at 1366 px: 'its launching thread was in torch/distributed/fsdp/_runtime_utils.py(276):
    _unshard (selected, thread 688 (python3))' ran under the status bar's file count, the thread
    cut off: the frame is said by its file's name."""
    s = gpuviewer.open(trace_path("kineto", "fsdp"))
    said: list[str] = []
    s.events.connect("message", lambda text, error: said.append(text))
    f = s.analysis.findings[0]
    i = s.show_finding(f)
    full = s.trace.name_of(i)
    assert "/" in full.split("): ")[0]
    (line,) = said
    assert full.split("): ")[0].rsplit("/", 1)[1] + "): " + full.split("): ")[1] in line and "/" not in line, line
    assert line.endswith(f"(selected, {s.trace.lanes[int(s.trace.columns['lane'][i])].label})")


def test_a_path_segment_before_an_op_selects_the_op_that_follows_it():
    """A critical-path segment 'X waits for Y on another stream' (or 'X queued ... behind') is the
    time before X: its event is the X that starts where the segment ends, not an earlier X that
    happens to overlap it (nsys_ddp: an earlier Memcpy DtoD; helper-111): the op chosen starts
    within 50 µs of the segment's end and runs past it."""
    from gpuviewer.session import Session
    from gpuviewer.session.critical_view import path_view

    path = trace_path("nsys", "nsys_ddp.sqlite")
    s = Session.open([path])
    v = path_view(s.trace, s.run_analysis())
    before = [i for i in range(len(v)) if " waits for " in v.what[i] or " queued " in v.what[i]]
    assert before
    c = s.trace.columns
    for i in before:
        e = int(v.event[i])
        assert e >= 0 and v.what[i].startswith(s.trace.name_of(e))
        assert abs(int(c["start"][e]) - int(v.end[i])) < 50_000  # it starts where the segment ends
        assert int(c["start"][e]) + int(c["dur"][e]) > int(v.end[i])


def test_a_path_segment_says_the_length_of_a_longer_op_it_selects():
    """kineto ddp step 3: 'host work (<built-in function sleep> 34.2 ms of it) ...' selects the
    50.1 ms sleep, which began before the segment; Details' 50.087 ms beside the row's 34.2 read as
    two lengths of one op (an audit of the window). The row says the op's length too, from the raw
    file's sleep event; a row whose op lies within it says none."""
    import gzip
    import json

    from gpuviewer.session import Session
    from gpuviewer.session.critical_view import path_view

    path = trace_path("kineto", "ddp")
    with gzip.open(trace_path("kineto", "ddp", "ddp_rank1.json.gz"), "rt") as fh:
        raw = [e["dur"] for e in json.load(fh)["traceEvents"] if e.get("name") == "<built-in function sleep>"]
    s = Session.open([path])
    v = path_view(s.trace, s.run_analysis())
    c = s.trace.columns
    said = 0
    rows = {r["index"]: r["what"] for st in v.steps for r in v.rows(st)}
    for i in range(len(v)):
        m = re.match(r"host work \((.+?) (\d+\.\d) ms of it(; the op: (\d+\.\d) ms)?\)", rows[i])
        if m is None or int(v.event[i]) < 0:
            continue
        dur = int(c["dur"][int(v.event[i])]) / 1e6
        longer = dur >= 1.05 * float(m.group(2)) + 0.1
        assert bool(m.group(3)) == longer, rows[i]
        if longer:
            assert m.group(4) == f"{dur:.1f}"
            said += m.group(1) == "<built-in function sleep>"
            if m.group(1) == "<built-in function sleep>":
                assert any(m.group(4) == f"{d / 1e3:.1f}" for d in raw), (rows[i], raw)
    assert said >= 1


def test_a_findings_op_around_its_gap_is_selected():
    """HTA's alexnet: the top finding's idle stretch lies inside one 10.8 s aten::cudnn_convolution
    (its first call), which began before the stretch; the click selected nothing, as evidence was
    looked for among events starting inside the stretch (an audit of the window). It selects that
    convolution: the raw file's longest one, covering the stretch."""
    import gzip
    import json

    path = alexnet_path()
    with gzip.open(path, "rt") as fh:
        convs = [e for e in json.load(fh)["traceEvents"] if e.get("name") == "aten::cudnn_convolution" and "dur" in e]
    longest = max(convs, key=lambda e: e["dur"])
    s = gpuviewer.open(path)
    f = s.analysis.findings[0]
    assert f.rule == "host_bound_idle" and "inside aten::cudnn_convolution" in f.title
    i = s.show_finding(f)
    assert i is not None and s.trace.name_of(i) == "aten::cudnn_convolution"
    c = s.trace.columns
    assert abs(int(c["dur"][i]) - round(longest["dur"] * 1000)) <= 1000  # the raw µs, to the µs
    assert int(c["start"][i]) < f.start_ns and int(c["start"][i]) + int(c["dur"][i]) > f.end_ns


def test_a_findings_view_is_padded_no_further_than_the_capture():
    """A finding near the capture's start was shown from -5.6 ms (gpt), -29.7 ms (fsdp): the
    padding ran past the trace into empty grey (an audit of the window). The padding stops at the
    capture's ends; a range asked for beyond them is kept as asked."""
    s = gpuviewer.open(trace_path("kineto", "single_gpt_train.json.gz"))
    t0, t1 = s.trace.start_ns, s.trace.end_ns
    for f in s.analysis.all_findings():
        if t0 <= f.start_ns and f.end_ns <= t1:
            s.show_finding(f)
            a, b = s.view.range
            assert t0 <= a and b <= t1, (f.rule, a - t0, t1 - b)
    # padding that fits is kept whole; a range asked for outside the capture stays as asked
    mid = (t0 + t1) // 2
    assert s.set_range(mid, mid + 1_000_000, padding=0.1) == (mid - 100_000, mid + 1_100_000)
    assert s.set_range(t0 - 5_000_000, t0 + 1_000_000) == (t0 - 5_000_000, t0 + 1_000_000)
