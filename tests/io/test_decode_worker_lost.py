"""A decode worker of the in-memory Kineto reader killed mid-read (out of memory, a kill -9)
gives a one-line message that names the file and says a process stopped, not that the file is
damaged: the file is whole. A real file big enough for the worker pool, its workers really killed."""

import json
import os
import signal

import pytest

from gpuviewer.io import piece_reader
from gpuviewer.io.errors import TraceError
from gpuviewer.io.session import load


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    # plain JSON over the reader's 4 MB threshold for its worker pool: several pieces
    evs = [
        {"ph": "X", "cat": "kernel", "name": f"k{i % 50}", "pid": 0, "tid": 7, "ts": i, "dur": 0.5,
         "args": {"correlation": i, "device": 0, "stream": 7}}
        for i in range(60_000)
    ]  # fmt: skip
    path = tmp_path_factory.mktemp("big") / "worker_lost.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    assert os.path.getsize(path) > 4 << 20
    return str(path)


def test_a_killed_decode_worker_is_said_as_such_and_names_the_file(big):
    killed: list[int] = []

    def cancelled() -> bool:
        pool = piece_reader._POOL
        if not killed and pool is not None:
            for pid in list(pool._processes):  # every worker: no piece can be decoded after
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        return False

    with pytest.raises(TraceError) as e:
        load([big], use_cache=False, cancelled=cancelled)
    assert killed, "the reader never started its worker pool"
    msg = str(e.value)
    assert "\n" not in msg and big in msg
    assert "stopped" in msg and "damaged" not in msg, msg
    # the next read starts a fresh pool and reads the whole file
    assert load([big], use_cache=False).n_events == 60_000
