"""nsys SQLite reader against counts computed here with sqlite3, one file per schema era."""

import glob
import json
import os
import sqlite3

import numpy as np
import pytest
from conftest import COMPAT, compat_path, run_cli, trace_path

from gpuviewer.io.session import load
from gpuviewer.model.categories import Cat, LaneKind
from gpuviewer.model.summary import summarize

ALL_SQLITE = sorted(glob.glob(os.path.join(COMPAT, "*", "*.sqlite"))) + sorted(
    glob.glob(trace_path("nsys", "*.sqlite"))
)


def _db(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _tables(db):
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def truth(path):
    """Independent: GPU processes in device order, kernels and NCCL kernels per process, and
    host-side lanes (runtime threads) per process."""
    db = _db(path)
    db.text_factory = lambda b: b.decode("utf-8", "replace")
    t = _tables(db)
    procs = {}
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in t:
            for pid, dev in db.execute(f"SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId FROM {table}"):
                procs.setdefault(pid, set()).add(dev)
    order = sorted(procs, key=lambda p: (min(procs[p]), p))
    kernels, nccl = {}, {}
    if "CUPTI_ACTIVITY_KIND_KERNEL" in t:
        cols = {r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        name = "shortName" if "shortName" in cols else "demangledName"
        for pid, n, nn in db.execute(
            f"SELECT (k.globalPid >> 24) & 16777215, count(*), sum(s.value LIKE 'nccl%') "
            f"FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.{name} GROUP BY 1"
        ):
            kernels[pid], nccl[pid] = n, nn or 0
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in t:  # a graph launch traced whole is one GPU op of its own
        for pid, n in db.execute(
            "SELECT (globalPid >> 24) & 16777215, count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE GROUP BY 1"
        ):
            kernels[pid] = kernels.get(pid, 0) + n
    gpu_lanes = {}
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if table in t:
            for pid, dev, stream in db.execute(
                f"SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId, streamId FROM {table}"
            ):
                gpu_lanes.setdefault(pid, set()).add((dev, stream))
    api_threads = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in t:
        for pid, tid in db.execute(
            "SELECT DISTINCT (globalTid >> 24) & 16777215, globalTid & 16777215 FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ):
            api_threads.setdefault(pid, set()).add(tid)
    return order, procs, kernels, nccl, gpu_lanes, api_threads


@pytest.mark.parametrize("path", ALL_SQLITE, ids=os.path.basename)
def test_counts_and_lanes_match_sqlite(path):
    order, procs, kernels, nccl, gpu_lanes, api_threads = truth(path)
    trace = load([path], use_cache=False)
    s = summarize(trace)
    assert s["format"] == "nsys"
    if not order:  # no GPU work at all: host processes become ranks
        assert s["kernels"] == 0
        return
    assert [r["rank"] for r in s["ranks"]] == list(range(len(order)))
    for r, pid in zip(s["ranks"], order):
        assert r["kernels"] == kernels.get(pid, 0)
        assert r["nccl_kernels"] == nccl.get(pid, 0)
        assert r["devices"] == sorted(procs[pid])
        lanes = [ln for ln in trace.lanes if ln.rank == r["rank"]]
        gpu = {
            (ln.device, ln.stream)
            for ln in lanes
            if ln.kind in (LaneKind.GPU, LaneKind.COMM) and ln.label != "context sync"
        }
        assert gpu_lanes[pid] <= gpu
        api = {ln.stream for ln in lanes if ln.kind == LaneKind.CUDA_API}
        assert api == api_threads.get(pid, set())


def test_nsys_ddp_cli_json():
    path = trace_path("nsys", "nsys_ddp.sqlite")
    p = run_cli("info", path, "--json", "--no-cache")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["kernels"] == 10088
    assert [r["rank"] for r in out["ranks"]] == [0, 1]
    assert [r["devices"] for r in out["ranks"]] == [[0], [1]]
    for r in out["ranks"]:
        assert r["steps"] == list(range(10))
        assert r["kernels"] == 5044
        assert r["nccl_kernels"] > 100


def test_steps_nvtx_correlation_and_memory_counter():
    path = trace_path("nsys", "nsys_ddp_big.sqlite")
    t = load([path], use_cache=False)
    db = _db(path)
    utc = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    # step 6 of rank 1 from NVTX, same times as the table
    steps = {(s.rank, s.step): s for s in t.steps}
    assert len(steps) == 60
    s = steps[(1, 6)]
    row = db.execute(
        "SELECT start, end FROM NVTX_EVENTS WHERE text = 'step 6' OR textId IN "
        "(SELECT id FROM StringIds WHERE value = 'step 6') ORDER BY start"
    ).fetchall()
    assert (s.start - utc, s.end - utc) in row
    # correlation flows: runtime -> kernel pairs on the same process
    src, dst = t.flows
    assert len(dst) >= 0.99 * 29648
    assert np.all(t.columns["corr"][src] == t.columns["corr"][dst])
    # allocated-bytes counter = running sum of CUDA_GPU_MEMORY_USAGE_EVENTS
    rows = db.execute(
        "SELECT bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE "
        "((globalPid >> 24) & 16777215) = (SELECT (globalPid >> 24) & 16777215 FROM "
        "CUPTI_ACTIVITY_KIND_KERNEL WHERE deviceId = 0 LIMIT 1) AND deviceId = 0 "
        "ORDER BY start"
    ).fetchall()
    running = np.cumsum([b if op == 0 else -b for b, op in rows])
    c = [c for c in t.counters if c.rank == 0 and c.device == 0 and c.name == "allocated"][0]
    assert c.v.max() == running.max()
    # emit_nvtx op names are grouped by op
    assert "aten::add" in t.names or "aten::addmm" in t.names
    assert not any(", op_id =" in n for n in t.names)


def test_row_args_and_demangled_name():
    from gpuviewer.io.args import event_args

    t = load([trace_path("nsys", "nsys_single.sqlite")], use_cache=False)
    k = int(np.flatnonzero(t.columns["cat"] == Cat.KERNEL)[0])
    a = event_args(t, k)
    assert a["shortName"] == t.name_of(k)
    assert "demangledName" in a and "gridX" in a
    m = np.flatnonzero(t.columns["cat"] == Cat.MEMCPY)
    if len(m):
        a = event_args(t, int(m[0]))
        assert a["copyKind"] in ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")


def test_capture_environment_never_shown():
    path = compat_path("hpcgroup__pipit", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    p = run_cli("info", path, "--json", "--no-cache")
    assert p.returncode == 0
    assert "PMI_SHARED_SECRET" not in p.stdout and "ENVIRONMENT" not in p.stdout


def test_two_reports_share_one_axis(tmp_path):
    import shutil

    a = tmp_path / "a.sqlite"
    shutil.copy(trace_path("nsys", "nsys_single.sqlite"), a)
    b = tmp_path / "b.sqlite"
    shutil.copy(trace_path("nsys", "nsys_single.sqlite"), b)
    t = load([str(a), str(b)], use_cache=False)
    s = summarize(t)
    assert [r["rank"] for r in s["ranks"]] == [0, 1]
    assert s["ranks"][0]["start_ns"] == s["ranks"][1]["start_ns"]  # same UTC anchor


def _sha(p):
    import hashlib

    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def _refused(path, needle):
    """`info` refuses the file with one clear line, and leaves it untouched."""
    before = _sha(path)
    r = run_cli("info", str(path), "--no-cache")
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert _sha(path) == before


def test_not_an_nsys_export(tmp_path):
    p = tmp_path / "other.sqlite"
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    _refused(p, "not an Nsight Systems export")


def test_truncated_export(tmp_path):
    src = trace_path("nsys", "nsys_single.sqlite")
    p = tmp_path / "cut.sqlite"
    p.write_bytes(open(src, "rb").read()[:300_000])
    _refused(p, "damaged or cut short")


def test_export_without_stringids(tmp_path):
    import shutil

    p = tmp_path / "nostrings.sqlite"
    shutil.copy(compat_path("GindaChen__nsys-ai", "mock.sqlite"), p)
    db = sqlite3.connect(p)
    db.execute("DROP TABLE StringIds")
    db.commit()
    db.close()
    _refused(p, "StringIds")


def test_nsys_rep_without_nsys_explains_export(tmp_path):
    p = tmp_path / "report1.nsys-rep"
    p.write_bytes(b"\x00" * 64)
    r = run_cli("info", str(p), "--no-cache", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "nsys export --type sqlite" in r.stderr


def test_input_never_modified():
    path = trace_path("nsys", "nsys_ddp.sqlite")
    before = (os.path.getsize(path), os.stat(path).st_mtime_ns, _sha(path))
    load([path], use_cache=False)
    assert (os.path.getsize(path), os.stat(path).st_mtime_ns, _sha(path)) == before


def test_rank_variable_in_captured_environment_wins(tmp_path):
    import shutil

    p = tmp_path / "rank3.sqlite"
    shutil.copy(trace_path("nsys", "nsys_single.sqlite"), p)
    db = sqlite3.connect(p)
    db.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', 'RANK=\"3\"')")
    db.execute(
        "INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', 'SECRET_TOKEN=\"abc\"')"
    )
    db.commit()
    db.close()
    t = load([str(p), trace_path("nsys", "nsys_single.sqlite")], use_cache=False)
    assert [r.rank for r in t.ranks] == [3, 4]
    r = run_cli("info", str(p), "--json", "--no-cache")
    assert json.loads(r.stdout)["ranks"][0]["rank"] == 3
    assert "SECRET_TOKEN" not in r.stdout and "abc" not in r.stdout


def test_the_cuda_device_is_the_gpu_not_another_adapter_with_its_ordinal():
    """extra-p's con_kernel export lists three adapters with cuDevice 0 (TARGET_INFO_GPU, read
    here): a GeForce with its properties, and an Intel GPU and Microsoft's render driver with
    nothing else known. The last was taken as the CUDA device ('efficiency: Microsoft Basic
    Render Driver'); the GPU is the row with its properties recorded."""
    from conftest import raw_sql

    import gpuviewer

    path = compat_path("extra-p__extrap", "con_kernel.sqlite")
    rows = raw_sql(path, "SELECT name, cuDevice, smCount FROM TARGET_INFO_GPU")
    same = [r for r in rows if r[1] == 0]
    assert len(same) >= 2
    (gpu,) = [name for name, _cu, sm in same if sm]
    s = gpuviewer.open(path)
    (info,) = s.trace.ranks
    assert [p["name"] for p in info.device_props.values()] == [gpu]
