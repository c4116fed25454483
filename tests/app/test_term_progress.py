"""Progress on the terminal (issue 31, item 5): a real `gpuviewer` subprocess whose stderr is a
pseudo-terminal draws "reading X: ... MB, ... events · i of N ranks" in place; piped, or with
--quiet, stderr holds nothing of it. GPUVIEWER_PROGRESS_DELAY_S=0 draws from the first callback,
so no test depends on how long the open takes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from conftest import ROOT, run_cli

DDP = os.path.join(ROOT, "samples", "ddp")
NOW = {"GPUVIEWER_PROGRESS_DELAY_S": "0"}


def _on_pty(*args: str) -> tuple[int, str, str]:
    """Run gpuviewer with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    env = dict(os.environ, **NOW)
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuviewer", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal's last descriptor
            break
        if not chunk:
            break
        got += chunk
    out = p.stdout.read()
    p.stdout.close()
    rc = p.wait()
    os.close(master)
    return rc, out.decode(), got.decode("utf-8", "replace")


def test_reading_progress_is_drawn_in_place_on_a_terminal():
    rc, out, term = _on_pty("info", DDP, "--no-cache", "--json")
    assert rc == 0, term
    assert "reading ddp_rank0.json.gz:" in term and "reading ddp_rank1.json.gz:" in term
    assert "MB" in term and "events · 1 of 2 ranks" in term
    # redrawn in place (carriage return, erase to the end of the line) and cleared at the end
    assert "\r" in term and "\x1b[K" in term
    assert term.endswith("\r\x1b[K")
    assert "Traceback" not in term
    assert '"events"' in out  # stdout is the JSON, untouched by the line


def test_analysis_phase_is_shown_too():
    rc, out, term = _on_pty("analyze", DDP, "--no-cache")
    assert rc == 0, term
    assert "analysing 2 ranks" in term
    assert "rank 0: GPU utilization" in out


def test_nothing_when_piped():
    r = run_cli("info", DDP, "--no-cache", env=NOW)
    assert r.returncode == 0, r.stderr
    assert "reading" not in r.stderr and "\r" not in r.stderr and "\x1b" not in r.stderr
    r = run_cli("analyze", DDP, "--no-cache", env=NOW)
    assert r.returncode == 0, r.stderr
    assert "analysing" not in r.stderr and "\x1b" not in r.stderr


def test_quiet_silences_it_on_a_terminal():
    rc, out, term = _on_pty("info", DDP, "--no-cache", "--quiet")
    assert rc == 0, term
    assert "reading" not in term and "\x1b" not in term
    assert "events" in out
