"""The out-of-core build with its ranks read by a pool of processes (io/ooc_pool.py) writes the
cache the one-rank-at-a-time build writes, byte for byte, and the same analysis; cancelling stops
the workers and leaves no cache entry; a dead worker or a bad rank file ends it with one line.
GPUVIEWER_OOC_WORKERS picks the pool's size (1: no pool), GPUVIEWER_OUT_OF_CORE_MB=0 the
out-of-core build for any size."""

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import SHARED, run_cli, trace_path
from procs import children_of, ended

from gpuviewer.io import cache
from gpuviewer.io.errors import Cancelled, TraceError
from gpuviewer.io.session import load, session_files


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """5 ranks made from a real DDP rank by the project's scaling tool."""
    out = tmp_path_factory.mktemp("r5")
    tool = os.path.join(SHARED, "tools", "scale_trace.py")
    subprocess.run(
        [
            sys.executable,
            tool,
            "kineto",
            trace_path("kineto", "ddp", "ddp_rank0.json.gz"),
            str(out),
            "--ranks",
            "5",
            "--tiles",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return str(out)


def _cold_analyze(folder: str, cache_dir: str, workers: int):
    env = {"GPUVIEWER_CACHE_DIR": cache_dir, "GPUVIEWER_OUT_OF_CORE_MB": "0", "GPUVIEWER_OOC_WORKERS": str(workers)}
    p = run_cli("analyze", "--json", folder, env=env)
    assert p.returncode == 0, p.stderr
    files = session_files([folder])[0]
    entries = [d for d in os.listdir(cache_dir) if not d.startswith(".")]
    return p.stdout, os.path.join(cache_dir, cache.key_for(files)), entries


@pytest.fixture(scope="module")
def built(ranks, tmp_path_factory):
    """`analyze --json` of the folder with an empty cache: rank by rank, then by 3 workers."""
    root = tmp_path_factory.mktemp("caches")
    return {w: _cold_analyze(ranks, str(root / f"w{w}"), w) for w in (1, 3)}


def test_parallel_build_writes_the_serial_cache_byte_for_byte(built):
    (_j1, d1, e1), (_j3, d3, e3) = built[1], built[3]
    assert e1 == e3 and os.path.basename(d1) in e1
    # besides the session's entry, a pointer under each file's own key (io/cache_slice.py): the
    # file's place in the session and its names' order, no copy of its columns
    pointers = [e for e in e1 if e != os.path.basename(d1)]
    assert len(pointers) == 5
    for e in pointers:
        d = os.path.join(os.path.dirname(d1), e)
        assert sorted(os.listdir(d)) == ["meta.json", "part_names.npy", "sums.json"]
        for f in ("meta.json", "part_names.npy"):  # the pool's pointers are the serial build's
            assert filecmp.cmp(os.path.join(d, f), os.path.join(os.path.dirname(d3), e, f), shallow=False), f
        with open(os.path.join(d, "meta.json"), "rb") as f:
            assert json.load(f)["in"] == os.path.basename(d1)
    names = sorted(os.listdir(d1))
    assert names == sorted(os.listdir(d3))
    assert {"start.npy", "name.npy", "lane.npy", "flow_src.npy", "lod_index.npy", "meta.json"} <= set(names)
    differ = [f for f in names if not filecmp.cmp(os.path.join(d1, f), os.path.join(d3, f), shallow=False)]
    assert differ == []
    with open(os.path.join(d3, "meta.json"), "rb") as f:
        meta = json.load(f)
    assert len(meta["ranks"]) == 5


def test_parallel_build_gives_the_same_analysis(built):
    j1, j3 = built[1][0], built[3][0]
    assert j1 == j3
    a = json.loads(j3)
    assert len(a["ranks"]) == 5 and a["findings"]


def _children() -> set[int]:
    """This process's live child processes (of any of its threads), from /proc."""
    return children_of(os.getpid())


def _workers(before: set[int]) -> set[int]:
    """The children that are the pool's forked workers: started since `before` (not a forking
    process of tests/cli_fork.py an earlier test left), and not multiprocessing's resource
    tracker, which shared memory starts beside them (a child of its own, exec'd)."""
    out = set()
    for pid in _children() - before:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"resource_tracker" in fh.read():
                    continue
        except OSError:
            continue
        out.add(pid)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def _no_entry(cache_dir) -> bool:
    """Neither a session's entry nor a build's temporary folder."""
    return not os.path.isdir(cache_dir) or os.listdir(cache_dir) == []


@pytest.fixture
def pool_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("GPUVIEWER_OUT_OF_CORE_MB", "0")
    monkeypatch.setenv("GPUVIEWER_OOC_WORKERS", "2")
    return tmp_path / "c"


def test_cancel_stops_the_workers_and_leaves_no_cache_entry(ranks, pool_env):
    before = _children()
    seen: set[int] = set()
    calls = [0]

    def cancelled() -> bool:
        # the build asks before each rank's part and while it waits: the second time, the
        # workers are running (seen) and the first part may be in the store already
        calls[0] += 1
        seen.update(_children() - before)
        return calls[0] >= 2

    with pytest.raises(Cancelled):
        load([ranks], cancelled=cancelled)
    assert len(seen) == 2  # the pool's two workers were there
    assert not any(_alive(p) for p in seen)  # and are gone when load returns
    assert _no_entry(pool_env)


def test_progress_names_the_rank_being_read(ranks, pool_env):
    messages: list[tuple[float, str]] = []
    t = load([ranks], progress=lambda f, m: messages.append((f, m)))
    assert len(t.ranks) == 5 and not t.metadata.get("from_cache")
    reading = [m for _f, m in messages if m.startswith("reading rank")]
    fracs = [f for f, _m in messages]
    assert fracs == sorted(fracs) and fracs[-1] <= 1.0
    # the terminal and the window show these: file, MB, events so far, ranks done
    assert reading and all(" MB, " in m and " events · " in m and m.endswith(" of 5 ranks") for m in reading)


def test_a_killed_worker_ends_the_build_with_one_line_naming_the_files(ranks, pool_env):
    killed: list[int] = []
    before = _children()

    def cancelled() -> bool:
        if not killed:
            pid = min(_workers(before))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return False

    with pytest.raises(TraceError) as e:
        load([ranks], cancelled=cancelled)
    msg = str(e.value)
    assert "\n" not in msg and "rank0.json.gz" in msg and "stopped" in msg
    assert _no_entry(pool_env)


def test_a_bad_rank_file_is_named_in_one_line_with_exit_2(ranks, tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for k in range(4):
        shutil.copy(os.path.join(ranks, f"rank{k}.json.gz"), d / f"rank{k}.json.gz")
    with open(os.path.join(ranks, "rank4.json.gz"), "rb") as f:
        (d / "rank4.json.gz").write_bytes(f.read(300))  # cut before its first complete event
    listing = sorted(os.listdir(d))
    env = {"GPUVIEWER_CACHE_DIR": str(tmp_path / "c"), "GPUVIEWER_OUT_OF_CORE_MB": "0", "GPUVIEWER_OOC_WORKERS": "2"}
    p = run_cli("info", str(d), env=env)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(d / "rank4.json.gz") in lines[0] and "Traceback" not in p.stderr
    assert sorted(os.listdir(d)) == listing  # nothing written beside the input
    assert _no_entry(tmp_path / "c")


def test_pool_size_is_bounded_by_cores_files_and_memory(ranks, monkeypatch):
    from gpuviewer.io import ooc_pool

    files = session_files([ranks])[0]
    import gzip

    with gzip.open(files[0], "rb") as f:
        assert ooc_pool.json_bytes(files[0]) == len(f.read())  # the gzip trailer's size
    one = max(ooc_pool.peak_bytes(f) for f in files)
    monkeypatch.setenv("GPUVIEWER_OOC_WORKERS", "4")
    monkeypatch.setenv("GPUVIEWER_OOC_MEMORY_MB", str(100 * one / 1e6))
    assert ooc_pool.workers_for(files) == 4
    assert ooc_pool.workers_for(files[:3]) == 3
    monkeypatch.setenv("GPUVIEWER_OOC_MEMORY_MB", str(2.5 * one / 1e6))
    assert ooc_pool.workers_for(files) == 2
    monkeypatch.setenv("GPUVIEWER_OOC_MEMORY_MB", str(0.5 * one / 1e6))
    assert ooc_pool.workers_for(files) == 1  # not even one fits: read rank by rank, no pool
    monkeypatch.setenv("GPUVIEWER_OOC_WORKERS", "1")
    monkeypatch.delenv("GPUVIEWER_OOC_MEMORY_MB")
    assert ooc_pool.workers_for(files) == 1


def test_the_windows_cancel_ends_the_reader_and_its_workers(ranks, pool_env, qtbot):
    """The window cancels by ending its reader process (widgets/loader.py): the rank workers
    that process forked end with it, and no cache entry is left."""
    from gpuviewer.widgets.loader import Loader

    loader = Loader()
    workers: set[int] = set()

    def reading_with_workers(_f, m) -> bool:
        if loader.proc is None or not m.startswith("reading rank"):
            return False
        workers.update(children_of(loader.proc.pid))
        return len(workers) == 2

    with qtbot.waitSignal(loader.progress, timeout=300_000, check_params_cb=reading_with_workers):
        loader.start([ranks])
    loader.cancel()
    assert loader.proc is None and len(workers) == 2
    assert all(ended(p, 120) for p in workers)
    # the reader's temporary build folder goes on the next build's sweep, once its builder is
    # gone; no session entry was committed
    assert not [d for d in os.listdir(pool_env) if not d.startswith(".")]
