"""The column cache never serves wrong numbers (issue 30, item 4): every cached file is checked
against the checksum written with it; a damaged entry is rebuilt from the trace with one line;
builds left behind by a killed process are swept; special files are never opened."""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, SAMPLES, run_cli

from gpuviewer.io import cache
from gpuviewer.io.session import session_files

DDP = os.path.join(SAMPLES, "ddp")
ONE = os.path.join(DDP, "ddp_rank0.json.gz")  # one file: one cache entry (a folder also leaves its files')
DAMAGED = re.compile(r"^the cache of .+ was damaged \((.+)\) and was rebuilt$")


def _answers(out: str) -> dict:
    d = json.loads(out)
    d.pop("load_seconds", None)
    return d


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache of samples/ddp, a pristine copy of its entry, and the answers without a cache."""
    root = tmp_path_factory.mktemp("integrity")
    env = {"GPUVIEWER_CACHE_DIR": str(root / "c")}
    r = run_cli("info", DDP, "--json", env=env)
    assert r.returncode == 0, r.stderr
    entry = cache.key_for(session_files([DDP])[0])  # the folder's (each file has its own beside it)
    shutil.copytree(root / "c" / entry, root / "pristine")
    ref = {cmd: run_cli(cmd, DDP, "--json", "--no-cache") for cmd in ("info", "analyze")}
    assert all(p.returncode == 0 for p in ref.values())
    return {
        "env": env,
        "entry": str(root / "c" / entry),
        "pristine": str(root / "pristine"),
        "info": _answers(ref["info"].stdout),
        "analyze": json.loads(ref["analyze"].stdout),
    }


def _restore(b) -> None:
    shutil.rmtree(b["entry"], ignore_errors=True)
    shutil.copytree(b["pristine"], b["entry"])


def _flip(path: str, at: int | None = None) -> None:
    """One bit of a file's data (past a .npy's 128-byte header) inverted."""
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        at = (128 + size) // 2 if at is None else at
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x10]))


def _steps_digit(path: str) -> None:
    """A digit of the first step's start changed in meta.json (still valid JSON)."""
    with open(path, "rb") as f:
        text = f.read()
    i = text.index(b'"steps":[[') + len(b'"steps":[[')
    j = text.index(b",", text.index(b",", i) + 1) + 1  # [rank, step, START, end]
    digit = text[j + 5 : j + 6]
    assert digit.isdigit()
    with open(path, "wb") as f:
        f.write(text[: j + 5] + (b"1" if digit != b"1" else b"2") + text[j + 6 :])


@pytest.mark.parametrize(
    "name,cmd",
    [
        ("dur.npy", "info"),
        ("start.npy", "info"),
        ("depth.npy", "analyze"),
        ("counter0_v.npy", "info"),
        ("flow_src.npy", "analyze"),
        ("lod_start.npy", "info"),
        ("lod_rep.npy", "info"),
        ("meta.json", "analyze"),
    ],
)
def test_a_flipped_bit_gives_the_clean_answer_and_one_line(built, name, cmd):
    _restore(built)
    path = os.path.join(built["entry"], name)
    if name == "meta.json":
        _steps_digit(path)
    else:
        _flip(path)
    r = run_cli(cmd, DDP, "--json", env=built["env"])
    assert r.returncode == 0, r.stderr
    if cmd == "info":
        assert r.stderr == "", r.stderr
        got = _answers(r.stdout)
        notes = [w for w in got["warnings"] if DAMAGED.match(w)]
        assert len(notes) == 1 and name in notes[0], got["warnings"]
        got["warnings"].remove(notes[0])
        # the session is rebuilt from its files' own entries (io/cache_join.py), and says so
        assert got.pop("file_caches") == {"reused": 2, "read": 0}
        assert got == built["info"]
    else:
        # analyze says the rebuild on stderr, the one line info lists among its warnings
        said = r.stderr.splitlines()
        assert len(said) == 1 and said[0].startswith("gpuviewer: warning: "), r.stderr
        assert DAMAGED.match(said[0].removeprefix("gpuviewer: warning: ")) and name in said[0], said
        assert json.loads(r.stdout) == built["analyze"]
    # rebuilt: the next open is from a clean cache and says nothing
    again = run_cli("info", DDP, "--json", env=built["env"])
    assert _answers(again.stdout) == built["info"]


