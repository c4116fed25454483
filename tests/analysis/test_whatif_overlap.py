"""What-if: collectives overlapped with the compute before them (issue 24, item 3's last change).
A collective stops waiting for the compute and copies on other streams of its rank (the inferred
event waits before it) and starts when its launch, the collectives before it on its stream and the
other members allow; everything after it still waits for it. Sends, collectives behind a kernel on
their own stream, without a launch or without a match on another rank keep their waits. It is an
upper bound: the collective's inputs are taken as ready."""

import gzip
import json
import os

import numpy as np
import pytest
from conftest import run_cli, trace_path

from gpuviewer.analysis import depgraph as dg
from gpuviewer.analysis import whatif as wi

_S: dict = {}


def _session(*parts):
    from gpuviewer.session import Session

    path = trace_path(*parts)
    if path not in _S:
        _S[path] = Session.open([path])
    return _S[path]


def _model(s, change="overlap-comm", value="all"):
    from gpuviewer.io.comm_args import collective_args

    args = collective_args(s.trace)
    g = wi.graph(s.trace, args)
    dur, off, notes = wi.apply(g, wi.parse_change(change, value), args)
    return g, dur, off, notes


def _raw_kernels(folder: str, pattern: str) -> list[dict]:
    out = []
    for f in sorted(os.listdir(folder)):
        with gzip.open(os.path.join(folder, f), "rt") as fh:
            ev = json.load(fh)["traceEvents"]
        out += [e for e in ev if e.get("cat") == "kernel" and pattern in e.get("name", "")]
    return out


