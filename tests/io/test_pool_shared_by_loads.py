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
