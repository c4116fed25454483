"""The query layer (gpuviewer.open, DataFrames, SQL, stats) against numbers computed here from
the raw files: SQL over the nsys export's own tables, and the Kineto JSON read with json."""

import json
import os
import re
import sqlite3
from collections import defaultdict

import numpy as np
import pytest
from conftest import SAMPLES, run_cli, shared_listdir, trace_path
from kineto_truth import load_json

import gpuviewer

NSYS = sorted(os.path.join(trace_path("nsys"), f) for f in shared_listdir(trace_path("nsys")) if f.endswith(".sqlite"))
KINETO = [
    trace_path("kineto", "ddp_clean"),
    trace_path("kineto", "step_outlier.json.gz"),
    trace_path("kineto", "gpu_straggler"),
    SAMPLES + "/ddp",
]
_SUFFIX = re.compile(r"_v\d+$")


def _ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _nsys_sums(path, sql):
    """name -> [count, total, min, max] from a query returning (name, dur) rows."""
    out = {}
    with _ro(path) as db:
        for name, n, tot, lo, hi in db.execute(sql):
            name = _SUFFIX.sub("", name)
            if name in out:  # names that differ only by the CUPTI version suffix: one row
                a = out[name]
                out[name] = [a[0] + n, a[1] + tot, min(a[2], lo), max(a[3], hi)]
            else:
                out[name] = [n, tot, lo, hi]
    return out


def _ours(df):
    return {r.name: [r.instances, r.total_ns, r.min_ns, r.max_ns] for r in df.itertuples()}