def test_the_damage_line_is_shown_by_info(built):
    _restore(built)
    _flip(os.path.join(built["entry"], "dur.npy"))
    r = run_cli("info", DDP, env=built["env"])
    lines = [ln for ln in r.stdout.splitlines() if "damaged" in ln]
    assert r.returncode == 0 and len(lines) == 1, r.stdout
    assert re.match(
        r"^warning +the cache of .*ddp_rank0\.json\.gz and 1 more was damaged "
        r"\(dur\.npy does not match its checksum\) and was rebuilt$",
        lines[0],
    )


def test_a_zero_byte_column_is_rebuilt_and_the_trace_not_blamed(built):
    _restore(built)
    with open(os.path.join(built["entry"], "start.npy"), "wb"):
        pass
    r = run_cli("info", DDP, "--json", env=built["env"])
    assert r.returncode == 0 and r.stderr == ""
    got = _answers(r.stdout)
    assert any("start.npy is 0 bytes" in w for w in got["warnings"])
    assert os.path.getsize(os.path.join(built["entry"], "start.npy")) > 0
    again = run_cli("info", DDP, "--json", env=built["env"])
    assert again.returncode == 0 and _answers(again.stdout) == built["info"]


@pytest.mark.parametrize("name", ["meta.json", "dur.npy"])
def test_a_fifo_in_the_cache_is_never_opened(built, name):
    _restore(built)
    path = os.path.join(built["entry"], name)
    os.unlink(path)
    os.mkfifo(path)
    # a reader opening the FIFO would block forever (run_cli's own limit would end the test)
    r = run_cli("info", DDP, "--json", env=built["env"])
    assert r.returncode == 0 and r.stderr == ""
    got = _answers(r.stdout)
    assert [w for w in got["warnings"] if DAMAGED.match(w)] == [
        next(w for w in got["warnings"] if f"{name} is not a regular file" in w)
    ]
    assert os.path.isfile(path)


_KILLED_BUILD = r"""
import os, signal, sys
import numpy as np
from gpuviewer.io.cache_stream import PartStore
store = PartStore()
store.append("start", np.arange(1 << 20, dtype=np.int64))
store.cols["start"].f.flush()
print(store.tmp, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # killed in the middle of its build
"""


