"""The CLI in a child forked from a process that has already imported gpuviewer and the libraries
its commands load (numpy, pandas, DuckDB, Qt, pyqtgraph): each command still runs in a process
of its own, with its own environment, folder, umask, stdout and stderr, exit code, peak RSS and a
timeout, but without an interpreter start and the imports (a fuzz case took about 1 CPU-s; forked,
about a third less). What importing prints on stderr is written at the
start of every command's stderr, as a fresh process prints it; temporary files go where the
command's TMPDIR says (tempfile's folder is forgotten in each child).

The peak RSS of a forked child starts at the forking process's (the libraries above, loaded or
not by the command): for bounds far above that (the fuzz's 1500 and 3000 MB), not for tight ones."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading

from conftest import ENV_AT_START, ROOT

# `gpuviewer ARGV` (sys.argv[1:]) run by main, then its peak RSS (its own or its children's,
# measured inside it at exit) written on stderr, and the exit as Python ends (None is 0, a text
# is said on stderr with 1): the last lines of a forked child and of hostile.run's fresh one
RUN_MAIN = r"""
import resource
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
m = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:  # ru_maxrss carries the parent's peak over a fork (and a fork+exec): the kernel's own figure
    with open("/proc/self/status") as st:
        m = int(next(l for l in st if l.startswith("VmHWM")).split()[1])
except Exception:
    pass
c = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stdout.flush(); sys.stderr.flush()
os.write(2, f"@@rss_kb={max(m, c)}\n".encode())
sys.exit(rc)
"""

_SERVER = r"""
import io, json, os, sys
real_err = sys.stderr
sys.stderr = first = io.StringIO()
from gpuviewer.app.cli import main
import numpy, pandas, duckdb
import PySide6.QtCore, PySide6.QtGui, PySide6.QtWidgets, pyqtgraph
import gpuviewer.session
sys.stderr = real_err
said_on_import = first.getvalue()
import gc; gc.freeze()  # the collector leaves the imported objects alone: fewer pages copied
ctl = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
ctl.write("ready\n"); ctl.flush()
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(req["out"], os.O_WRONLY | os.O_TRUNC), 1)
        os.dup2(os.open(req["err"], os.O_WRONLY | os.O_TRUNC), 2)
        ctl.close()
        os.environ.clear(); os.environ.update(req["env"]); os.chdir(req["cwd"]); os.umask(req["umask"])
        import tempfile; tempfile.tempdir = None
        sys.argv = ["-c", *req["argv"]]
        sys.stderr.write(said_on_import)
@RUN_MAIN@
    ctl.write(json.dumps({"pid": pid}) + "\n"); ctl.flush()
    _, status = os.waitpid(pid, 0)
    ctl.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n"); ctl.flush()
""".replace("@RUN_MAIN@", textwrap.indent(RUN_MAIN.strip("\n"), " " * 8))

_lock = threading.Lock()
_idle: list[_Server] = []  # started and not running a command: one per command running at once
_servers: list[subprocess.Popen] = []


class _Server:
    """A forking process and its answers, read line by line from the pipe itself (a buffered
    reader could hold the next line where poll does not see it)."""

    def __init__(self) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env=ENV_AT_START,  # not a test's monkeypatched one: what it reads at its start stays
            bufsize=0,
        )
        _servers.append(self.p)
        self.buf = b""
        assert self.line(None) == "ready", "the forking process did not start"

    def line(self, timeout: float | None) -> str | None:
        """The next line, or None when none came within timeout."""
        fd = self.p.stdout.fileno()
        # poll, not select: select fails on a descriptor numbered past 1024, which a worker
        # that has run many tests can hand out
        waiter = select.poll()
        waiter.register(fd, select.POLLIN)
        while b"\n" not in self.buf:
            if not waiter.poll(None if timeout is None else timeout * 1000):
                return None
            chunk = os.read(fd, 65536)
            assert chunk, "the forking process died"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def _take() -> _Server:
    """An idle forking process, or a new one (each runs one command at a time)."""
    with _lock:
        while _idle:
            s = _idle.pop()
            if s.p.poll() is None:
                return s
    return _Server()


@atexit.register
def _stop() -> None:
    for p in _servers:
        if p.poll() is None:
            p.stdin.close()  # its loop ends; each child was waited for already
            p.wait()


def _umask() -> int:
    """This process's umask, read without changing it (setting it to read it back would change it
    for a moment under the fuzz's other threads)."""
    try:
        with open("/proc/self/status") as f:
            return int(next(ln for ln in f if ln.startswith("Umask:")).split()[1], 8)
    except (OSError, StopIteration, ValueError):
        with _lock:
            mask = os.umask(0o022)
            os.umask(mask)
        return mask


def run_forked(args: list[str], env: dict, timeout: float) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) of `gpuviewer ARGS` in a forked child with the environment
    env (whole), or None when it ran over timeout (the child is killed)."""
    s = _take()
    with tempfile.TemporaryDirectory() as d:
        out, err = os.path.join(d, "out"), os.path.join(d, "err")
        for f in (out, err):
            open(f, "wb").close()
        # the umask as the test has it now (a fresh child inherits it; the forking process has
        # the one of its own start): the modes of the files the command makes follow it
        req = {"argv": list(args), "env": env, "cwd": ROOT, "out": out, "err": err, "umask": _umask()}
        s.p.stdin.write((json.dumps(req) + "\n").encode())
        pid = json.loads(s.line(None))["pid"]
        answer = s.line(timeout)
        if answer is not None:
            with open(out, "rb") as fo, open(err, "rb") as fe:
                got = json.loads(answer)["rc"], fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
        else:
            os.kill(pid, signal.SIGKILL)
            s.line(None)  # waited for by the forking process
            got = None
    with _lock:
        _idle.append(s)
    return got
