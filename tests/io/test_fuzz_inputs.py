"""Seeded fuzzing of the readers and the commands through the real CLI (issues 18 and 30):
mutations of real traces (truncation, flipped bytes, spliced or duplicated events, hostile
values, damaged SQLite pages and rows). Case i runs one command by rotation (COMMANDS[i % 11]:
info, analyze --json, --md and --summary, screenshot and --timeline-only, report, sql, stats, diff
against the unmutated base, whatif), so every family meets them all. (Each case used to run info
as well: every command opens the file through the same reader first, so that was the reading done
twice; info's own answer is still checked once a family.)
Each must end with exit 0 and the output asked for (JSON, Markdown, a PNG, an HTML page, a
summary), or exit 2 and one line naming the file; never a traceback, a hang, unbounded memory, a
changed input, a new file beside it, a file left half-written, or anything left elsewhere (every
command runs with --no-cache and its own empty cache, annotation data, TMPDIR and XDG folders,
which must stay empty).

GPUVIEWER_FUZZ_CASES (default 66 over the six families: 11 each, so each family sees every
command; a family's first 10 inputs are those of the earlier default of 60) and GPUVIEWER_FUZZ_SEED (default 18) choose the run; a failure prints the family, case
number, command and seed to reproduce it. Summaries and annotation sidecars: test_fuzz_commands.py.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import SAMPLES, trace_path
from hostile import check_command, folder_state, left_behind, private_env

CASES = int(os.environ.get("GPUVIEWER_FUZZ_CASES", "66"))
SEED = int(os.environ.get("GPUVIEWER_FUZZ_SEED", "18"))
RSS_LIMIT_MB = 3000  # the bases are a few MB; a mutation must not blow memory up
FAMILIES = ("truncate", "flip", "splice", "values", "sqlite_bytes", "sqlite_rows")
PER_FAMILY = max(1, CASES // len(FAMILIES))


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """Small real inputs: the first 60 ms of a real Kineto trace (its metadata kept: 4,788 events,
    two host steps, 281 kernels with their launches and flows, so that the analysis, diff and
    whatif have work to do), as plain JSON and gzip; a real nsys export."""
    d = tmp_path_factory.mktemp("fuzzbase")
    with gzip.open(trace_path("kineto", "dataloader_stall.json.gz"), "rb") as f:
        doc = json.loads(f.read())
    t0 = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") == "M" or e.get("ts", t0) < t0 + 60_000]
    # the kept host events numbered afresh, as the profiler numbers a capture's ("Ev Idx"): cut
    # by time they hold 46% of the numbers they span, which the reader rightly calls filtered
    # (io/kineto_numbered.py), a warning these cases are not about
    numbered = [e["args"] for e in doc["traceEvents"] if isinstance(e.get("args"), dict) and "Ev Idx" in e["args"]]
    for k, a in enumerate(numbered):
        a["Ev Idx"] = k
    text = json.dumps(doc, indent=1).encode()
    (d / "base.json").write_bytes(text)
    (d / "base.json.gz").write_bytes(gzip.compress(text, 6))
    shutil.copy(os.path.join(SAMPLES, "nsys_single.sqlite"), d / "base.sqlite")
    return {
        "json": text,
        "gz": (d / "base.json.gz").read_bytes(),
        "sqlite": (d / "base.sqlite").read_bytes(),
        "sqlite_path": str(d / "base.sqlite"),
        "dir": str(d),
    }


_HOSTILE_VALUES = [
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e400",
    b"99999999999999999999999999",
    b'"abc"',
    b"[]",
    b"{}",
    b"null",
    b"true",
    b'"\\u0000\\u001b[2J"',
    b'"\xff\xfe"',
    b"[" * 5000 + b"]" * 5000,
    b"-1",
    b"0",
    b"1.5e300",
    b'"12.5"',
]


def _mutate(family: str, rng: random.Random, bases: dict, out_dir: str) -> tuple[str, bool]:
    """Write one mutated input into out_dir; return its path and whether the end of a plain JSON
    document is untouched (then the file is damaged, not cut short, and must not be called so)."""
    intact = False
    if family in ("truncate", "flip"):
        kind = rng.choice(["json", "gz", "sqlite"])
        data = bytearray(bases[kind])
        if family == "truncate":
            data = data[: rng.randrange(1, len(data))]
        else:
            pos = [rng.randrange(len(data)) for _ in range(rng.randint(1, 24))]
            for i in pos:
                data[i] = rng.randrange(256)
            intact = kind == "json" and max(pos) < len(data) - 64
        name = {"json": "m.json", "gz": "m.json.gz", "sqlite": "m.sqlite"}[kind]
    elif family == "splice":
        data = bytearray(bases["json"])
        op = rng.choice(["move", "dup", "delete"])
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randint(1, 4000))
        piece = bytes(data[a:b])
        if op == "delete":
            del data[a:b]
        else:
            c = rng.randrange(len(data))
            data[c:c] = piece
            if op == "move":
                if c > b:
                    del data[a:b]
        intact = max(a, b, locals().get("c", 0)) < len(bases["json"]) - 4064
        name = "m.json"
        if rng.random() < 0.3:
            data, name = bytearray(gzip.compress(bytes(data), 1)), "m.json.gz"
    elif family == "values":
        data = bytearray(bases["json"])
        import re

        # any number of the document but those of its last 64 bytes, which stay intact
        nums = [m.span() for m in re.finditer(rb"(?<=: )-?\d+(\.\d+)?", bytes(data[:-64]))]
        for _ in range(rng.randint(1, 5)):
            s, e = rng.choice(nums)
            # replace from the end so earlier spans stay valid
            data[s:e] = rng.choice(_HOSTILE_VALUES)
            nums = [x for x in nums if x[1] <= s]
            if not nums:
                break
        intact = True
        name = "m.json"
    elif family == "sqlite_bytes":
        data = bytearray(bases["sqlite"])
        page = 4096
        for _ in range(rng.randint(1, 6)):
            p = rng.randrange(1, len(data) // page)
            off = p * page + rng.randrange(page)
            for i in range(off, min(len(data), off + rng.randint(1, 64))):
                data[i] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: (len(data) // page) * rng.randint(1, 9) // 10 * page or page]
        name = "m.sqlite"
    else:  # sqlite_rows: values of the wrong type or range in real rows
        path = os.path.join(out_dir, "m.sqlite")
        with open(path, "wb") as f:
            f.write(bases["sqlite"])
        con = sqlite3.connect(path)
        tables = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if r[0].startswith(("CUPTI", "NVTX", "StringIds", "TARGET", "PROCESSES", "ThreadNames"))
        ]
        for _ in range(rng.randint(1, 4)):
            t = rng.choice(tables)
            cols = [r[1] for r in con.execute(f"PRAGMA table_info('{t}')")]
            if not cols:
                continue
            col = rng.choice(cols)
            val = rng.choice(
                ["'abc'", "NULL", "-1", "9223372036854775807", "-9223372036854775808", "1e300", "x'ff00ff'", "''", "0"]
            )
            where = rng.choice(["", f" WHERE rowid % {rng.randint(2, 50)} = 0", " WHERE rowid = 1"])
            try:
                con.execute(f"UPDATE '{t}' SET '{col}' = {val}{where}")
            except sqlite3.Error:
                pass  # a constraint: this mutation is not possible, try others
        if rng.random() < 0.2:
            t = rng.choice(tables)
            con.execute(f"DELETE FROM '{t}'")
        con.commit()
        con.close()
        return path, False
    path = os.path.join(out_dir, name)
    with open(path, "wb") as f:
        f.write(bytes(data))
    return path, intact


# case i runs COMMANDS[i % len(COMMANDS)]: every family meets every command
COMMANDS = (
    "info",
    "analyze",
    "analyze --md",
    "analyze --summary",
    "screenshot",
    "screenshot --timeline-only",
    "report",
    "sql",
    "stats",
    "diff",
    "whatif",
)


def command(name: str, path: str, out_dir: str, bases: dict) -> tuple[list[str], str, str | None]:
    """The argv of one command on the mutated file, the output it asks for, and where."""
    if name == "info":
        return ["info", path, "--json"], "json", None
    if name == "analyze":
        return ["analyze", path, "--json"], "json", None
    if name == "analyze --md":
        return ["analyze", path, "--md"], "md", None
    if name == "analyze --summary":
        out = os.path.join(out_dir, "s.gvsum")
        return ["analyze", path, "--json", "--summary", out], "summary", out
    if name.startswith("screenshot"):
        out = os.path.join(out_dir, "shot.png")
        return ["screenshot", path, "-o", out, *name.split()[1:]], "png", out
    if name == "report":
        out = os.path.join(out_dir, "report.html")
        return ["report", path, "-o", out], "html", out
    if name == "sql":
        return ["sql", path, "SELECT count(*) AS n, sum(dur) AS total FROM kernels", "--json"], "json", None
    if name == "stats":
        return ["stats", path, "--json"], "json", None
    if name == "whatif":  # the dependency replay of every rank and step
        return ["whatif", path, "--no-launch-overhead", "--json"], "json", None
    # diff: the mutated file against its unmutated base (of the same reader)
    base = os.path.join(bases["dir"], "base.sqlite" if path.endswith(".sqlite") else "base.json")
    return ["diff", path, base, "--json"], "json", None


def _check(family: str, i: int, path: str, intact: bool, bases: dict) -> list[str]:
    folder = os.path.dirname(path)
    case = os.path.dirname(folder)
    out_dir = os.path.join(case, "out")
    os.mkdir(out_dir)
    env = private_env(case)
    before = folder_state(folder)
    problems = []
    for name in (COMMANDS[i % len(COMMANDS)],):
        argv, expect, out = command(name, path, out_dir, bases)
        tag = f"{family}#{i} (seed {SEED}) {name}"
        # only the middle of an intact document is damaged: it must not be called cut short
        forbid = ("ends early", "cut off", "ends before") if intact else ()
        problems += check_command(
            tag,
            [*argv, "--no-cache"],
            path,
            expect,
            out=out,
            out_dir=out_dir,
            env=env,
            rss_limit_mb=RSS_LIMIT_MB,
            forbid=forbid,
            # analyze, whatif and diff say the reader's warnings (a file cut short) as info does
            warn_names=(os.path.basename(path),),
            fork=True,  # a process of its own, forked with the imports done (tests/cli_fork.py)
        )
        shutil.rmtree(out_dir)
        os.mkdir(out_dir)
    if left_behind(env):
        problems.append(f"{family}#{i}: files left outside the input and output: {left_behind(env)[:5]}")
    if folder_state(folder) != before:
        problems.append(f"{family}#{i}: the folder of the input changed: {sorted(folder_state(folder))}")
    return problems


@pytest.mark.parametrize("family", FAMILIES)
def test_fuzz(family, bases, tmp_path):
    rng = random.Random(f"{SEED}-{family}")
    jobs = []
    for i in range(PER_FAMILY):
        d = tmp_path / f"c{i}" / "in"
        d.mkdir(parents=True)
        path, intact = _mutate(family, rng, bases, str(d))
        jobs.append((family, i, path, intact, bases))
    base_before = folder_state(bases["dir"])
    with ThreadPoolExecutor(max_workers=2) as ex:
        problems = [p for ps in ex.map(lambda j: _check(*j), jobs) for p in ps]
    if folder_state(bases["dir"]) != base_before:
        problems.append(f"{family}: the folder of diff's base changed")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:20])
