"""Two loads at once in two threads of one process (a notebook) share the decode workers
(io/piece_reader.py): the first to finish must not shut the pool down under the other."""

import gzip
import os
import threading

from conftest import SAMPLES

from gpuviewer.io.kineto import _PARALLEL_MIN_BYTES
from gpuviewer.io.session import load


def _stored(tmp_path, name: str) -> str:
    """A sample gzipped at level 0: big enough to be decoded in the pool, in several pieces."""
    with gzip.open(os.path.join(SAMPLES, "dataloader_stall.json.gz")) as f:
        raw = f.read()
    p = tmp_path / name
    p.write_bytes(gzip.compress(raw, compresslevel=0))
    assert p.stat().st_size >= _PARALLEL_MIN_BYTES
    return str(p)


def test_a_load_finishing_first_leaves_the_pool_to_the_other(tmp_path):
    first, second = _stored(tmp_path, "a.json.gz"), _stored(tmp_path, "b.json.gz")
    alone = load([first], use_cache=False)
    first_done = threading.Event()
    got: dict = {}

    def held(frac, _msg):
        # the second load stops at its first progress report (its pool in use) until the first
        # load has ended, then reads the rest of its file through that pool
        if 0 < frac and not first_done.is_set():
            assert first_done.wait(120), "the first load did not end"

    def second_load():
        try:
            got["second"] = load([second], use_cache=False, progress=held)
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            got["error"] = e

    t = threading.Thread(target=second_load)
    t.start()
    try:
        got["first"] = load([first], use_cache=False)
    finally:
        first_done.set()
        t.join(300)
    assert not t.is_alive()
    assert "error" not in got, repr(got.get("error"))
    for k in ("first", "second"):
        assert len(got[k]) == len(alone) > 0, k
        assert (got[k].columns["start"] == alone.columns["start"]).all(), k


def test_a_load_after_a_worker_was_killed_gets_a_new_pool(tmp_path):
    """A decode worker killed (the kernel's out-of-memory killer) breaks the pool: the load using
    it fails, saying to open the file again. While another load keeps the pool in use, opening it
    again must work, not fail on the same broken pool until the other load ends."""
    import signal
    from concurrent.futures.process import BrokenProcessPool

    from procs import children_of, ended

    from gpuviewer.io import piece_reader

    path = _stored(tmp_path, "a.json.gz")
    alone = load([path], use_cache=False)
    before = children_of(os.getpid())
    with piece_reader.using_pool():  # another load under way (a notebook's other thread)
        load([path], use_cache=False)
        pool = piece_reader.worker_pool()  # the one both loads use
        workers = children_of(os.getpid()) - before
        assert workers, "the load decoded in no worker process"
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        assert ended(victim)
        for _ in range(100):  # until the pool has seen its worker go (an answer can come first)
            try:
                pool.submit(int).result()
            except BrokenProcessPool:
                break
        else:
            raise AssertionError("the pool never noticed its killed worker")
        again = load([path], use_cache=False)
    assert len(again) == len(alone) > 0
    assert (again.columns["start"] == alone.columns["start"]).all()
