"""The Kineto pieces' typed decode (one struct type per phase, flows without fields) reads every
event as the loose decode (one struct for all, plain args) does: the same phases, the same
fields, the same arguments the store keeps. Pieces that the typed decode refuses (a phase that
is not Chrome's, a missing or non-text "ph") are read loosely and give the same answer."""

import gzip
import json
import os

import msgspec
import pytest

from gpuviewer.io.chrome_events import _as_typed, _loose, decode_events
from tests.conftest import SAMPLES

FIELDS = ("ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "s", "bp")


def _events(path: str) -> list:
    with gzip.open(path, "rb") as f:
        return json.load(f)["traceEvents"]


def _as_loose(buf: bytes) -> list:
    return [_as_typed(e) for e in _loose.decode(buf)]


def _same(a, b) -> None:
    flow = a.ph in ("s", "t", "f")
    assert a.ph == b.ph
    if flow:
        return  # flows are counted only: their typed struct has no fields
    for f in FIELDS:
        assert getattr(a, f) == getattr(b, f), f
    if a.args is None or b.args is None:
        assert a.args is b.args is None
        return
    # every argument the typed struct reads (X events read fewer than the others); the kept
    # ones as JSON values (the loose path re-encodes them)
    assert {"correlation", "in_dims", "pg_name"} <= set(a.args.__struct_fields__)
    for f in a.args.__struct_fields__:
        va, vb = getattr(a.args, f), getattr(b.args, f)
        assert _value(va) == _value(vb), f


def _value(v):
    return msgspec.json.decode(v) if isinstance(v, msgspec.Raw) else v


@pytest.mark.parametrize("rank", [0, 1])
def test_typed_decode_reads_every_event_of_a_real_trace_as_the_loose_one(rank):
    evs = _events(os.path.join(SAMPLES, "ddp", f"ddp_rank{rank}.json.gz"))
    buf = json.dumps(evs).encode()
    typed, _ = decode_events(buf)
    loose = _as_loose(buf)
    assert len(typed) == len(loose) == len(evs)
    phases = {e.ph for e in typed}
    assert {"X", "s", "f"} <= phases  # kernels, ops and flow arrows are all there
    for a, b in zip(typed, loose):
        _same(a, b)


@pytest.mark.parametrize(
    "odd",
    [
        {"ph": "Q", "name": "not a Chrome phase", "ts": 5},
        {"name": "no phase", "ts": 5},
        {"ph": 7, "name": "a number as phase", "ts": 5},
    ],
)
def test_a_piece_with_an_odd_phase_is_read_loosely_with_the_others_unchanged(odd):
    evs = _events(os.path.join(SAMPLES, "ddp", "ddp_rank0.json.gz"))[:200] + [odd]
    buf = json.dumps(evs).encode()
    got, _ = decode_events(buf)
    want = _as_loose(buf)
    assert len(got) == len(want) == 201
    for a, b in zip(got, want):
        _same(a, b)
    assert got[-1].name == odd["name"] and got[-1].ph == odd.get("ph", "")
