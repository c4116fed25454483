import os
import re
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("GPUVIEWER_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
TRACES = os.path.join(SHARED, "traces")
COMPAT = os.path.join(SHARED, "compat")
SAMPLES = os.path.join(ROOT, "samples")

HAVE_SHARED = os.path.isdir(TRACES)

# Without ../shared (a fresh clone), the tests that read the real traces are skipped and the
# rest run: a test module needs them when it, or a helper module of tests/ it imports, names
# the shared folder.
_SHARED_NAMES = re.compile(r"\b(trace_path|compat_path|TRACES|COMPAT|SHARED)\b")
_IMPORTS = re.compile(r"^\s*(?:from\s+(\w+)\s+import|import\s+(\w+))", re.M)
_needs: dict[str, bool] = {}
_skipped_for_shared = 0


def _needs_shared(path: str, seen: frozenset = frozenset()) -> bool:
    if path not in _needs:
        try:
            with open(path, encoding="utf-8") as f:
                src = f.read()
        except OSError:
            return False
        if os.path.basename(path) == "conftest.py":
            return False
        local = {a or b for a, b in _IMPORTS.findall(src)} - {"conftest"}
        # helpers beside the test or in tests/ itself (the tests mirror the packages in subfolders)
        helpers = [
            os.path.join(d, f"{n}.py")
            for n in local
            for d in {os.path.dirname(path), os.path.dirname(os.path.abspath(__file__))}
        ]
        _needs[path] = bool(_SHARED_NAMES.search(src)) or any(
            os.path.isfile(h) and h not in seen and _needs_shared(h, seen | {path}) for h in helpers
        )
    return _needs[path]


# the files that take longest (their tests' time summed, `pytest --durations=0`, 2026-12-05): handed
# to pytest-xdist's workers first, so that no long file starts last while the other worker idles
_LONGEST_FIRST = (
    "app/test_packaging.py",
    "session/test_dask.py",
    "analysis/test_finding_sentences.py",
    "io/test_hostile_json.py",
    "analysis/test_critical_path.py",
    "analysis/test_finding_audit2.py",
    "widgets/test_hosts_alignment.py",
    "analysis/test_analysis_v2.py",
    "app/test_hostile_cli.py",
    "io/test_file_cache.py",
    "io/test_fuzz_inputs.py",
    "widgets/test_summary_window.py",
)


def _first_rank(item) -> int:
    path = str(item.fspath).replace(os.sep, "/")
    return next((k for k, f in enumerate(_LONGEST_FIRST) if path.endswith("tests/" + f)), len(_LONGEST_FIRST))


def pytest_collection_modifyitems(config, items):
    global _skipped_for_shared
    items.sort(key=_first_rank)  # (stable: a file's tests keep their order, the others theirs)
    if HAVE_SHARED:
        return
    skip = pytest.mark.skip(reason=f"needs the real traces at {TRACES} (set GPUVIEWER_SHARED)")
    for item in items:
        if _needs_shared(str(item.fspath)):
            item.add_marker(skip)
            _skipped_for_shared += 1


@pytest.hookimpl(trylast=True)  # after the slowest-20 list: the line just above pytest's own count
def pytest_terminal_summary(terminalreporter):
    if not HAVE_SHARED:
        # counted from the reports, which reach this process also from pytest-xdist's workers
        # (collection, and so _skipped_for_shared, happens in the workers there)
        reason = "needs the real traces at"
        got = sum(1 for r in terminalreporter.stats.get("skipped", []) if reason in str(getattr(r, "longrepr", "")))
        _skipped = max(got, _skipped_for_shared)
        terminalreporter.write_line(
            f"{_skipped} tests skipped because the real traces are absent ({TRACES}; set GPUVIEWER_SHARED to run them)"
        )


_memo_dir: str | None = None


def _run_dir(tmp_path_factory):
    """The folder of this test run: under pytest-xdist the one above each worker's own, which
    the workers share."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test with Qt widgets (closed by qtbot's teardown), their garbage is collected here,
    on the GUI thread: left for later, a collection set off on a window's query or analysis thread
    in the next test destroyed them there and deadlocked with the GUI thread (a worker hung in
    make_window). The app collects on its GUI thread only (app/gui.py); tests build windows
    without it."""
    yield
    if "qtbot" in getattr(item, "fixturenames", ()):
        import gc

        gc.collect()


@pytest.fixture(autouse=True, scope="session")
def _cache_dir(tmp_path_factory):
    """One cache of opened traces for the whole run, and one folder for run_cli_once's answers:
    under pytest-xdist both are shared by the workers (the folder above each worker's own), so a
    trace that tests in both workers open is read once, and the app's cache, which locks its
    entries, meets two processes as it does with two windows."""
    global _memo_dir
    run_dir = _run_dir(tmp_path_factory)
    d = run_dir / "cache"
    d.mkdir(exist_ok=True)
    _memo_dir = str(run_dir / "cli-once")
    os.makedirs(_memo_dir, exist_ok=True)
    os.environ["GPUVIEWER_CACHE_DIR"] = str(d)
    yield d


SCALE_TOOL = os.path.join(SHARED, "tools", "scale_trace.py")


@pytest.fixture(scope="session")
def ranks16(tmp_path_factory) -> str:
    """A folder of 16 ranks made from a real DDP rank (kineto/ddp_clean rank 0) by the project's
    scaling tool, built once per test run: it costs about 10 s of CPU, and the modules that need
    many ranks (out-of-core, Dask, summaries, the layers' pixels) all read the same one. Made
    under a lock in the run's folder, so pytest-xdist's workers share it too. Tests only read it:
    one that wrote there would change the others' input (copy it first); its files are made
    read-only, which stops such a write where the tests do not run as root."""
    import fcntl
    import shutil
    import subprocess

    if not os.path.exists(SCALE_TOOL):
        pytest.skip(f"no {SCALE_TOOL} to make 16 ranks")
    run_dir = _run_dir(tmp_path_factory)
    out = run_dir / "ranks16"
    with open(run_dir / "ranks16.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir():
            part = run_dir / "ranks16.part"
            shutil.rmtree(part, ignore_errors=True)  # left by a run that was stopped
            src = trace_path("kineto", "ddp_clean", "ddp_clean_rank0.json.gz")
            subprocess.run(
                [sys.executable, SCALE_TOOL, "kineto", src, str(part), "--ranks", "16", "--tiles", "1"],
                check=True,
                capture_output=True,
                timeout=600,  # a guard against a hang, not a time limit
            )
            assert len(os.listdir(part)) == 16
            for name in os.listdir(part):
                os.chmod(part / name, 0o444)
            os.replace(part, out)  # whole or not at all: another worker sees it only when made
    return str(out)


def load_truth() -> dict:
    """The planted effects of the real traces (truth.json); without ../shared an empty entry
    for any name, so that modules parametrized from it still collect (their tests are skipped)."""
    import collections
    import json

    if not HAVE_SHARED:
        return collections.defaultdict(dict)
    with open(os.path.join(TRACES, "truth.json")) as f:
        return json.load(f)


def shared_listdir(path: str) -> list[str]:
    """os.listdir of a shared folder, sorted; [] without ../shared (its tests are skipped)."""
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def raw_sql(path: str, sql: str, *args) -> list[tuple]:
    """Rows of a query over an nsys export, opened read-only with sqlite3 (the independent side of
    a test: nothing from gpuviewer)."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def trace_path(*parts: str) -> str:
    return os.path.join(TRACES, *parts)


def compat_path(*parts: str) -> str:
    return os.path.join(COMPAT, *parts)


def alexnet_path() -> str:
    """HTA's alexnet benchmark trace (a capture without steps, 30 s of start-up), used by several tests."""
    return compat_path(
        "facebookresearch__HolisticTraceAnalysis",
        "critical_path",
        "alexnet",
        "benchmark_result_2869224_1695835535_trace.json.gz",
    )


def raw_events(path: str) -> list[dict]:
    """A gzip Kineto file's traceEvents, read with the standard library (no gpuviewer)."""
    import gzip
    import json

    with gzip.open(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def export_rows(path: str, sql: str, *args) -> list:
    """Rows of an Nsight Systems export, read with sqlite3, read-only (no gpuviewer)."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def covered(intervals, a: float, b: float) -> float:
    """How much of [a, b] the sorted (start, end) intervals cover, each instant once (plain
    Python: the tests' own union, not gpuviewer's)."""
    total, end = 0.0, a
    for s, e in intervals:
        s, e = max(s, end), min(e, b)
        if e > s:
            total += e - s
            end = e
    return total


def profiler_steps(ev: list[dict]) -> tuple[list[tuple[int, float, float]], dict]:
    """Of a Kineto file's complete events: its ProfilerStep#N ranges as (N, start, end) in µs, and
    each CUDA call's start by its correlation id (the launch of the GPU op with that id)."""
    steps = [
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]
    launch = {
        e["args"]["correlation"]: e["ts"]
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    return steps, launch


def nsys_gpu_span(path: str) -> tuple[int, int]:
    """An Nsight Systems export's first GPU activity's start and last one's end (kernels, copies,
    memsets; ns), read with sqlite3 (no gpuviewer)."""
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        kinds = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        union = " UNION ALL ".join(f"SELECT start s, end e FROM {t}" for t in kinds if t in have)
        lo, hi = db.execute(f"SELECT min(s), max(e) FROM ({union})").fetchone()
    finally:
        db.close()
    return int(lo), int(hi)


def flat_findings(findings: list[dict]):
    """analyze --json's findings and, after each, its symptoms, depth first."""
    for f in findings:
        yield f
        yield from flat_findings(f["children"])


# Settings a process reads as it starts (its locale and text encoding, Python's own options): a
# command whose environment has other values of these than the run had at its start (by env=, or
# by a test's monkeypatch) runs in a fresh process, not a forked one
_READ_AT_START = re.compile(r"^(LANG$|LANGUAGE$|LC_|PYTHON)")
ENV_AT_START = dict(os.environ)  # the forking processes (tests/cli_fork.py) start with this one


def _start_settings(env: dict) -> dict:
    return {k: v for k, v in env.items() if _READ_AT_START.match(k)}


def forks(env: dict | None) -> bool:
    """Whether a command with these settings runs forked (see run_cli)."""
    if os.environ.get("GPUVIEWER_TEST_FRESH") == "1":
        return False
    return _start_settings({**os.environ, **(env or {})}) == _start_settings(ENV_AT_START)


def run_cli(*args: str, env: dict | None = None):
    """`gpuviewer ARGS` in a process of its own: (exit code, stdout, stderr) as a CompletedProcess.
    The process is forked from one that has the imports done (tests/cli_fork.py: the interpreter's
    start and imports saved, over hundreds of commands a run: 0.11 CPU-s instead of 0.25 for a
    refused file, 0.43 instead of 0.59 for `info` of samples/ddp), except where the command's
    environment (env, or the test's own) changes what a process reads at its start (see forks),
    or GPUVIEWER_TEST_FRESH=1 asks for a fresh interpreter every time."""
    import subprocess

    e = dict(os.environ)
    e.update(env or {})
    argv = [sys.executable, "-m", "gpuviewer", *args]
    if forks(env):
        from cli_fork import run_forked

        got = run_forked(list(args), e, 600)
        if got is None:
            raise subprocess.TimeoutExpired(argv, 600)
        rc, out, err = got
        err = "".join(ln for ln in err.splitlines(keepends=True) if not ln.startswith("@@rss_kb="))
        return subprocess.CompletedProcess(argv, rc, out, err)
    return subprocess.run(argv, capture_output=True, text=True, env=e, cwd=ROOT, timeout=600)


def run_cli_once(*args: str):
    """run_cli(*args) run once in this test run and its answer (exit code, stdout, stderr) kept:
    the same command on the same input gives the same answer, so modules that check different
    things of `analyze PATH --json` share one run. Only for inputs nothing changes during the run
    (the shared traces, samples): the key is the arguments. Under pytest-xdist the workers share the
    answers; a worker asking for one the other is computing waits for it (a lock per command)."""
    import fcntl
    import hashlib
    import json
    import subprocess

    assert _memo_dir is not None, "run_cli_once needs the session fixture _cache_dir"
    key = os.path.join(_memo_dir, hashlib.sha256("\0".join(args).encode()).hexdigest()[:32])
    with open(key + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(key + ".json"):
            p = run_cli(*args)
            with open(key + ".part", "w") as f:
                json.dump([p.returncode, p.stdout, p.stderr], f)
            os.replace(key + ".part", key + ".json")
        with open(key + ".json") as f:
            rc, out, err = json.load(f)
    return subprocess.CompletedProcess([sys.executable, "-m", "gpuviewer", *args], rc, out, err)


def analyzed_json(path) -> dict:
    """`gpuviewer analyze PATH --json` (run once in the test run: run_cli_once), its answer read."""
    import json

    p = run_cli_once("analyze", str(path), "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def analyzed_text(path) -> str:
    """`gpuviewer analyze PATH` (run once in the test run), what it printed."""
    p = run_cli_once("analyze", str(path))
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def opened_window(qapp, folder, paths: list[str], size: tuple[int, int] = (1366, 768)):
    """A main window for a module's tests (settings in `folder`), shown at `size`, the session of
    `paths` opened and analysed in this thread; close it when done."""
    from PySide6.QtCore import QSettings

    from gpuviewer.widgets.main_window import MainWindow

    w = MainWindow(QSettings(str(folder / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = True
    w.resize(*size)
    w.show()
    assert w.open_paths(paths, block=True)
    qapp.processEvents()
    return w


def make_window(qtbot, tmp_path, *, block_analysis: bool = False, size: tuple[int, int] | None = None):
    """A main window with its own settings file, errors kept off dialogs; shown at `size`."""
    from PySide6.QtCore import QSettings

    from gpuviewer.widgets.main_window import MainWindow

    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    w.quiet_errors = True
    w.controller.block_analysis = block_analysis
    qtbot.addWidget(w)
    if size is not None:
        w.resize(*size)
        w.show()
    return w


def png_size(path) -> tuple[int, int]:
    """Width and height from a PNG's header."""
    import struct

    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def write_json_gz(path, doc) -> None:
    """doc written as gzip'd JSON at path, fast: json.dumps is the C encoder (json.dump streams
    through the pure-Python one, into gzip's many small writes) at compresslevel 1 (an fsdp rank:
    0.45 s against 3.0 s)."""
    import gzip
    import json

    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write(json.dumps(doc))


def shift_gpu_clock(src: str, dst, rank: int, us: int) -> None:
    """The folder's Kineto traces written to dst, with one rank's GPU events `us` later (its GPU
    clock's offset from its host's)."""
    import gzip
    import json

    gpu = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
    for f in sorted(os.listdir(src)):
        with gzip.open(os.path.join(src, f), "rt") as fh:
            d = json.load(fh)
        if f.endswith(f"rank{rank}.json.gz"):
            for e in d["traceEvents"]:
                if e.get("cat") in gpu:
                    e["ts"] += us
        write_json_gz(os.path.join(dst, f), d)


def launch_waits(path: str) -> dict[int, dict]:
    """Per ProfilerStep of a Kineto rank file: the ms its GPU's work other than NCCL's waits for the
    host's next launch, by gap length: between stretches of that work (ops launched in the step),
    a gap counts where the op starting the next stretch was launched by a call that returned after
    the GPU went idle; and the waits of 0.1 ms or more, each up to its launch's return (spans, µs),
    with the thread that made that launch (threads, its tid). Computed here from the raw file, for
    tests of host-paced findings."""
    ev = [e for e in raw_events(path) if e.get("ph") == "X"]
    steps, _ = profiler_steps(ev)
    call = {
        e["args"]["correlation"]: (e["ts"], e["ts"] + e["dur"], e["tid"])
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    ops = [
        (e["ts"], e["ts"] + e["dur"], call[e["args"]["correlation"]])
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and "nccl" not in e["name"].lower()
        and e.get("args", {}).get("correlation") in call
    ]
    out = {}
    for n, a, b in steps:
        mine = sorted(o for o in ops if a <= o[2][0] < b)
        short = mid = long = 0.0
        spans = []  # the waits of 0.1 ms or more, each up to its launch's return (µs)
        threads = []  # the tid of each one's launch
        end = None
        for s, e, (_c0, c1, tid) in mine:
            if end is not None and s > end and c1 > end:  # the GPU idled, then waited for this launch
                g = s - end
                if g < 100:
                    short += g
                elif g < 1000:
                    mid += g
                else:
                    long += g
                if g >= 100:
                    spans.append((end, min(s, c1)))
                    threads.append(tid)
            end = e if end is None else max(end, e)
        out[n] = {"short": short / 1e3, "mid": mid / 1e3, "long": long / 1e3, "spans": spans, "threads": threads}
    return out