@pytest.mark.parametrize("path", NSYS, ids=os.path.basename)
def test_nsys_kernel_and_api_summaries_equal_sql_over_the_export(path):
    s = gpuviewer.open(path)
    kern = _nsys_sums(
        path,
        """SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start),
                                      max(k.end - k.start)
                               FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
                               GROUP BY s.value""",
    )
    assert _ours(s.stats("kern")) == kern
    # the API of processes that own GPU work (the ranks; nsys stats would add the others)
    api = _nsys_sums(
        path,
        """SELECT s.value, count(*), sum(r.end - r.start), min(r.end - r.start),
                                     max(r.end - r.start)
                              FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                              WHERE (r.globalTid >> 24) & 16777215 IN (
                                  SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL
                                  UNION SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_MEMCPY
                                  UNION SELECT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_MEMSET)
                              GROUP BY s.value""",
    )
    assert _ours(s.stats("api")) == api
    with _ro(path) as db:
        n_kernels = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        # the source and destination memory as the export's own enum labels them ("Pageable")
        mem = {
            (k, src, dst): (n, b)
            for k, src, dst, n, b in db.execute(
                """SELECT copyKind, s.label, d.label, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY m
                   JOIN ENUM_CUDA_MEM_KIND s ON s.id = m.srcKind JOIN ENUM_CUDA_MEM_KIND d ON d.id = m.dstKind
                   GROUP BY 1, 2, 3"""
            )
        }
        memset = db.execute("SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchone()
    assert len(s.kernels) == n_kernels
    m = s.stats("mem").set_index("kind")
    names = {1: "HtoD", 2: "DtoH", 8: "DtoD", 10: "PtoP"}
    for (k, src, dst), (n, b) in mem.items():
        kind = f"{names[k]} ({src} -> {dst})"
        assert (m.loc[kind, "instances"], m.loc[kind, "total_bytes"]) == (n, b)
    if memset[0]:
        assert (m.loc["memset", "instances"], m.loc["memset", "total_bytes"]) == tuple(memset)
    total = m["total_ns"].sum()
    assert m["time_pct"].sum() == pytest.approx(100.0) and total > 0


def _kineto_files(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if ".json" in f)
    return [path]


@pytest.mark.parametrize("path", KINETO, ids=os.path.basename)
def test_kineto_summaries_equal_an_independent_count_from_the_json(path):
    s = gpuviewer.open(path)
    want = {
        "kern": defaultdict(lambda: [0, 0.0]),
        "api": defaultdict(lambda: [0, 0.0]),
        "nvtx": defaultdict(lambda: [0, 0.0]),
    }
    mem_bytes = defaultdict(int)
    cats = {"kernel": "kern", "cuda_runtime": "api", "cuda_driver": "api", "user_annotation": "nvtx"}
    for f in _kineto_files(path):
        for e in load_json(f)[0]:
            if e.get("ph") != "X":
                continue
            rep = cats.get(e.get("cat"))
            if rep == "nvtx" and e["name"].startswith("nccl:"):
                rep = None  # PyTorch's collective ranges are communication ops, not NVTX-like ranges
            if rep:
                w = want[rep][e["name"]]
                w[0] += 1
                w[1] += float(e.get("dur", 0)) * 1000.0
            if e.get("cat") in ("gpu_memcpy", "gpu_memset"):
                kind = "memset" if e["name"].lower().startswith("memset") else e["name"].split(None, 1)[1]
                mem_bytes[kind] += int((e.get("args") or {}).get("bytes", 0))
    for rep, names in want.items():
        got = s.stats(rep).set_index("name")
        assert set(got.index) == set(names), rep
        for name, (n, total_ns) in names.items():
            assert got.loc[name, "instances"] == n
            # µs with three decimals in the file: 1 ns of rounding an event at most
            assert abs(got.loc[name, "total_ns"] - total_ns) <= n + 1
    got_mem = s.stats("mem").set_index("kind")["total_bytes"].to_dict()
    assert got_mem == dict(mem_bytes)


@pytest.mark.parametrize(
    "path",
    NSYS + [trace_path("kineto", p) for p in shared_listdir(trace_path("kineto"))] + [SAMPLES + "/ddp"],
    ids=os.path.basename,
)
def test_kernels_frame_counts_what_info_counts(path):
    r = run_cli("info", "--json", path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    s = gpuviewer.open(path)
    k = s.kernels
    assert len(k) == info["kernels"]
    for rr in info["ranks"]:
        assert int((k["rank"] == rr["rank"]).sum()) == rr["kernels"]
        assert int(((k["rank"] == rr["rank"]) & (k["kind"] == "comm")).sum()) == rr["nccl_kernels"]
    assert k["start"].dtype == np.int64 and str(k["name"].dtype) == "category"
    assert (k["end"] - k["start"] == k["dur"]).all() and (k["dur"] >= 0).all()


def test_slices_filters_agree_with_filtering_the_whole_table():
    s = gpuviewer.open(trace_path("kineto", "ddp_clean"))
    every = s.slices
    assert len(every) == len(s.trace)
    # the whole table hands pandas the store's columns without copying them
    assert np.shares_memory(every["start"].to_numpy(), s.trace.columns["start"])
    lo = int(s.steps["start"].iloc[1])
    hi = lo + 5_000_000
    part = s.slices_in(rank=1, kind="gpu", start_ns=lo, end_ns=hi)
    ref = every[(every["rank"] == 1) & (every["lane_kind"] == "gpu") & (every["end"] > lo) & (every["start"] < hi)]
    assert len(part) > 0
    assert sorted(part["id"]) == sorted(ref["id"])
    assert (
        part.set_index("id")
        .sort_index()["name"]
        .astype(str)
        .equals(ref.set_index("id").sort_index()["name"].astype(str))
    )


def test_per_rank_stats_add_up_to_all_ranks_and_time_shares_to_100():
    s = gpuviewer.open(trace_path("kineto", "gpu_straggler"))
    every = s.stats("kern").set_index("name")
    parts = [s.stats("kern", rank=r).set_index("name") for r in s.ranks]
    for name in every.index:
        assert sum(int(p["instances"].get(name, 0)) for p in parts) == every.loc[name, "instances"]
        assert sum(int(p["total_ns"].get(name, 0)) for p in parts) == every.loc[name, "total_ns"]
        assert every.loc[name, "min_ns"] <= every.loc[name, "med_ns"] <= every.loc[name, "max_ns"]
    assert every["time_pct"].sum() == pytest.approx(100.0)
    assert list(every["total_ns"]) == sorted(every["total_ns"], reverse=True)
    # collectives: every matched instance once per member rank; matched count as the analysis says
    nccl = s.stats("nccl")
    summary = {(c["group"], c["name"]): c["count"] for c in s.analysis_json["collectives"]}
    # (rows of kernels matched to no collective on the other ranks have matched 0: left out here)
    assert {(r.group, r.collective): r.matched for r in nccl.itertuples() if r.matched} == summary
    assert (nccl[nccl["matched"] > 0]["busbw_gbps"] > 0).all()
    assert nccl["kernels"].sum() == (s.kernels["kind"] == "comm").sum()


def test_tables_hold_what_the_analysis_says():
    s = gpuviewer.open(SAMPLES + "/ddp")
    st = s.steps
    n = sum(len(r["steps"]) for r in s.analysis_json["ranks"])
    assert len(st) == n and (st["dur"] > 0).all()
    assert (st["idle_ns"] <= st["dur"]).all() and (st["compute_ns"] <= st["dur"]).all()
    f = s.findings
    top = [x["title"] for x in s.analysis_json["findings"]]
    assert list(f[f["parent"].isna()]["title"]) == top
    c = s.counters
    assert len(c) == sum(len(x.t) for x in s.trace.counters)


def test_sql_over_the_tables_and_refusals():
    s = gpuviewer.open(trace_path("kineto", "step_outlier.json.gz"))
    got = s.sql("SELECT name, count(*) AS n, sum(dur) AS t FROM kernels GROUP BY name ORDER BY t DESC")
    k = s.kernels.groupby("name", observed=True)["dur"].agg(["size", "sum"])
    assert {r.name: (r.n, r.t) for r in got.itertuples()} == {n: (a, b) for n, (a, b) in k.iterrows()}
    top = s.sql("SELECT kind, total_bytes FROM mem_sum ORDER BY total_ns DESC LIMIT 1")
    assert top["kind"][0] == "DtoH (Device -> Pageable)"  # the planted 4 GB pageable copy
    from gpuviewer.query.sql import Query, QueryError

    q = Query(s)
    for bad, word in (
        ("SELEC 1", "syntax"),
        ("SELECT * FROM nope", "nope"),
        ("SELECT * FROM read_csv('/etc/hostname')", "disabled"),
        (f"COPY kernels TO '{os.getcwd()}/x.csv'", "disabled"),
    ):
        with pytest.raises(QueryError, match=word):
            q.run(bad)
    assert not os.path.exists("x.csv")
    df, more = q.run("SELECT * FROM slices ORDER BY start", limit=10)
    assert len(df) == 10 and more
    assert q.run("SELECT 1 AS one")[0]["one"][0] == 1  # still usable after errors
    # the catalog lists every table (SHOW TABLES named none of them, and listed nothing)
    assert set(q.run("SHOW TABLES")[0]["name"]) == set(q.tables())
    listed = q.run("SELECT table_name FROM information_schema.tables")[0]["table_name"]
    assert set(listed) == set(q.tables())


def test_sql_and_stats_commands():
    path = trace_path("nsys", "nsys_ddp.sqlite")
    with _ro(path) as db:
        n = db.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    r = run_cli("sql", path, "SELECT count(*) FROM kernels")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == str(n) == "10088"
    r = run_cli("sql", path, "SELECT name, count(*) AS n FROM kernels GROUP BY name ORDER BY n DESC", "--json")
    rows = json.loads(r.stdout)
    assert sum(x["n"] for x in rows) == n
    r = run_cli("sql", path, "SELECT * FROM nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("stats", path, "--report", "kern", "--csv")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("name,time_pct,total_ns,instances")
    import csv  # names may hold commas: quoted by CSV
    import io

    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert sum(int(x["instances"]) for x in rows) == n
    # grouped by the export's short names (what nsys stats' ':base' option does), and said so
    with _ro(path) as db:
        short = db.execute(
            "SELECT count(DISTINCT s.value) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName"
        ).fetchone()[0]
    assert len(rows) == short and "note" not in r.stderr  # CSV: rows only
    r = run_cli("stats", path, "--report", "kern")
    assert r.stdout.startswith("note: Nsight Systems kernels are grouped by their short name")
    # an nsys export records no process group: each rank's NCCL streams, numbered from 1 in order
    # of first use ('stream #0' read as CUDA's default stream; the raw NCCL streams are 7 and 17)
    r = run_cli("stats", path, "--report", "nccl", "--csv")
    groups = {x["group"] for x in csv.DictReader(io.StringIO(r.stdout))}
    assert groups == {"NCCL stream #1 (in order of first use)", "NCCL stream #2 (in order of first use)"}, groups
    r = run_cli("stats", path, "--report", "nccl", "--rank", "7")
    assert r.returncode == 2 and "no rank 7" in r.stderr
    r = run_cli("stats", SAMPLES + "/ddp", "--report", "api")
    assert r.returncode == 0 and "cudaLaunchKernel" in r.stdout
    # Kineto's nccl:* ranges are communication ops: not in the NVTX report, and it says so
    r = run_cli("stats", trace_path("kineto", "ddp"), "--report", "nvtx", "--csv")
    names = {x["name"] for x in csv.DictReader(io.StringIO(r.stdout))}
    assert names and not any(n.startswith("nccl:") for n in names)
    r = run_cli("stats", trace_path("kineto", "ddp"), "--report", "nvtx")
    assert r.stdout.startswith("note: PyTorch's nccl:* ranges are kept as communication ops")


def test_sql_collectives_unknown_sizes_are_null():
    """HTA's trace_filter records no message sizes on its NCCL kernels (the raw args, read here):
    SQL sees their bytes as NULL, not -1 (sum(bytes) came out as minus the count)."""
    from conftest import compat_path

    folder = compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter")
    sized = 0
    for name in sorted(os.listdir(folder)):
        events, _ = load_json(os.path.join(folder, name))
        nccl = [e for e in events if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")]
        assert nccl
        sized += sum(1 for e in nccl if (e.get("args") or {}).get("In msg nelems") is not None)
    s = gpuviewer.open(folder)
    got = s.sql("SELECT count(*) AS n, count(bytes) AS known, sum(bytes) AS total FROM collectives")
    assert got["n"][0] > 0 and got["known"][0] == sized == 0
    assert got["total"].isna()[0]


def test_collectives_outside_the_steps_are_matched_and_their_waits_bounded():
    """nsys_ddp: DDP's first broadcasts, an all-gather and an all-reduce run before the first
    NVTX step; the NCCL report matched 2 of its 10 Broadcast kernels and none of the others. Every
    NCCL kernel of the export now has its collective; those launched outside every 'step N' range
    (their launch call's time against the process's ranges, from the export here) have step NULL.
    A sender whose kernel ended by the last arrival waited for nothing (a broadcast's root)."""
    from conftest import raw_sql

    path = trace_path("nsys", "nsys_ddp.sqlite")
    kernels = raw_sql(
        path,
        "SELECT k.globalPid >> 24 & 16777215, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.shortName JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
        "ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24 "
        "WHERE s.value LIKE 'nccl%'",
    )
    steps = raw_sql(
        path, "SELECT globalTid >> 24 & 16777215, start, end FROM NVTX_EVENTS WHERE text GLOB 'step [0-9]*'"
    )
    outside = sum(1 for pid, t in kernels if not any(p == pid and a <= t < b for p, a, b in steps))
    assert outside >= 10
    s = gpuviewer.open(path)
    got = s.sql("SELECT count(*) AS n, count(step) AS in_steps FROM collectives")
    assert got["n"][0] == len(kernels)
    assert got["n"][0] - got["in_steps"][0] == outside
    rows = s.sql('SELECT "group", collective, step, "order", start, "end", wait FROM collectives')
    rows["step"] = rows["step"].fillna(-1)
    last = rows.groupby(["group", "collective", "step", "order"])["start"].transform("max")
    sender = (rows["end"] <= last) & rows["collective"].isin(["Broadcast", "Reduce", "SendRecv"])
    assert sender.any()  # a broadcast's root ended before its peer arrived
    waited = np.minimum(last, rows["end"]) - np.minimum(rows["start"], rows["end"])
    assert (rows["wait"] == np.where(sender, 0, waited)).all()


def test_kernels_running_from_before_the_capture_pair_from_their_last():
    """pp_gpu: its GPUs run far behind their hosts, so each rank's capture begins with NCCL
    kernels launched before it (no launch call on record: rank 0 holds 5, rank 1 7, counted in
    the raw files here). Paired from the first, each pair's kernels ended 60 ms apart; the ranks'
    captures cut that earlier work at different points, so they pair from the last: the members
    of each send/receive end together, and the waits are rank 0's (3.3, 2.7, 2.5, 1.7, 2.2 ms)."""
    folder = trace_path("kineto", "pp_gpu")
    early = {}
    for r, name in enumerate(sorted(os.listdir(folder))):
        events, _ = load_json(os.path.join(folder, name))
        calls = {
            (e.get("args") or {}).get("correlation") for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
        }
        nccl = [e for e in events if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")]
        early[r] = sorted(e["ts"] + e["dur"] for e in nccl if (e.get("args") or {}).get("correlation") not in calls)
    n = min(len(v) for v in early.values())
    assert n >= 1 and len(early[0]) != len(early[1]), {r: len(v) for r, v in early.items()}
    s = gpuviewer.open(folder)
    rows = s.sql('SELECT rank, "group", collective, "order", start, "end", wait FROM collectives WHERE step IS NULL')
    assert sorted(rows.groupby("rank").size().tolist()) == [n, n]
    ends = rows.groupby(["group", "collective", "order"])["end"].agg(["min", "max"])
    assert (ends["max"] - ends["min"]).max() < 1_000_000, ends  # ns: together, not 60 ms apart
    # the raw ends of the last n early kernels of each rank, pair by pair, within 0.1 ms
    for a, b in zip(early[0][-n:], early[1][-n:]):
        assert abs(a - b) < 100, (a, b)  # us


def test_nccl_report_keeps_a_send_and_its_receive_in_one_row():
    """pp_gpu: the NCCL report listed its send and receive kernels as 'Send' and 'Recv' rows of the
    process group, with no match, beside 'p2p 0->1' and 'p2p 1->0' rows of matches and no kernels.
    A transfer is one row by its direction: rank 0's sends and rank 1's receives in 'p2p 0->1'
    (the raw kernels' 'Collective name', counted here), half of them matched instances."""
    folder = trace_path("kineto", "pp_gpu")
    raw = {}
    for r, name in enumerate(sorted(os.listdir(folder))):
        events, _ = load_json(os.path.join(folder, name))
        for e in events:
            if e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl"):
                what = (e.get("args") or {}).get("Collective name")
                if what in ("send", "recv"):
                    raw[(r, what)] = raw.get((r, what), 0) + 1
    s = gpuviewer.open(folder)
    rows = s.sql('SELECT "group", collective, kernels, matched FROM nccl_sum')
    assert not rows["collective"].isin(["Send", "Recv"]).any()
    got = {
        g: (int(k), int(m)) for g, k, m in zip(rows["group"], rows["kernels"], rows["matched"]) if g.startswith("p2p ")
    }
    assert got["p2p 0->1"][0] == raw[(0, "send")] + raw[(1, "recv")]
    assert got["p2p 1->0"][0] == raw[(1, "send")] + raw[(0, "recv")]
    assert all(k == 2 * m for k, m in (got["p2p 0->1"], got["p2p 1->0"]))
