"""Shared checks for hostile inputs: run the real CLI in a child process and assert what a user
must always get (a clear one-line message naming the file, no traceback, the input untouched,
nothing created beside it, and memory bounded)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

from conftest import ROOT


def folder_state(folder: str) -> dict:
    """name -> (sha256, mtime_ns) for every regular file in the folder (not recursive)."""
    out = {}
    for n in sorted(os.listdir(folder)):
        p = os.path.join(folder, n)
        st = os.lstat(p)
        if os.path.isfile(p) and not os.path.islink(p):
            with open(p, "rb") as f:
                out[n] = (hashlib.sha256(f.read()).hexdigest(), st.st_mtime_ns)
        else:
            out[n] = ("special", st.st_mode)
    return out


class Result:
    def __init__(self, rc: int, stdout: str, stderr: str, rss_mb: float, seconds: float):
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr
        self.rss_mb, self.seconds = rss_mb, seconds

    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def run(*args: str, env: dict | None = None, timeout: float = 300) -> Result:
    """Run the CLI (`gpuviewer ARGS`) in a child; the peak RSS is the child's own or its
    children's, measured inside it at exit (so earlier children of the test do not mask it).
    A child that runs over `timeout` is a hang: the test fails."""
    code = ("import resource, sys, os\n"
            "from gpuviewer.app.cli import main\n"
            "try:\n    rc = main(sys.argv[1:])\nexcept SystemExit as e:\n    rc = e.code\n"
            "m = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n"  # ru_maxrss carries the parent's peak over a fork+exec: the kernel's own figure
            "    with open('/proc/self/status') as st:\n"
            "        m = int(next(l for l in st if l.startswith('VmHWM')).split()[1])\n"
            "except Exception:\n    pass\n"
            "c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "os.write(2, f'@@rss_kb={max(m, c)}\\n'.encode())\n"
            "sys.exit(rc if isinstance(rc, int) else 1)\n")
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=e, cwd=ROOT,
                           timeout=timeout)
    except subprocess.TimeoutExpired as ex:
        raise AssertionError(f"hung: gpuviewer {' '.join(map(str, args))} ran over {timeout} s") from ex
    err = p.stderr.decode(errors="replace")
    rss = 0.0
    kept = []
    for ln in err.splitlines():
        if ln.startswith("@@rss_kb="):
            rss = int(ln.split("=", 1)[1]) / 1024
        else:
            kept.append(ln)
    return Result(p.returncode, p.stdout.decode(errors="replace"), "\n".join(kept), rss,
                  time.perf_counter() - t0)


def assert_refused(r: Result, path: str, needle: str | None = None) -> str:
    """Exit 2, one line on stderr naming the file, no traceback; returns that line."""
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.lines()
    assert len(lines) == 1, lines[:10]
    name = os.path.basename(path)
    assert name in lines[0], (name, lines[0])
    if needle is not None:
        assert needle.lower() in lines[0].lower(), (needle, lines[0])
    return lines[0]


def assert_clean(r: Result) -> None:
    """Exit 0, no traceback, no Python warnings or Qt noise on stderr."""
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
