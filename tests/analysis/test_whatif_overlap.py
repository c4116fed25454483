"""What-if: collectives overlapped with the compute before them (issue 24, item 3's last change).
A collective stops waiting for the GPU work queued before it (on its stream, or on another stream
of its rank through a recorded or inferred event wait) and starts when its launch, the collectives
before it on its stream and the other members allow; everything after it still waits for it. It
is an upper bound: the collective's inputs are taken as ready."""

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


def _model(s, change="overlap-comm", value=None):
    from gpuviewer.io.comm_args import collective_args

    g = wi.graph(s.trace, collective_args(s.trace))
    dur, off, notes = wi.apply(g, wi.parse_change(change, value))
    return g, dur, off, notes


def _raw_nccl_ms(folder: str) -> float:
    """All NCCL kernels' time in the raw files of every rank (json module, not the reader)."""
    total = 0.0
    for f in sorted(os.listdir(folder)):
        with gzip.open(os.path.join(folder, f), "rt") as fh:
            ev = json.load(fh)["traceEvents"]
        total += sum(e["dur"] for e in ev if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
    return total / 1e3


def test_only_the_waits_of_collectives_on_compute_are_removed():
    s = _session("kineto", "pp_gpu")
    g, dur, off, notes = _model(s)
    changed = np.flatnonzero(off != g.e_off)
    assert len(changed) > 50 and np.array_equal(dur, g.dur)
    src, dst = g.e_src[changed] // 2, g.e_dst[changed] // 2
    assert (g.kind[dst] == dg.COMM).all() and (g.e_dst[changed] % 2 == 0).all()  # into a collective's start
    assert np.isin(g.kind[src], (dg.KERNEL, dg.COPY)).all()  # from compute or a copy
    assert np.isin(g.e_kind[changed], (dg.E_STREAM, dg.E_XSTREAM)).all()
    # only collectives whose launch is on record are freed: each still starts after its launch call
    launch = g.e_kind == dg.E_LAUNCH
    assert set(dst.tolist()) <= set((g.e_dst[launch] // 2).tolist())
    assert f"{len(set(dst.tolist())):,} of" in notes[0]


def test_pp_gpu_saves_and_no_slot_is_later():
    """Removing constraints moves nothing later (longest paths); pp_gpu's sends and receives wait for
    the stage's compute, so overlapping them saves time, never more than all its NCCL kernels took
    (from the raw files, both ranks together)."""
    s = _session("kineto", "pp_gpu")
    g, dur, off, _ = _model(s)
    base = wi.recorded(g)
    after = wi.replay(g, dur, off, base=base)
    assert (after.t <= base.t).all()
    res = s.whatif("overlap-comm")
    assert res.saves_ns > 0
    assert all(st.after_ns <= st.before_ns for st in res.steps)
    assert res.saves_ns / 1e6 <= _raw_nccl_ms(trace_path("kineto", "pp_gpu"))


def test_host_bound_ddp_saves_nothing():
    """ddp_clean's all-reduces start at their launch (both hosts are the bottleneck): no collective
    waits for the compute before it, and overlapping changes nothing (metamorphic: the change acts
    only where the wait is on record)."""
    res = _session("kineto", "ddp_clean").whatif("overlap-comm")
    assert [st.saves_ns for st in res.steps] == [0] * len(res.steps)
    assert res.notes[0].startswith("0 of ")


def test_a_trace_without_collectives():
    res = _session("kineto", "single_gpt_train.json.gz").whatif("overlap-comm")
    assert res.saves_ns == 0 and res.notes == ["no collective on record: nothing changed"]


def test_a_regex_picks_the_collectives():
    s = _session("kineto", "pp_gpu")
    g, _, all_off, _ = _model(s)
    _, _, some_off, _ = _model(s, "overlap-comm", "SendRecv|Send_|Recv_")
    _, _, none_off, notes = _model(s, "overlap-comm", "no such kernel")
    picked = np.flatnonzero(some_off != g.e_off)
    assert set(picked.tolist()) <= set(np.flatnonzero(all_off != g.e_off).tolist())
    names = {g.names[g.name[i]] for i in (g.e_dst[picked] // 2).tolist()}
    assert names and all(any(k in n for k in ("SendRecv", "Send_", "Recv_")) for n in names), names
    assert np.array_equal(none_off, g.e_off) and "matches /no such kernel/" in notes[0]


def test_command_line():
    r = run_cli("whatif", trace_path("kineto", "pp_gpu"), "--overlap-comm", "--json")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert js["change"]["kind"] == "overlap_comm" and "inputs taken as ready" in js["change"]["text"]
    api = _session("kineto", "pp_gpu").whatif("overlap-comm").to_json()
    assert js["steps"] == api["steps"] and js["saves_ms"] == pytest.approx(api["saves_ms"])
