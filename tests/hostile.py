"""Shared checks for hostile inputs: run the real CLI in a child process and assert what a user
must always get (a clear one-line message naming the file, no traceback, the input untouched,
nothing created beside it, and memory bounded)."""

from __future__ import annotations

import hashlib
import os
import stat
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
    def __init__(self, rc: int, stdout: str, stderr: str, rss_mb: float | None, seconds: float):
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr
        self._rss_mb, self.seconds = rss_mb, seconds

    @property
    def rss_mb(self) -> float:
        assert self._rss_mb is not None, "a test that bounds memory runs the command with fork=False"
        return self._rss_mb

    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def run(*args: str, env: dict | None = None, timeout: float = 300, fork: bool | None = None) -> Result:
    """Run the CLI (`gpuviewer ARGS`) in a child; the peak RSS is the child's own or its
    children's, measured inside it at exit (so earlier children of the test do not mask it).
    A child that runs over `timeout` is a hang: the test fails. fork=True: the child is forked from
    a process that has the imports done (tests/cli_fork.py), for many small commands under a loose
    RSS bound (the fuzz); its peak starts at that process's. fork=False: a fresh interpreter, for a
    test that bounds memory tightly. None (the default): forked, as conftest.run_cli decides, with
    no peak RSS to read (reading it fails the test: such a test says fork=False)."""
    from cli_fork import RUN_MAIN, run_forked
    from conftest import forks

    auto = fork is None
    fork = forks(env) if auto else fork
    code = "import os, sys\nfrom gpuviewer.app.cli import main\n" + RUN_MAIN
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    hung = AssertionError(f"hung: gpuviewer {' '.join(map(str, args))} ran over {timeout} s")
    if fork:
        got = run_forked(list(args), e, timeout)
        if got is None:
            raise hung
        rc, out, err = got
    else:
        try:
            p = subprocess.run(
                [sys.executable, "-c", code, *args], capture_output=True, env=e, cwd=ROOT, timeout=timeout
            )
        except subprocess.TimeoutExpired as ex:
            raise hung from ex
        rc, out, err = p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    rss: float | None = None if auto and fork else 0.0
    kept = []
    for ln in err.splitlines():
        if ln.startswith("@@rss_kb="):
            rss = None if rss is None else int(ln.split("=", 1)[1]) / 1024
        else:
            kept.append(ln)
    return Result(rc, out, "\n".join(kept), rss, time.perf_counter() - t0)


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


# -- fuzzing the commands (tests/io/test_fuzz_inputs.py, tests/app/test_fuzz_commands.py) ----


