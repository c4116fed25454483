"""Collectives of which the session holds one member (one rank's trace of a two-rank job): listed
with what one rank can say, count, bytes, kernel time and a floor on the bandwidth; the wait and
transfer are not told apart and are left empty (they were not listed at all before: an audit
found `analyze --json` of nccl_parser_config with "collectives": []). The figures are checked
against the raw file read here with json and gzip."""

from __future__ import annotations

import gzip
import json
import os
import statistics

import pytest
from conftest import COMPAT, flat_findings, run_cli, run_cli_once, trace_path, write_json_gz

ONE_RANK = os.path.join(COMPAT, "facebookresearch__HolisticTraceAnalysis", "nccl_parser_config")
_SIZE = {"Float": 4, "BFloat16": 2, "Half": 2, "Byte": 1, "Char": 1, "Long": 8, "Int": 4, "Double": 8}


def _analyze(path: str, *more: str):
    p = run_cli_once("analyze", path, *more)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _raw_nccl() -> dict[str, list[dict]]:
    """NCCL kernels of the file by collective (the kernel name's word after ncclKernel_)."""
    d = json.load(gzip.open(os.path.join(ONE_RANK, "nccl_data.json.gz")))
    out: dict[str, list[dict]] = {}
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and e.get("name", "").startswith("ncclKernel_"):
            out.setdefault(e["name"].split("_")[1], []).append(e)
    return out


def test_one_ranks_collectives_are_listed_with_what_one_rank_can_say():
    rows = json.loads(_analyze(ONE_RANK, "--json"))["collectives"]
    raw = _raw_nccl()
    assert sorted(r["name"] for r in rows) == sorted(raw)
    for r in rows:
        evs = raw[r["name"]]
        assert r["alone"] is True and r["count"] == len(evs) and r["ranks"] == 1
        assert r["kernel_ms"] == pytest.approx(statistics.mean(e["dur"] for e in evs) / 1e3, abs=1e-3)
        nbytes = [e["args"]["In msg nelems"] * _SIZE[e["args"]["dtype"]] for e in evs]
        # a size some instance had (Broadcast: 424 and 212,480 bytes; their mean median is neither)
        assert r["bytes"] == statistics.median_low(nbytes) and r["bytes"] in nbytes
        # bytes over the kernels' time (which holds any wait for the peers)
        assert r["kernel_algbw_gbps"] == pytest.approx(sum(nbytes) / sum(e["dur"] * 1e3 for e in evs), rel=1e-3)
        # nothing claimed that needs the peer's arrivals
        assert r["transfer_ms"] is None and r["algbw_gbps"] is None and r["busbw_gbps"] is None
        assert r["wait_ms"] == {} and r["late_count"] == {}


def test_the_report_says_what_is_unknown():
    md = _analyze(ONE_RANK, "--md")
    line = next(x for x in md.splitlines() if "AllReduce" in x and x.startswith("|"))
    assert "wait unknown: its peers' traces are not in the session" in line, line
    assert "~6.558 (bytes / kernel time)" in line, line


def test_a_job_with_every_rank_has_no_such_rows():
    rows = json.loads(_analyze(trace_path("kineto", "ddp_clean"), "--json"))["collectives"]
    assert rows and not any(r.get("alone") for r in rows)
    assert all(r["transfer_ms"] is not None for r in rows)


def test_a_rank_with_a_step_more_than_its_peer_is_not_alone(tmp_path):
    """ddp with rank 1's last profiled step cut off (its events from that ProfilerStep on dropped,
    written here): rank 0's collectives of that step have no counterpart. They were listed as a
    second AllReduce row 'alone' ('its peers' traces are not in the session', beside the matched
    row of the same group); they are unmatched kernels of a group both ranks hold."""
    src = os.path.dirname(trace_path("kineto", "ddp", "ddp_rank0.json.gz"))
    out = tmp_path / "ddp_cut"
    out.mkdir()
    for name in ("ddp_rank0.json.gz", "ddp_rank1.json.gz"):
        d = json.load(gzip.open(os.path.join(src, name)))
        if name.endswith("1.json.gz"):
            last = max(e["ts"] for e in d["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#"))
            d["traceEvents"] = [e for e in d["traceEvents"] if e.get("ph") == "M" or e.get("ts", 0) < last]
        write_json_gz(out / name, d)
    p = run_cli("analyze", str(out), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout)
    assert got["unmatched_collectives"] > 0  # the cut step's collectives of rank 0
    rows = got["collectives"]
    assert rows and not any(r.get("alone") for r in rows), rows


def test_one_ranks_nccl_time_is_not_split_into_waiting_and_transfer():
    """With no other rank's arrivals, nothing tells a collective's wait from its transfer: the
    rank line and the low-utilization finding said "NCCL waiting 0%, NCCL transfer 7%" (all of it
    counted as transfer; fsdp's rank 0 alone, which waits most of its step for rank 1, said
    "NCCL transfer 93%" and advised checking the link). They now give one NCCL share and say why;
    a job with both ranks keeps the split."""
    out = json.loads(_analyze(ONE_RANK, "--json"))
    (r,) = out["ranks"]
    assert r["nccl_split"] is False
    text = _analyze(ONE_RANK)
    line = next(x for x in text.splitlines() if x.startswith("rank 0:"))
    nccl = r["utilization_breakdown"]["nccl_wait"] + r["utilization_breakdown"]["nccl_transfer"]
    assert f"NCCL {nccl:.0%} (waiting not told apart from transfer: none of its peers' arrivals on record)" in line
    assert "NCCL waiting" not in line and "NCCL transfer" not in line
    low = [f for f in flat_findings(out["findings"]) if f["rule"] == "low_gpu_utilization"]
    assert low and all("NCCL transfer" not in f["title"] and "NCCL waiting" not in f["title"] for f in low)
    both = json.loads(_analyze(trace_path("kineto", "ddp_clean"), "--json"))
    assert not any("nccl_split" in x for x in both["ranks"])
    assert "NCCL waiting" in _analyze(trace_path("kineto", "ddp_clean"))


def test_a_lone_rank_that_mostly_waits_is_not_told_to_check_its_link():
    """fsdp's rank 0 opened alone: 93% of its GPU time is NCCL kernels, most of it waiting for rank 1
    (rank 0 waits 105-109 ms of its ~120 ms step: README). Its advice was the one for collectives
    moving data ("check the link's bandwidth"); it now says the two are not told apart."""
    p = run_cli_once("analyze", trace_path("kineto", "fsdp", "fsdp_rank0.json.gz"), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    (f,) = [x for x in json.loads(p.stdout)["findings"] if x["rule"] == "low_gpu_utilization"]
    assert f["metrics"]["mostly"] == "nccl"
    assert "not told apart" in f["advice"] and "link's bandwidth" not in f["advice"]
