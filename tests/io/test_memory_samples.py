"""PyTorch's '[memory]' instant events become the GPU memory curve. The reader takes them as
columns (io/kineto_memory.py) unless one of a piece's is odd, then one at a time (kineto_piece.
_others, which mends and counts odd events); both must give the curve read here from the raw
events: a CUDA device's samples (Device Type 1, or no type and a device id), in time order, those
with an unreadable time counted and dropped. A real trace (memory_pressure) and its events with
odd ones written in."""

import gzip
import json
import os

import numpy as np
import pytest
from conftest import trace_path

from gpuviewer.io.session import load

SRC = trace_path("kineto", "memory_pressure.json.gz")


def _expected(events: list) -> dict:
    """device -> (allocated, reserved) in time order, from the raw events."""
    out: dict = {}
    for e in events:
        a = e.get("args")
        if e.get("ph") not in ("i", "I") or e.get("name") != "[memory]" or not isinstance(a, dict):
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not abs(ts) <= 3e15:
            continue  # no time, or one past 2065 as epoch µs (the reader's bound)
        dt, dev = a.get("Device Type"), a.get("Device Id")
        if not (dt == 1 or (dt is None and dev not in (None, -1))):
            continue
        out.setdefault(int(dev), []).append((ts, a.get("Total Allocated"), a.get("Total Reserved")))
    return {d: sorted(rows, key=lambda r: r[0]) for d, rows in out.items()}


def _series(rows: list, j: int) -> np.ndarray:
    """One byte count in time order; a value that is not a number is no sample."""
    return np.array([r[j] for r in rows if type(r[j]) in (int, float)], float)


def _curves(path: str) -> tuple[dict, list[str]]:
    t = load([path])
    got: dict = {}
    for c in t.counters:
        if c.name in ("allocated", "reserved"):
            got.setdefault(c.device, {})[c.name] = c.v
    return got, list(t.warnings)


def _variant(tmp_path, change) -> tuple[str, list]:
    with gzip.open(SRC, "rt") as f:
        doc = json.load(f)
    change(doc["traceEvents"])
    p = os.path.join(tmp_path, "t.json")
    with open(p, "w") as f:
        json.dump(doc, f)
    return p, doc["traceEvents"]


def _check(path: str, events: list) -> list[str]:
    want = _expected(events)
    got, warnings = _curves(path)
    assert want and set(got) == set(want)
    for dev, rows in want.items():
        assert np.array_equal(got[dev]["allocated"], _series(rows, 1))
        assert np.array_equal(got[dev]["reserved"], _series(rows, 2))
    return warnings


def test_the_curve_is_the_raw_samples():
    with gzip.open(SRC, "rt") as f:
        events = json.load(f)["traceEvents"]
    assert sum(1 for e in events if e.get("name") == "[memory]") > 100
    _check(SRC, events)


@pytest.mark.parametrize("odd", ["pid_list", "bad_ts", "bool_ts", "list_ts", "list_bytes", "cpu_samples"])
def test_odd_samples_give_the_same_curve(tmp_path, odd):
    def change(events):
        mem = [e for e in events if e.get("name") == "[memory]"]
        if odd == "pid_list":  # the whole piece goes the general way, mended and counted
            mem[3]["pid"] = [1, 2]
        elif odd == "bad_ts":  # dropped and counted
            mem[5]["ts"] = "soon"
            mem[6]["ts"] = 1e300
        elif odd == "bool_ts":  # true is no time (read as 1 µs, it sorted first)
            mem[5]["ts"] = True
            mem[6]["ts"] = False
        elif odd == "list_ts":  # every sample's time a list of one length: was a 2-D array
            for e in mem:
                e["ts"] = [1, 2]
        elif odd == "list_bytes":  # no sample of that series, the rest kept
            for e in mem[:50]:
                e["args"]["Total Allocated"] = [1, 2]
        else:  # samples of the host's memory are not the GPU's curve
            for e in mem[:10]:
                e["args"]["Device Type"] = 0

    path, events = _variant(tmp_path, change)
    if odd == "list_ts":  # no sample has a time: no curve at all, and the file still opens
        assert _expected(events) == {} and _curves(path)[0] == {}
        warnings = _curves(path)[1]
    else:
        warnings = _check(path, events)
    said = {
        "pid_list": "t.json: 1 events with a list, object, true/false or out-of-range number as pid",
        "bad_ts": "t.json: 2 events with an unreadable ts (missing, not a number, or out of range) skipped",
        "bool_ts": "t.json: 2 events with an unreadable ts (missing, not a number, or out of range) skipped",
        "list_ts": None,  # checked below
        "list_bytes": None,
        "cpu_samples": None,
    }[odd]
    mine = [w for w in warnings if w.startswith("t.json: ")]
    if odd == "list_ts":
        n = sum(1 for e in events if e.get("name") == "[memory]")
        assert len(mine) == 1 and mine[0].startswith(f"t.json: {n} events with an unreadable ts"), mine
    elif said is None:
        assert mine == [], mine
    else:
        assert len(mine) == 1 and mine[0].startswith(said), mine


def test_a_file_of_memory_samples_without_a_device_id_opens(tmp_path):
    """A CUDA sample naming no device draws no curve, but its time is the file's: a file of such
    samples alone is not 'empty'."""
    p = os.path.join(tmp_path, "m.json")
    ev = [
        {
            "ph": "i",
            "name": "[memory]",
            "ts": 10 + i,
            "pid": 1,
            "tid": 1,
            "args": {"Device Type": 1, "Total Allocated": i},
        }
        for i in range(3)
    ]
    with open(p, "w") as f:
        json.dump({"traceEvents": ev}, f)
    t = load([p])
    assert [c for c in t.counters if c.name == "allocated"] == []
