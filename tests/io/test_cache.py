import os
import shutil

import numpy as np
from conftest import trace_path

from gpuviewer.io import cache
from gpuviewer.io.session import load
from gpuviewer.model.summary import summarize


def _copy(tmp_path, name="dataloader_stall.json.gz"):
    p = tmp_path / name
    shutil.copy(trace_path("kineto", name), p)
    return str(p)


def test_second_open_is_memory_mapped_and_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setattr(cache, "MAP_FROM_BYTES", 1)  # every column mapped, as a big session's
    p = _copy(tmp_path)
    fresh = load([p], use_cache=False)
    first = load([p])
    again = load([p])
    assert again.metadata.get("from_cache")
    assert isinstance(again.columns["start"], np.memmap)
    for k in fresh.columns:
        assert np.array_equal(fresh.columns[k], again.columns[k]), k
    assert summarize(fresh) == summarize(again) == summarize(first)
    assert [(s.rank, s.step, s.start, s.end) for s in fresh.steps] == [
        (s.rank, s.step, s.start, s.end) for s in again.steps
    ]
    assert len(again.counters) == len(fresh.counters)


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_small_columns_are_read_and_hold_no_descriptor(tmp_path, monkeypatch):
    """A mapped array keeps a descriptor open while it lives: 40 small sessions open at once
    (a notebook) would hold 1,000+ of them, past the limit many systems set. Small columns are read
    instead; big ones stay mapped, one descriptor each."""
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    p = _copy(tmp_path)
    fresh = load([p])
    base = _descriptors()
    kept = [load([p]) for _ in range(5)]
    assert all(t.metadata.get("from_cache") for t in kept)
    # none more (a decode pool left by an earlier open may close its pipes meanwhile: fewer)
    assert _descriptors() <= base
    for k, a in kept[0].columns.items():
        assert not isinstance(a, np.memmap) and not a.flags.writeable, k
        assert np.array_equal(a, fresh.columns[k]), k
    monkeypatch.setattr(cache, "MAP_FROM_BYTES", 1)
    mapped = load([p])
    assert _descriptors() > base
    assert all(isinstance(a, np.memmap) for a in mapped.columns.values())
    del mapped


def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    p = _copy(tmp_path)
    load([p])
    d = os.path.join(cache.cache_root(), cache.key_for([p]))
    with open(os.path.join(d, "start.npy"), "r+b") as f:
        f.truncate(100)
    assert cache.load([p]) is None  # not trusted
    t = load([p])
    assert not t.metadata.get("from_cache")
    assert load([p]).metadata.get("from_cache")


def test_changed_file_is_not_served_from_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    p = _copy(tmp_path)
    load([p])
    k1 = cache.key_for([p])
    st = os.stat(p)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert cache.key_for([p]) != k1
    assert cache.load([p]) is None


def test_no_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    p = _copy(tmp_path)
    load([p], use_cache=False)
    assert not os.path.exists(tmp_path / "c") or not os.listdir(tmp_path / "c")


def test_unwritable_cache_dir_only_costs_speed(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(ro / "sub"))
    p = _copy(tmp_path)
    t = load([p])
    assert t.n_events > 0


def test_eviction_removes_least_recently_used(tmp_path, monkeypatch):
    import time

    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "c"))
    a = _copy(tmp_path, "dataloader_stall.json.gz")
    b_dir = tmp_path / "b"
    b_dir.mkdir()
    b = str(b_dir / "single.json.gz")
    shutil.copy(trace_path("kineto", "single_gpt_train.json.gz"), b)
    load([a])
    time.sleep(0.05)
    load([b])
    time.sleep(0.05)
    load([a])  # a used last
    da = os.path.join(cache.cache_root(), cache.key_for([a]))
    db = os.path.join(cache.cache_root(), cache.key_for([b]))
    size_a = cache.dir_size(da)
    removed = cache.evict(max_bytes=size_a + 1)
    assert removed == [db]
    assert os.path.exists(da) and not os.path.exists(db)
    assert load([b]).n_events > 0  # simply rebuilt
