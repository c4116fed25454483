"""Ctrl+C where Python cannot take it (io/interrupts.py): in the fork's own hooks (printed as
"Exception ignored" and lost), between a worker's fork and its pool recording it (a worker nobody
stops), in a weakref callback, inside importlib (its global lock left taken: the CI hang). Each
test sends SIGINT at exactly that moment, every time (a real Ctrl+C hits one about 1 in 150)."""

import os
import subprocess
import sys

import pytest
from conftest import ROOT


def _python(script: str, *args: str, env: dict | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    """`python -c script args` in the project's folder (each test needs a process of its own:
    it installs a SIGINT handler and signals itself)."""
    return subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )


SCRIPT = r"""
import os, signal, sys, time
from gpuviewer.io import piece_reader
from gpuviewer.io.interrupts import catch_sigint

catch_sigint(lambda: os._exit(99))
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    piece_reader.worker_pool()
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
os.register_at_fork(after_in_parent=lambda: None)  # (hooks cannot be removed; later forks: none)
print("pool", piece_reader._POOL)
children = open(f"/proc/self/task/{os.getpid()}/children").read().split()
print("children", len(children))
"""


def test_ctrl_c_while_the_workers_start_is_raised_once_they_are_known():
    r = _python(SCRIPT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Exception ignored" not in r.stderr, r.stderr[-3000:]
    out = r.stdout.split("\n")
    assert out[0] == "interrupted", r.stdout
    assert "pool None" in out, r.stdout  # the pool it was starting is stopped, not kept half made
    assert "children 0" in out, r.stdout  # and its workers with it


HELD = r"""
import os, signal
from gpuviewer.io.interrupts import catch_sigint, held

catch_sigint(lambda: os._exit(99))
steps = []
try:
    with held():
        os.kill(os.getpid(), signal.SIGINT)
        for i in range(1000):  # Python runs the handler at the next function call or loop
            steps.append(i)
        with held():  # nested: only the outermost block's end raises
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("inner")
        steps.append("after inner")
    steps.append("after held")
except KeyboardInterrupt:
    steps.append("raised")
print(steps[-3:])
"""


def test_an_interrupt_in_a_held_block_is_raised_at_its_end():
    r = _python(HELD)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "['inner', 'after inner', 'raised']", r.stdout


def test_a_worker_ignores_the_terminals_interrupt():
    """The terminal sends SIGINT to the whole group: a forked worker inherits the handler and
    must not raise (its parent stops it)."""
    script = r"""
import os, signal
from gpuviewer.io.interrupts import catch_sigint
catch_sigint(lambda: os._exit(99))
pid = os.fork()
if pid == 0:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        sum(range(1000))
        os._exit(0)
    except KeyboardInterrupt:
        os._exit(3)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
    r = _python(script)
    assert r.stdout.strip() == "0", (r.stdout, r.stderr[-2000:])


OOC = r"""
import os, signal, sys
from gpuviewer.io.interrupts import catch_sigint
from gpuviewer.io.session import load

catch_sigint(lambda: os._exit(99))
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    load([sys.argv[1]])
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
children = open(f"/proc/self/task/{os.getpid()}/children").read().split()
print("children", len(children))
"""


def test_ctrl_c_while_the_out_of_core_readers_start(tmp_path):
    """The out-of-core build's pool of rank readers (io/ooc_pool.py), started the same way."""
    env = dict(
        os.environ,
        GPUVIEWER_CACHE_DIR=str(tmp_path),
        GPUVIEWER_OUT_OF_CORE_MB="0",  # the out-of-core build for any size
        GPUVIEWER_OOC_WORKERS="2",
    )
    r = _python(OOC, os.path.join(ROOT, "samples", "ddp"), env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Exception ignored" not in r.stderr, r.stderr[-3000:]
    assert r.stdout.split("\n")[:2] == ["interrupted", "children 0"], r.stdout
    assert not [d for d in os.listdir(tmp_path) if not d.startswith(".")], os.listdir(tmp_path)  # no entry


LOST = r"""
import os, signal, time, weakref
from gpuviewer.io.interrupts import catch_sigint

catch_sigint(lambda: os._exit(99))

class Thing:
    pass

def callback(_ref):
    os.kill(os.getpid(), signal.SIGINT)
    for i in range(1000):  # the handler runs in here: Python prints "Exception ignored", goes on
        pass

thing = Thing()
ref = weakref.ref(thing, callback)
try:
    del thing
    end = time.monotonic() + 60  # (a bound on a failing run, not a time limit)
    while time.monotonic() < end:  # the interrupt, sent again, is raised here
        pass
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
"""


# a thread's start returning 50 ms after the thread runs: what a loaded machine did once, when the
# interrupt sent again arrived while the unraisable hook still ran and was swallowed again there
SLOW_START = """
import threading, time
_start = threading.Thread.start
def _slow(self):
    _start(self)
    time.sleep(0.05)
threading.Thread.start = _slow
"""


@pytest.mark.parametrize("slow", [False, True])
def test_an_interrupt_python_swallows_is_raised_again(slow):
    r = _python((SLOW_START if slow else "") + LOST)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "interrupted", ""), (r.stdout, r.stderr[-2000:])


STUCK = r"""
import os, signal, sys, threading
from gpuviewer.app import cli
from gpuviewer.io import interrupts

interrupts.GIVE_UP_S = 1.0  # (10 s in the program)
try:
    cli._catch_sigint()
    os.kill(os.getpid(), signal.SIGINT)
    threading.Event().wait(60)
except KeyboardInterrupt:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # a cleanup that never ends
print("not given up")
"""


def test_a_cleanup_that_hangs_after_ctrl_c_is_given_up():
    """Whatever hangs after Ctrl+C, the command ends GIVE_UP_S later with its line and 130."""
    r = _python(STUCK, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "gpuviewer: interrupted\n"), (
        r.returncode,
        r.stdout,
        r.stderr[-2000:],
    )


IMPORTLIB = r"""
import os, signal, sys, threading
from gpuviewer.io.interrupts import catch_sigint

catch_sigint(lambda: os._exit(99))


def tick(signum, frame):  # a SIGALRM handler (the terminal's progress line) runs on top of importlib
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass


signal.signal(signal.SIGALRM, tick)
send = signal.SIGALRM if sys.argv[1] == "under a handler" else signal.SIGINT
# code of importlib's own file name: the handler runs inside it
inside = compile(
    "os.kill(os.getpid(), send)\nfor i in range(100000):\n    pass\nsteps.append('importlib done')",
    "<frozen importlib._bootstrap>",
    "exec",
)
steps = []
try:
    exec(inside, {"os": os, "send": send, "steps": steps})
    while True:  # the interrupt, sent again a moment later, is raised out here
        threading.Event().wait(0.001)
except KeyboardInterrupt:
    steps.append("raised")
print(steps)
"""


@pytest.mark.parametrize("where", ["directly", "under a handler"])
def test_an_interrupt_inside_importlib_waits_until_it_is_left(where):
    """Importlib's code anywhere on the stack holds the interrupt (the review: the handler looked
    at the top frame only, and a SIGALRM handler may run on top of importlib's code)."""
    r = _python(IMPORTLIB, where)
    assert (r.returncode, r.stdout.strip(), r.stderr) == (0, "['importlib done', 'raised']", ""), (
        r.returncode,
        r.stdout,
        r.stderr[-2000:],
    )


BROKEN_WAIT = r"""
import inspect, os, signal, sys, threading
import concurrent.futures as cf
from gpuviewer.app import cli, output

# the line of threading.Condition.wait right after it released its lock, before its `try`
src, first = inspect.getsourcelines(threading.Condition.wait)
LINE = first + next(i for i, t in enumerate(src) if "_release_save()" in t) + 1
WAIT = threading.Condition.wait.__code__


def tracer(frame, event, arg):
    if frame.f_code is WAIT:
        def local(f, ev, a):
            if ev == "line" and f.f_lineno == LINE:
                sys.settrace(None)
                os.kill(os.getpid(), signal.SIGINT)  # raised here: the caller's `with` then fails
            return local
        return local
    return None


def opener(paths, args):  # reading, waiting for a decoded piece
    fut = cf.Future()
    threading.Timer(0.5, fut.set_result, (1,)).start()
    sys.settrace(tracer)
    fut.result()
    raise AssertionError("not interrupted")


output.load = opener
sys.exit(cli.main(["info", "samples/ddp", "--no-cache"]))
"""


@pytest.mark.parametrize(
    "caught_by",
    [
        "output.load = opener",  # an error path (open_or_fail's "cannot read")
        "cli._run_command = lambda argv: opener(None, None)",  # none: the command's own code
    ],
)
def test_an_error_ctrl_c_causes_on_its_way_up_ends_as_ctrl_c(caught_by):
    """Ctrl+C between Condition.wait's release and its `try` makes the waiting `with` raise
    RuntimeError (CPython 3.11): the command says "interrupted" and exits 130, not "cannot read"
    where an error path catches it, not a traceback where none does (main() then)."""
    r = _python(BROKEN_WAIT.replace("output.load = opener", caught_by))
    assert (r.returncode, r.stderr) == (130, "gpuviewer: interrupted\n"), (r.returncode, r.stderr[-2000:])
