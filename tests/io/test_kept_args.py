"""The arguments the analysis reads (NCCL kernels' collective arguments, CPU ops' recorded
shapes) are kept with the events when a Kineto trace is opened and in its cache entry
(model/arg_table.py): they equal what the file records for each event, read here with the json
module, and a session opened from the cache needs no file to give them."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest
from conftest import trace_path

from gpuviewer.io.comm_args import collective_args
from gpuviewer.io.op_shapes import op_shapes
from gpuviewer.io.session import load
from gpuviewer.model.arg_table import ArgTable
from gpuviewer.model.categories import Cat
from gpuviewer.model.work_ops import NAMES as WORK_OPS

COMM_KEYS = {
    "Process Group Name": "group",
    "Process Group Description": "group_desc",
    "Process Group Ranks": "group_ranks",
    "Collective name": "collective",
    "In msg nelems": "in_nelems",
    "Out msg nelems": "out_nelems",
    "dtype": "dtype",
    "Group size": "group_size",
    "Src Rank": "src_rank",
    "Dst Rank": "dst_rank",
}
SHAPE_KEYS = {"Input Dims": "dims", "Input type": "types", "Concrete Inputs": "concrete"}


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    """The two-rank DDP trace copied: read from the files (and cached), then opened from the
    cache; and each file's events as the json module reads them."""
    d = tmp_path_factory.mktemp("ddp")
    for f in sorted(os.listdir(trace_path("kineto", "ddp"))):
        shutil.copy(trace_path("kineto", "ddp", f), d / f)
    read = load([str(d)])
    cached = load([str(d)])
    events = {}
    for i, s in enumerate(cached.sources):
        with gzip.open(s.path, "rt") as f:
            events[i] = json.load(f)["traceEvents"]
    return d, read, cached, events


def _expected(trace, events, idx, keys):
    """Event index -> {our name: value} of the recorded keys, from the raw JSON event at the
    event's (file, ordinal)."""
    out = {}
    for i in idx.tolist():
        src = trace.lanes[int(trace.columns["lane"][i])].source
        ev = events[src][int(trace.columns["src"][i])]
        assert ev.get("name") == trace.names[int(trace.columns["name"][i])]  # the same event
        rec = {ours: v for k, ours in keys.items() if (v := (ev.get("args") or {}).get(k)) is not None}
        if rec:
            out[i] = rec
    return out


def test_collective_arguments_kept_at_open_equal_the_files(ddp):
    _d, read, cached, events = ddp
    assert cached.metadata.get("from_cache") and cached.arg_table is not None and read.arg_table is not None
    for t in (read, cached):
        t.derived.clear()
        idx = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.COMM_KERNEL)
        want = _expected(t, events, idx, COMM_KEYS)
        assert len(want) >= 10  # the trace records them (PyTorch >= 2.1)
        assert collective_args(t) == want


def test_collective_keys_of_other_events_are_not_kept(ddp):
    """Only NCCL kernels' collective keys are kept (io/comm_args.py asks no other event): the
    CPU-side record_param_comms ops record the same keys in the file, and the table has no row
    for them."""
    _d, read, cached, events = ddp
    for t in (read, cached):
        idx = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.COMM_OP)
        in_file = _expected(t, events, idx, COMM_KEYS)
        assert len(in_file) >= 10  # recorded in the file
        assert not set(in_file) & set(t.arg_table.of(t, idx))


def test_op_shapes_kept_at_open_equal_the_files(ddp):
    """The shapes of the ops with a work rule (model/work_ops.py, the only ops an analysis asks
    about) are kept, equal to the file's; other ops' recorded shapes are not kept."""
    _d, read, cached, events = ddp
    for t in (read, cached):
        idx = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.CPU_OP)
        ruled = np.array([t.names[int(t.columns["name"][i])] in WORK_OPS for i in idx.tolist()])
        want = {i: v for i, v in _expected(t, events, idx[ruled], SHAPE_KEYS).items() if "dims" in v}
        assert len(want) > 1000
        assert op_shapes(t, idx) == want
        others = {i: v for i, v in _expected(t, events, idx[~ruled], SHAPE_KEYS).items() if "dims" in v}
        assert len(others) > 1000  # recorded in the file, not kept
        assert not set(others) & set(t.arg_table.of(t, idx[~ruled]))


