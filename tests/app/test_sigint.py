"""Ctrl+C (issue 30): every command ends with exit 130 and the one line "gpuviewer: interrupted",
without a traceback (its own, a worker's or DuckDB's), leaves no partial output, and leaves no
worker process behind. The signal goes to the whole process group, as a terminal sends it."""

import os
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, SAMPLES, trace_path

BIG = trace_path("kineto", "launch_bound_big.json.gz")  # ~3 s to read: a load is caught mid-way
NSYS_BIG = trace_path("nsys", "nsys_ddp_big.sqlite")
ENDLESS = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _reading(pid: int, path: str) -> bool:
    """Whether the process holds `path` open (it is reading the input, not starting up)."""
    real = os.path.realpath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == real:
                return True
        except OSError:
            pass
    return False


def _interrupt(args, busy) -> subprocess.CompletedProcess:
    """Start `gpuviewer ARGS` in its own process group, wait until busy(pid) says it is at work,
    send SIGINT to the group and collect what it did."""
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuviewer", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        while not busy(p.pid):
            try:  # waits on the child: a command that ends before it is busy fails the test here
                p.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                continue
            out, err = p.communicate()
            raise AssertionError(f"ended (rc {p.returncode}) before it was interrupted: {err[-2000:]}")
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)  # a command that ignores Ctrl+C is a hang
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def _assert_interrupted(r, pgid: int | None = None) -> None:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    # 130, or ended by SIGINT itself (about 1 in 300 runs on a busy machine): shells report both
    # as 130, and the one line above says the command was interrupted
    assert r.returncode in (130, -signal.SIGINT), (r.returncode, lines[-10:])
    assert lines == ["gpuviewer: interrupted"], lines[-10:]


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _reads(path):
    return lambda pid: _reading(pid, path)


def _cpu_over(seconds):
    return lambda pid: _cpu_s(pid) >= seconds


CASES = {
    "info": (["info", BIG, "--no-cache"], _reads(BIG)),
    "info-nsys": (["info", NSYS_BIG, "--no-cache"], _reads(NSYS_BIG)),
    "analyze": (["analyze", BIG, "--no-cache", "--json"], _reads(BIG)),
    "stats": (["stats", BIG, "--no-cache"], _reads(BIG)),
    "sql-load": (["sql", BIG, "SELECT count(*) FROM kernels", "--no-cache"], _reads(BIG)),
    "sql-query": (["sql", os.path.join(SAMPLES, "ddp"), ENDLESS, "--timeout", "600"], _cpu_over(3.0)),
    "diff": (["diff", BIG, BIG, "--no-cache"], _reads(BIG)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sigint_ends_command(name):
    args, busy = CASES[name]
    r = _interrupt(args, busy)
    _assert_interrupted(r)


@pytest.mark.parametrize(
    "cmd,out_name",
    [("screenshot", "shot.png"), ("report", "report.html"), ("diff", "diff.html"), ("analyze", "run.gvsum")],
)
def test_sigint_leaves_no_output(tmp_path, cmd, out_name):
    """Interrupted while reading, a command that writes a file leaves neither it nor a temporary."""
    out = tmp_path / out_name
    if cmd == "analyze":
        args = ["analyze", BIG, "--no-cache", "--summary", str(out)]
    elif cmd == "diff":
        args = ["diff", BIG, BIG, "--no-cache", "-o", str(out)]
    else:
        args = [cmd, BIG, "--no-cache", "-o", str(out)]
    r = _interrupt(args, _reads(BIG))
    _assert_interrupted(r)
    assert os.listdir(tmp_path) == []


def test_sigint_stops_decode_workers():
    """The Kineto decode pool's forked workers get the terminal's SIGINT too: they print nothing
    and are gone when the command has ended."""
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuviewer", "info", BIG, "--no-cache"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        while not _reading(p.pid, BIG):
            try:
                p.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                continue
            raise AssertionError("ended before it was interrupted")
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
        _assert_interrupted(subprocess.CompletedProcess([], p.returncode, out, err))
        assert _group_gone(p.pid), "a worker of the interrupted command is still running"
    finally:
        if p.poll() is None or not _group_gone(p.pid):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate()
