"""Bounded queries (issue 30): `gpuviewer sql --timeout` stops an endless query, a memory limit
of its own stops one that grows without end, an empty query and a query file that is not a
regular file are one-line refusals, and nothing is written beside the inputs or in the working
folder. Out-of-range device ids in an nsys export give clean output from sql and stats."""

import json
import os
import shutil
import sqlite3
import stat

import pytest
from conftest import ROOT, SAMPLES, run_cli_once, trace_path
from hostile import folder_state, run

from gpuviewer.query.sql import parse_size

DDP = os.path.join(SAMPLES, "ddp")
ENDLESS = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"


def _one_line(r, rc: int = 2) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == rc, (r.returncode, r.stderr[-2000:])
    lines = r.lines()
    assert len(lines) == 1, lines[:10]
    return lines[0]


def test_endless_query_ends_at_timeout():
    r = run("sql", DDP, ENDLESS, "--timeout", "2")
    line = _one_line(r)
    assert line == "gpuviewer: SQL: the query ran longer than 2 s and was stopped (--timeout)", line
    assert r.stdout == ""


def test_query_within_timeout_answers():
    r = run("sql", DDP, "SELECT count(*) AS n FROM kernels", "--timeout", "30", "--json")
    assert r.returncode == 0 and r.lines() == [], r.stderr
    info = json.loads(run_cli_once("info", DDP, "--json").stdout)  # shared by modules
    assert json.loads(r.stdout) == [{"n": info["kernels"]}]


def test_memory_limit_stops_a_growing_query(tmp_path):
    """A query that materialises ~24 GB stops at the limit, spills nothing to disk (no
    temp_directory: not in the working folder, not beside the input) and stays near the limit."""
    before = folder_state(str(tmp_path))
    r = run(
        "sql",
        DDP,
        "SELECT list(range) FROM range(3000000000)",
        "--memory-limit",
        "300MB",
        "--timeout",
        "300",
        env={"TMPDIR": str(tmp_path)},
        fork=False,
    )
    line = _one_line(r)
    assert line == ("gpuviewer: SQL: the query needed more than 300 MB of memory and was stopped (--memory-limit)"), (
        line
    )
    assert folder_state(str(tmp_path)) == before
    assert not os.path.exists(os.path.join(ROOT, ".tmp"))  # DuckDB spills to .tmp in the working folder by default
    assert r.rss_mb < 1500, r.rss_mb


def test_query_cannot_lift_the_bounds():
    for q in ("SET memory_limit = '100GB'", "SET temp_directory = '/tmp/gv-spill'", "SET threads = 1"):
        line = _one_line(run("sql", DDP, q))
        assert "configuration has been locked" in line, line


@pytest.mark.parametrize("query", ["", "   ", "\n\t", ";", "-- only a comment", "/* nothing */ ;"])
def test_empty_query_refused(query):
    line = _one_line(run("sql", DDP, query))
    assert line.startswith("gpuviewer: the query is empty"), line


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "1e9"])
def test_bad_timeout_refused(value):
    line = _one_line(run("sql", DDP, "SELECT 1", f"--timeout={value}"))
    assert line.startswith(f"gpuviewer: --timeout {value}: "), line


@pytest.mark.parametrize("value", ["lots", "10", "5XB", "-1GB", "2PB"])
def test_bad_memory_limit_refused(value):
    line = _one_line(run("sql", DDP, "SELECT 1", f"--memory-limit={value}"))
    assert line.startswith(f"gpuviewer: --memory-limit {value}: "), line


def test_parse_size():
    assert parse_size("2GB") == 2 << 30
    assert parse_size("512 MiB") == 512 << 20
    assert parse_size("1.5G") == 3 << 29
    assert parse_size("1048576") == 1 << 20


def _query_file(tmp_path, kind: str) -> str:
    if kind == "fifo":
        p = str(tmp_path / "q.fifo")
        os.mkfifo(p)  # opened for reading without a writer, it would block forever
        return p
    if kind == "folder":
        return str(tmp_path)
    if kind == "devzero":
        return "/dev/zero"
    if kind == "big":
        p = tmp_path / "big.sql"
        p.write_text("SELECT 1 " + " " * (2 << 20))
        return str(p)
    if kind == "binary":
        p = tmp_path / "bin.sql"
        p.write_bytes(b"\xff\xfe\x00SELECT")
        return str(p)
    if kind == "missing":
        return str(tmp_path / "none.sql")
    if kind == "blank":
        p = tmp_path / "blank.sql"
        p.write_text("  \n -- nothing here\n")
        return str(p)
    raise ValueError(kind)


@pytest.mark.parametrize(
    "kind,needle",
    [
        ("fifo", "not a regular file"),
        ("folder", "a folder"),
        ("devzero", "not a regular file"),
        ("big", "more than"),
        ("binary", "UTF-8"),
        ("missing", "No such file"),
        ("blank", "holds no query"),
    ],
)
def test_bad_query_file_refused(tmp_path, kind, needle):
    path = _query_file(tmp_path, kind)
    line = _one_line(run("sql", DDP, "--query-file", path))
    assert path in line and needle in line, line


def test_query_file_runs(tmp_path):
    p = tmp_path / "q.sql"
    p.write_text("-- kernels per rank\nSELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank;\n")
    r = run("sql", DDP, "--query-file", str(p), "--csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["rank,n", "0,1968", "1,2016"]


# -- nsys exports with device ids beyond int32 (OverflowError in sql and stats before) ---------


@pytest.fixture(scope="module")
def odd_devices(tmp_path_factory):
    """Copies of nsys_single.sqlite with one kernel's deviceId set to 2**40, -1 and 2**63-1."""
    src = trace_path("nsys", "nsys_single.sqlite")
    d = tmp_path_factory.mktemp("devices")
    out = {}
    for v in (2**40, -1, 2**63 - 1):
        p = d / f"dev_{v}.sqlite"
        shutil.copyfile(src, p)
        os.chmod(p, stat.S_IRUSR | stat.S_IWUSR)
        con = sqlite3.connect(p)
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = ? WHERE rowid = "
            "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
            (v,),
        )
        con.commit()
        con.close()
        out[v] = str(p)
    base = run("sql", src, "SELECT count(*) FROM kernels", "--csv")
    out["kernels"] = int(base.stdout.splitlines()[1])
    return out


@pytest.mark.parametrize("v", [2**40, -1, 2**63 - 1])
def test_sql_odd_device_ids(odd_devices, v):
    r = run("sql", odd_devices[v], "SELECT count(*) AS n, max(device) AS d FROM kernels", "--csv")
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr[-2000:]
    n, d = map(int, r.stdout.splitlines()[1].split(","))
    assert n == odd_devices["kernels"]  # every kernel is still there
    if v > 0:
        assert d == v  # shown as recorded, not wrapped


@pytest.mark.parametrize("report", ["kern", "api", "nvtx", "mem", "nccl"])
def test_stats_odd_device_ids(odd_devices, report):
    r = run("stats", odd_devices[2**40], "--report", report, "--json")
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr[-2000:]
    assert isinstance(json.loads(r.stdout), list)