def png_ok(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def _output_ok(expect: str, r: Result, out: str | None) -> str | None:
    """Why an exit-0 run's output is not what was asked (None when it is)."""
    import json

    if expect in ("json", "summary"):
        try:
            json.loads(r.stdout)
        except ValueError:
            return f"exit 0 without a JSON object: {r.stdout[:200]!r}"
    if expect == "md" and not r.stdout.lstrip().startswith("#"):
        return f"exit 0 without Markdown: {r.stdout[:200]!r}"
    if expect == "png" and not (out and os.path.isfile(out) and png_ok(out)):
        return f"exit 0 without a PNG at {out}"
    if expect == "html":
        if not (out and os.path.isfile(out)):
            return f"exit 0 without {out}"
        with open(out, "rb") as f:
            if b"<html" not in f.read(4096).lower():
                return f"exit 0 and {out} is not HTML"
    if expect == "summary" and not (out and os.path.isfile(os.path.join(out, "manifest.json"))):
        return f"exit 0 without a summary at {out}"
    if out and expect in ("png", "html", "summary"):  # made as the user makes files: the umask decides
        mask = os.umask(0)
        os.umask(mask)
        want = (0o777 if os.path.isdir(out) else 0o666) & ~mask
        if stat.S_IMODE(os.stat(out).st_mode) != want:
            return f"{out} has mode {stat.S_IMODE(os.stat(out).st_mode):o}, not {want:o} (the umask's)"
    return None


def check_command(
    tag: str,
    argv: list[str],
    named: str,
    expect: str,
    *,
    out: str | None = None,
    out_dir: str | None = None,
    env: dict | None = None,
    rss_limit_mb: float = 3000,
    warn_names: tuple[str, ...] = (),
    secret: str | None = None,
    forbid: tuple[str, ...] = (),
    timeout: float = 180,
    fork: bool = False,
) -> list[str]:
    """Run `gpuviewer ARGV` once and return what a user must never see, as lines starting with
    `tag`: a traceback, a hang, an exit other than 0 or 2, exit 0 without the output asked for
    (`expect`: json, md, png, html or summary, at `out`), exit 2 without one line naming `named`
    (or with a file left in `out_dir`), stderr noise on success (only warning lines naming one of
    `warn_names` are allowed), a raw terminal escape, `secret` shown, words of `forbid` said (a wrong diagnosis), or a
    peak RSS over the limit."""
    try:
        r = run(*argv, env=env, timeout=timeout, fork=fork)
    except AssertionError as e:  # a hang
        return [f"{tag}: {e}"]
    problems = []
    lines = r.lines()
    if os.environ.get("GPUVIEWER_FUZZ_LOG"):  # what each case got, to judge the mutations
        with open(os.environ["GPUVIEWER_FUZZ_LOG"], "a") as f:
            f.write(f"{tag}: exit {r.returncode}, {r.seconds:.1f} s, {r.rss_mb:.0f} MB: {lines[:1]}\n")
    if "Traceback" in r.stderr:
        return [f"{tag}: traceback\n{r.stderr[-1500:]}"]
    if r.returncode == 0:
        why = _output_ok(expect, r, out)
        if why:
            problems.append(f"{tag}: {why}")
        noise = [ln for ln in lines if not (warn_names and "warning" in ln and any(n in ln for n in warn_names))]
        if noise:
            problems.append(f"{tag}: stderr on success: {noise[:3]}")
    elif r.returncode == 2:
        if len(lines) != 1 or os.path.basename(named) not in lines[0]:
            problems.append(f"{tag}: message is not one line naming {os.path.basename(named)}: {lines[:5]}")
        left = sorted(os.listdir(out_dir)) if out_dir and os.path.isdir(out_dir) else []
        if left:
            problems.append(f"{tag}: exit 2 left {left} in the output folder")
    else:
        problems.append(f"{tag}: exit {r.returncode}: {r.stderr[-800:]}")
    if secret and (secret in r.stdout or secret in r.stderr):
        problems.append(f"{tag}: shows the content of a file outside its inputs")
    if "\x1b" in r.stdout + r.stderr:  # a name from the input must not drive the terminal
        problems.append(f"{tag}: a raw terminal escape on stdout or stderr")
    said = [w for w in forbid if w in r.stdout + r.stderr]
    if said:
        problems.append(f"{tag}: says {said}: {(lines or [r.stdout[:300]])[0]}")
    if r.rss_mb > rss_limit_mb:
        problems.append(f"{tag}: peak RSS {r.rss_mb:.0f} MB > {rss_limit_mb}")
    return problems


def tree_files(folder: str) -> list[str]:
    """Every file under folder (relative paths), for 'nothing was written here'."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.relpath(os.path.join(d, n), folder) for d, _, ns in os.walk(folder) for n in ns)


# where a run could write besides its output: each one an empty folder of the case's own
PRIVATE = {
    "GPUVIEWER_CACHE_DIR": "cache",
    "GPUVIEWER_DATA_DIR": "data",
    "TMPDIR": "tmp",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "xdg-data",
}


def private_env(case: str) -> dict:
    """The environment of a fuzz case's runs: its own empty cache, annotation data, temp, config
    and data folders under `case` (made here), so that what a run leaves anywhere is seen."""
    env = {k: os.path.join(case, v) for k, v in PRIVATE.items()}
    for d in env.values():
        os.makedirs(d, exist_ok=True)
    return env


def left_behind(env: dict) -> list[str]:
    """Files a run left in the folders of private_env (each should stay empty: --no-cache, no
    sidecar written, temporary files removed, no settings written by a headless run)."""
    return [f"{k}/{f}" for k in PRIVATE for f in tree_files(env[k])]