def test_a_killed_build_leaves_nothing_after_the_next_start(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run(
        [sys.executable, "-c", _KILLED_BUILD], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert p.returncode == -9
    left = p.stdout.strip()
    assert os.path.basename(left).startswith(".tmp-") and os.path.getsize(os.path.join(left, "start.npy")) > 8 << 20
    live = cache.new_tmp()  # a build under way in a live process (this one) is kept
    r = run_cli("info", DDP, env={"GPUVIEWER_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0
    assert not os.path.exists(left)
    assert os.path.isdir(live)
    tmps = [n for n in os.listdir(tmp_path / "c") if n.startswith(".tmp-")]
    assert tmps == [os.path.basename(live)]


def test_builds_under_way_count_in_eviction(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    live = cache.new_tmp()
    with open(os.path.join(live, "start.npy"), "wb") as f:
        f.write(b"\0" * 100_000)
    assert run_cli("info", ONE, env={"GPUVIEWER_CACHE_DIR": str(tmp_path / "c")}).returncode == 0
    (entry,) = [os.path.join(tmp_path / "c", d) for d in os.listdir(tmp_path / "c") if not d.startswith(".")]
    # the entry alone fits; with the build under way it does not, so the entry goes, not the build
    assert cache.evict(max_bytes=cache.dir_size(entry) + 50_000) == [entry]
    assert os.path.isdir(live)


def test_cache_verify_and_clear(tmp_path):
    env = {"GPUVIEWER_CACHE_DIR": str(tmp_path / "c")}
    assert run_cli("info", ONE, env=env).returncode == 0
    ok = run_cli("cache", "--verify", env=env)
    assert ok.returncode == 0 and ok.stdout.startswith("1 cache entries") and " 0 damaged" in ok.stdout
    (entry,) = [d for d in os.listdir(tmp_path / "c")]
    _flip(str(tmp_path / "c" / entry / "lane.npy"))
    bad = run_cli("cache", "--verify", env=env)
    lines = bad.stdout.splitlines()
    assert bad.returncode == 1 and len(lines) == 2 and bad.stderr == ""
    assert lines[0] == f"damaged     {tmp_path / 'c' / entry}: lane.npy does not match its checksum"
    assert "1 damaged" in lines[1]
    # --clear removes gpuviewer's entries only: not a file or a folder someone put there
    (tmp_path / "c" / "mine.txt").write_text("keep")
    (tmp_path / "c" / "project").mkdir()
    (tmp_path / "c" / "project" / "meta.json").write_text("{}")
    gone = run_cli("cache", "--clear", env=env)
    assert gone.returncode == 0 and gone.stdout.startswith("removed 1 cache entries"), gone.stdout
    assert sorted(os.listdir(tmp_path / "c")) == ["mine.txt", "project"]
    assert (tmp_path / "c" / "mine.txt").read_text() == "keep"
    # a cache folder that is not a folder: one line, exit 2
    (tmp_path / "f").write_text("x")
    err = run_cli("cache", "--verify", env={"GPUVIEWER_CACHE_DIR": str(tmp_path / "f")})
    assert err.returncode == 2 and len(err.stderr.splitlines()) == 1 and "Traceback" not in err.stderr


def test_a_big_entry_checks_each_column_when_first_read(tmp_path, monkeypatch):
    """Above EAGER_CHECK_BYTES a whole check would cost more than 5% of the open: each column is
    checked when first read; damage found then removes the entry and says so, never a wrong value."""
    from gpuviewer.io.errors import TraceError
    from gpuviewer.io.session import load

    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setattr(cache, "EAGER_CHECK_BYTES", 0)
    files = [os.path.join(DDP, f) for f in sorted(os.listdir(DDP))]
    fresh = load(files, use_cache=False)
    load(files)
    t = load(files)
    assert t.metadata.get("from_cache")
    assert np.array_equal(t.columns["dur"], fresh.columns["dur"])
    d = os.path.join(cache.cache_root(), cache.key_for(files))
    _flip(os.path.join(d, "start.npy"))
    t = load(files)
    with pytest.raises(TraceError, match=r"cache was found damaged while reading \(start\.npy does not match"):
        t.columns["start"]
    assert not os.path.exists(d)
    again = load(files)
    assert np.array_equal(again.columns["start"], fresh.columns["start"])


def test_hashing_a_column_does_not_make_it_resident(tmp_path):
    """A checksum reads the file a block at a time: its pages are never mapped into the process
    (a whole-file mapping took a 100M-event session's reader from 254 to 844 MB at commit). The
    digest is the reference xxh3_64 / crc32 of the whole file, measured here by the process's peak
    resident set (reset through /proc/self/clear_refs) around the hash of a 256 MB column."""
    import zlib

    import xxhash

    from gpuviewer.io.cache_check import file_sum

    path = tmp_path / "col.npy"
    block = np.random.default_rng(0).integers(0, 2**62, 1 << 20, dtype=np.int64).tobytes()  # 8 MB
    with open(path, "wb") as f:
        for k in range(32):
            f.write(block[k:] + block[:k])  # 256 MB, no two blocks alike
    data = path.read_bytes()
    want = {"xxh3_64": xxhash.xxh3_64_hexdigest(data), "crc32": f"{zlib.crc32(data):08x}"}
    del data

    def hwm_mb() -> float:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak resident set starts again from the current one
    except OSError:
        pytest.skip("cannot reset the peak resident set here")
    before = hwm_mb()
    for algorithm, digest in want.items():
        assert file_sum(str(path), algorithm) == (256 << 20, digest)
    assert hwm_mb() - before < 64  # 256 MB hashed through an 8 MB buffer