def test_a_cached_session_reads_no_file_for_them(ddp, tmp_path):
    d, _read, _cached, events = ddp
    t = load([str(d)])
    assert t.metadata.get("from_cache")
    idx = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.COMM_KERNEL)
    want = _expected(t, events, idx, COMM_KEYS)
    for s in t.sources:  # the files are gone: only what the cache kept can answer
        os.rename(s.path, s.path + ".away")
    try:
        t.derived.clear()
        assert collective_args(t) == want
    finally:
        for s in t.sources:
            os.rename(s.path + ".away", s.path)


def test_an_inconsistent_table_is_refused():
    table = ArgTable.build([(0, np.array([3, 1]), np.array([0, 1]))], [b'{"a":1}', b'{"b":2}'])
    arrays = table.arrays()
    assert ArgTable.from_arrays(arrays).key.tolist() == [1, 3]
    bad = dict(arrays, argtab_ref=np.array([0, 2], np.int32))  # an object that is not there
    with pytest.raises(ValueError):
        ArgTable.from_arrays(bad)
    bad = dict(arrays, argtab_off=np.array([0, 7, 99], np.int64))  # past the bytes
    with pytest.raises(ValueError):
        ArgTable.from_arrays(bad)


def test_kept_from_a_piece_whose_args_do_not_fit_the_struct(tmp_path):
    """An args value that is not an object sends the piece through the loose decoder: the kept
    values come from plain objects there, and still equal the file's."""
    kernel_args = {
        "correlation": 1,
        "Collective name": "allreduce",
        "In msg nelems": 1024,
        "dtype": "Float",
        "Process Group Name": "0",
        "Group size": 2,
        "Src Rank": None,
    }
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
            "pid": 0,
            "tid": 7,
            "ts": 100,
            "dur": 10,
            "args": kernel_args,
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 1,
            "tid": 1,
            "ts": 90,
            "dur": 5,
            "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]},
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::odd", "pid": 1, "tid": 1, "ts": 96, "dur": 1, "args": 5},
    ]
    p = tmp_path / "loose.json"
    p.write_text(json.dumps({"traceEvents": events}))
    t = load([str(p)], use_cache=False)
    assert t.arg_table is not None and len(t.arg_table) == 2
    comm = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.COMM_KERNEL)
    assert len(comm) == 1
    assert collective_args(t) == {
        int(comm[0]): {"group": "0", "collective": "allreduce", "in_nelems": 1024, "dtype": "Float", "group_size": 2}
    }
    ops = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.CPU_OP)
    mm = [i for i in ops.tolist() if t.names[int(t.columns["name"][i])] == "aten::mm"]
    assert op_shapes(t, ops) == {mm[0]: {"dims": [[2, 3], [3, 4]], "types": ["float", "float"]}}


def test_op_shapes_answers_for_the_ruled_ops_whatever_else_is_asked(ddp):
    """Unruled ops first in the request (op_shapes probes the first 16 to decide whether the file
    records shapes at all) must not hide the ruled ones' shapes; and the answer is the same from
    the kept table as from the file (the table then set aside)."""
    _d, read, _cached, events = ddp
    t = read
    idx = np.flatnonzero(np.asarray(t.columns["cat"]) == Cat.CPU_OP)
    ruled = np.array([t.names[int(t.columns["name"][i])] in WORK_OPS for i in idx.tolist()])
    src = np.asarray(t.columns["src"])
    unruled_first = idx[~ruled][np.argsort(src[idx[~ruled]], kind="stable")][:16]
    some_ruled = idx[ruled][:100]
    ask = np.concatenate([unruled_first, some_ruled])
    want = {i: v for i, v in _expected(t, events, some_ruled, SHAPE_KEYS).items() if "dims" in v}
    assert len(want) == 100
    assert op_shapes(t, ask) == want
    table, t.arg_table = t.arg_table, None  # the file path (kineto_args) gives the same
    try:
        t.derived.clear()
        assert op_shapes(t, ask) == want
    finally:
        t.arg_table = table


def test_the_work_ops_are_the_ops_with_a_rule():
    """The reader keeps shapes for model/work_ops.NAMES: exactly the ops analysis/flops.py has a
    work rule for (a rule added there without its name here would never see shapes)."""
    from gpuviewer.analysis.flops import RULES

    assert set(RULES) == WORK_OPS
