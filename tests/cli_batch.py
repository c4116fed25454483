"""Many CLI commands in one child process: `gpuviewer ARGV` for each ARGV in turn, through the
same entry point as `python -m gpuviewer` (gpuviewer.app.cli.main), each with stdout and stderr
of its own and its exit code. What a separate process per command costs is the interpreter and
gpuviewer's imports each time (about 0.3 s of CPU: most of a refused summary's run); the window
opens many sessions in one process the same way.

A command that raises gets its traceback on its stderr and exit 1, as Python gives a process;
one that hangs or kills the child fails the whole batch (run_cli's timeout, a missing answer),
naming the command it was running."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

# stdout and stderr are text streams over bytes with the real streams' encoding and error
# handling, so a command that prints what its terminal cannot encode fails here as it would there
_CHILD = """
import io, json, sys, traceback

def stream(real):
    return io.TextIOWrapper(io.BytesIO(), encoding=real.encoding, errors=real.errors, write_through=True)

def text(s):
    return s.buffer.getvalue().decode(s.encoding, "replace")

real_out, real_err = sys.stdout, sys.stderr
sys.stderr = first = stream(real_err)  # what importing says is said by every command's process
from gpuviewer.app.cli import main
sys.stderr = real_err
answers = []
for argv in json.loads(sys.stdin.read()):
    real_err.write("running: gpuviewer " + " ".join(argv) + "\\n")  # which one, should the child die
    real_err.flush()
    sys.stdout, sys.stderr = out, err = stream(real_out), stream(real_err)
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    answers.append([0 if rc is None else rc, text(out), text(first) + text(err)])
real_out.write("\\n" + json.dumps(answers))
"""


def run_cli_batch(argvs: list[list[str]], env: dict | None = None) -> list[subprocess.CompletedProcess]:
    """run_cli(*argv) for each argv, in one child; the answers in the same order."""
    e = dict(os.environ)
    e.update(env or {})
    try:
        p = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            env=e,
            cwd=ROOT,
            timeout=600,
        )
    except subprocess.TimeoutExpired as ex:
        err = ex.stderr.decode(errors="replace") if isinstance(ex.stderr, bytes) else ex.stderr or ""
        raise AssertionError(f"hung, the last command it started:\n{err[-3000:]}") from ex
    assert p.returncode == 0, f"the batch's child exited {p.returncode}:\n{p.stderr[-3000:]}"
    answers = json.loads(p.stdout.rsplit("\n", 1)[-1])
    assert len(answers) == len(argvs), answers
    return [
        subprocess.CompletedProcess([sys.executable, "-m", "gpuviewer", *argv], rc, out, err)
        for argv, (rc, out, err) in zip(argvs, answers)
    ]