def test_only_event_waits_of_launched_matched_collectives_are_removed():
    """pp_gpu: what changes are the inferred event waits (another stream's kernel or copy) into
    the start of a receive whose launch is on record and whose kernel another rank matches; the
    sends keep theirs (the data they send is the compute just before them)."""
    from gpuviewer.io.comm_args import collective_args

    s = _session("kineto", "pp_gpu")
    g, dur, off, notes = _model(s)
    changed = np.flatnonzero(off != g.e_off)
    assert len(changed) > 20 and np.array_equal(dur, g.dur)
    src, dst = g.e_src[changed] // 2, g.e_dst[changed] // 2
    assert (g.kind[dst] == dg.COMM).all() and (g.e_dst[changed] % 2 == 0).all()  # into a collective's start
    assert np.isin(g.kind[src], (dg.KERNEL, dg.COPY)).all()  # from compute or a copy
    assert (g.e_kind[changed] == dg.E_XSTREAM).all()  # never the collective's own stream order
    freed = set(dst.tolist())
    assert freed <= set((g.e_dst[g.e_kind == dg.E_LAUNCH] // 2).tolist())  # each still after its launch
    assert freed <= set((g.e_dst[g.e_kind == dg.E_COLL] // 2).tolist())  # each matched on another rank
    args = collective_args(s.trace)
    said = {args.get(int(g.ev[i]), {}).get("collective") for i in freed}
    assert said == {"recv"}
    # every send keeps every edge
    sends = [
        i for i in np.flatnonzero(g.kind == dg.COMM).tolist() if args.get(int(g.ev[i]), {}).get("collective") == "send"
    ]
    assert len(sends) > 20 and not set(sends) & freed
    assert notes[0].startswith(f"{len(freed)} of the 108 NCCL kernels (all ranks) that ran")
    assert len(_raw_kernels(trace_path("kineto", "pp_gpu"), "nccl")) == 108  # the count said, from the files


def test_no_slot_is_later_and_the_saving_is_bounded():
    """Removing constraints moves nothing later (longest paths); pp_gpu's receives wait for the
    stage's compute, so overlapping them saves time, never more than the receives' kernels took
    (from the raw files, both ranks together); no step gets longer."""
    s = _session("kineto", "pp_gpu")
    g, dur, off, _ = _model(s)
    base = wi.recorded(g)
    after = wi.replay(g, dur, off, base=base)
    assert (after.t <= base.t).all()
    res = s.whatif("overlap-comm", "all")
    assert res.saves_ns > 0
    assert all(st.after_ns <= st.before_ns for st in res.steps)
    raw = _raw_kernels(trace_path("kineto", "pp_gpu"), "nccl")
    recv_ms = sum(e["dur"] for e in raw if (e.get("args") or {}).get("Collective name") == "recv") / 1e3
    assert recv_ms > 0 and res.saves_ns / 1e6 <= recv_ms


@pytest.mark.parametrize("parts", [("nsys", "nsys_ddp.sqlite"), ("kineto", "fsdp"), ("kineto", "tp")])
def test_no_step_gets_longer(parts):
    """Also the first step, whose start the work before it (freed here) would move earlier: that
    work belongs to no step (nsys_ddp's step 0 said -0.081 ms before). tp's all-reduces run on the
    compute stream itself: they stay in its order, nothing saved."""
    res = _session(*parts).whatif("overlap-comm", "all")
    assert all(st.after_ns <= st.before_ns for st in res.steps), [(st.step, st.saves_ns) for st in res.steps]
    if parts[1] == "tp":
        assert res.saves_ns == 0 and "left waiting: 207 behind a kernel or copy on their own stream" in res.notes[0]


def test_one_rank_of_a_two_rank_job_frees_nothing():
    """A collective no other rank's kernel matches holds the wait for the rank not opened: left as
    recorded (pp_gpu's rank 0 alone saved 122.5 ms, more than both ranks together, before)."""
    folder = trace_path("kineto", "pp_gpu")
    res = _session("kineto", "pp_gpu", sorted(os.listdir(folder))[0]).whatif("overlap-comm", "all")
    assert res.saves_ns == 0
    assert "with no other rank's kernel matched" in res.notes[0] and res.notes[0].startswith("0 of the")


def test_host_bound_ddp_saves_nothing():
    """ddp_clean's all-reduces start at their launch (both hosts are the bottleneck): no collective
    waits for the compute before it, and overlapping changes nothing (metamorphic: the change acts
    only where the wait is on record)."""
    res = _session("kineto", "ddp_clean").whatif("overlap-comm", "all")
    assert [st.saves_ns for st in res.steps] == [0] * len(res.steps)
    # (the waits the host recorded, cudaStreamWaitEvent, are taken off: none held a collective back)
    assert "no longer wait for compute or copies on another stream" in res.notes[0]


def test_a_trace_without_collectives():
    res = _session("kineto", "single_gpt_train.json.gz").whatif("overlap-comm", "all")
    assert res.saves_ns == 0 and res.notes == ["no collective on record: nothing changed"]


def test_a_regex_picks_the_collectives():
    """By kernel name (or recorded collective name): fsdp's AllGather kernels, counted in the raw files."""
    s = _session("kineto", "fsdp")
    n = len(_raw_kernels(trace_path("kineto", "fsdp"), "AllGather"))
    assert n > 10
    _, _, _, notes = _model(s, "overlap-comm", "allgather")
    assert f" of the {n} NCCL kernels (all ranks) that match " in notes[0]
    g, _, none_off, notes = _model(s, "overlap-comm", "no such kernel")
    assert np.array_equal(none_off, g.e_off) and "matches /no such kernel/" in notes[0]


def test_command_line():
    r = run_cli("whatif", trace_path("kineto", "pp_gpu"), "--overlap-comm", "all", "--json")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert js["change"]["kind"] == "overlap_comm" and "inputs taken as ready" in js["change"]["text"]
    api = _session("kineto", "pp_gpu").whatif("overlap-comm", "all").to_json()
    assert js["steps"] == api["steps"] and js["saves_ms"] == pytest.approx(api["saves_ms"])


def _exposed(analysis: dict) -> list[dict]:
    def walk(fs):
        for f in fs:
            yield f
            yield from walk(f.get("children", []))

    return [f for f in walk(analysis["findings"]) if f["rule"] == "exposed_communication"]


@pytest.mark.parametrize("parts", [("kineto", "pp_gpu"), ("kineto", "ddp_clean")])
def test_exposed_communication_is_priced_by_overlapping(parts):
    """Exposed communication is fixed by overlapping it: the finding's saving alone is this change's
    replay (the whatif command's figures), never more than the communication it calls exposed nor,
    in pp_gpu, than the receives' kernels took in the raw files. ddp_clean's hosts are the
    bottleneck: its 28 ms a step of exposed communication saves nothing, and says so (the audit:
    +16 ms a step of communication in ddp_nop2p left the step time unchanged)."""
    r = run_cli("analyze", trace_path(*parts), "--json")
    assert r.returncode == 0, r.stderr
    fs = _exposed(json.loads(r.stdout))
    assert fs, "no exposed_communication finding"
    res = _session(*parts).whatif("overlap-comm", "all")
    by_step = {str(st.step): st.saves_ns / 1e6 for st in res.steps}
    for f in fs:
        assert f["saving"].startswith("collectives overlapped with the compute before them")
        if not f["saves_after_above"]:
            assert f["saves_ms_by_step"] == pytest.approx(by_step, abs=1e-3)
        assert f["saves_ms_alone_in_steps"] <= f["metrics"]["exposed_ms_per_step"]
    if parts[1] == "pp_gpu":
        raw = _raw_kernels(trace_path(*parts), "nccl")
        recv = sum(e["dur"] for e in raw if (e.get("args") or {}).get("Collective name") == "recv") / 1e3
        assert 0 < sum(f["saves_ms"] for f in fs if not f["saves_after_above"]) <= recv
    else:
        # alone it saves nothing (the hosts are the bottleneck); once the launch overhead above is
        # gone the all-reduces wait for the compute their host recorded a wait for
        # (cudaStreamWaitEvent), and overlapping them may save some: rated by that saving
        assert all(f["saves_ms_alone_in_steps"] == 0 for f in fs)
        assert all(f["severity"] == "low" for f in fs if not f["saves_after_above"])
        lines = run_cli("analyze", trace_path(*parts)).stdout.splitlines()
        at = [i for i, ln in enumerate(lines) if "exposed_communication" in ln]
        assert at and all(
            lines[i + 1].strip().startswith("what-if, collectives overlapped with the compute") for i in at
        )
        # nothing alone: said so, or said as a saving on top of the fixes above
        assert all(
            "would not make the steps measurably faster" in lines[i + 1]
            or "with the top-level findings above its cause fixed, fixing this (instead of its cause)" in lines[i + 1]
            for i in at
        )
