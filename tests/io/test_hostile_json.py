"""Hostile and broken Chrome/Kineto JSON (issue 18): decompression bombs, NaN / Infinity / bad
UTF-8, numbers out of range, values of the wrong type, odd layouts, damaged gzip.

Each case runs the real CLI in a child (tests/hostile.py; `info` and `analyze` of a file that
opens share one, tests/cli_batch.py) and checks what a user must get: the right exit code, one
line naming the file when it is refused, no traceback and no Python-internal wording, the input
untouched with nothing created beside it, and (bombs) a bounded peak RSS.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import struct
import zlib

import pytest
from cli_batch import run_cli_batch
from conftest import trace_path
from hostile import assert_clean, assert_refused, folder_state, run

MiB = 1 << 20
# Bombs inflate to 1-2 GiB of JSON; opening or refusing one must peak below this (the reader
# holds at most max_event_bytes = 64 MiB of one value, plus a few pieces).
RSS_BOUND_MB = 1024
# Python's own words that must never reach a user
_INTERNAL = re.compile(
    r"unhashable|could not convert|too large to convert|object has no attribute|"
    r"NoneType|Traceback|Error:|C long|invalid literal",
    re.IGNORECASE,
)


# -- helpers ---------------------------------------------------------------------------------
def _events(n: int = 100, base: float = 0.0) -> list[dict]:
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": base + i * 10.0,
            "dur": 5.0,
            "args": {"v": i},
        }
        for i in range(n)
    ]


def _doc(events, **meta) -> bytes:
    """Written as Python's json.dumps writes it (NaN and Infinity included)."""
    return json.dumps({"traceEvents": events, **meta}).encode()


def _put(tmp_path, name: str, data: bytes) -> str:
    """Each input in a folder of its own, so 'nothing created beside it' is checkable."""
    d = tmp_path / name.split(".")[0]
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_bytes(data)
    return str(p)


def _cli(cmd: str, path: str, env: dict | None = None, fork: bool | None = None):
    folder = os.path.dirname(path)
    before = folder_state(folder)
    r = run(cmd, path, "--json", "--no-cache", env=env, fork=fork)
    assert folder_state(folder) == before, "the input changed, or files appeared beside it"
    assert not _INTERNAL.search(r.stderr), r.stderr[-2000:]
    return r


def _opened(path: str, env: dict | None = None) -> dict:
    """`info` opens it cleanly (nothing on stderr) and `analyze` runs on it: both in one child
    (tests/cli_batch.py; a child's start, the interpreter and imports, was most of each run on
    these small files), the folder checked around it."""
    folder = os.path.dirname(path)
    before = folder_state(folder)
    r, a = run_cli_batch([[cmd, path, "--json", "--no-cache"] for cmd in ("info", "analyze")], env=env)
    assert folder_state(folder) == before, "the input changed, or files appeared beside it"
    for x in (r, a):
        assert not _INTERNAL.search(x.stderr), x.stderr[-2000:]
        assert_clean(x)
    assert r.stderr.strip() == "", r.stderr.splitlines()[:5]
    out = json.loads(r.stdout)
    assert not _INTERNAL.search(a.stdout)
    return out


def _warned(out: dict, needle: str) -> str:
    hits = [w for w in out["warnings"] if needle.lower() in w.lower()]
    assert hits, (needle, out["warnings"])
    return hits[0]


def _refused(path: str, needle: str, env: dict | None = None) -> str:
    r = _cli("info", path, env)
    line = assert_refused(r, path, needle)
    assert not _INTERNAL.search(line), line
    return line


def _stdlib_count(data: bytes) -> int:
    """Events the store keeps (X, B, i/I except [memory]), counted with the standard library,
    which reads NaN and Infinity; bad UTF-8 is replaced as a browser would."""
    doc = json.loads(data.decode("utf-8", "replace"))
    evs = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sum(1 for e in evs if e.get("ph") in ("X", "B") or e.get("ph") in ("i", "I") and e.get("name") != "[memory]")


def _gz_bytes(head: bytes, fill: bytes, n_fill: int, tail: bytes) -> bytes:
    """One gzip member of head + n_fill bytes of `fill` + tail, built from 64 MiB blocks without
    holding the inflated document. Each block is deflated after a full flush, which starts the
    compressor afresh, so every whole block deflates to the same bytes: one is compressed (twice,
    to check that) and repeated, instead of deflating gigabytes here (about 17 s for the bombs)."""
    block = fill * (64 * MiB // len(fill))
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    parts = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", c.compress(head), c.flush(zlib.Z_FULL_FLUSH)]
    crc = zlib.crc32(head)
    whole, rest = divmod(n_fill, len(block))
    if whole:
        once = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
        if whole > 1:
            assert c.compress(block) + c.flush(zlib.Z_FULL_FLUSH) == once
        parts.append(once * whole)
        for _ in range(whole):
            crc = zlib.crc32(block, crc)
    end = block[:rest] + tail
    crc = zlib.crc32(end, crc)
    parts += [c.compress(end), c.flush(), struct.pack("<II", crc, (len(head) + n_fill + len(tail)) & 0xFFFFFFFF)]
    return b"".join(parts)


def _gz_stream(path: str, head: bytes, fill: bytes, n_fill: int, tail: bytes) -> None:
    """A file holding the gzip of head + n_fill bytes of `fill` + tail (_gz_bytes)."""
    with open(path, "wb") as f:
        f.write(_gz_bytes(head, fill, n_fill, tail))


def _gz_member(fill: bytes, n_fill: int) -> bytes:
    """One gzip member of n_fill bytes of `fill`, to concatenate with others (multi-member gzip
    is valid, and lets several bombs share one compression)."""
    return _gz_bytes(b"", fill, n_fill, b"")


def _ev(i: int) -> bytes:
    return json.dumps(
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10.0, "dur": 5.0, "args": {"v": i}}
    ).encode()


# -- 1. decompression bombs ------------------------------------------------------------------
@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    out = {}
    # '[' and 2 GiB of spaces: ~2 MB of gzip
    p = d / "spaces" / "spaces.json.gz"
    p.parent.mkdir()
    _gz_stream(str(p), b"[", b" ", 2 << 30, b"")
    out["spaces"] = str(p)
    # one event whose args hold a 1 GiB string: ~1 MB of gzip
    p = d / "string" / "string.json.gz"
    p.parent.mkdir()
    _gz_stream(
        str(p),
        b'{"traceEvents": [{"ph": "X", "name": "big", "pid": 1, "tid": 1, "ts": 20, "dur": 1, "args": {"s": "',
        b"x",
        1 << 30,
        b'"}}]}',
    )
    out["string"] = str(p)
    out["x_member"] = _gz_member(b"x", 1 << 30)
    out["ws_member"] = _gz_member(b" \n", 1 << 30)
    for k in ("spaces", "string"):
        assert os.path.getsize(out[k]) < 4 * MiB
    return out


def _assemble(tmp_path, name: str, *parts: bytes) -> str:
    """A multi-member gzip: small members compressed here, big ones from the bombs fixture."""
    return _put(tmp_path, name, b"".join(p if p[:2] == b"\x1f\x8b" else gzip.compress(p) for p in parts))


def test_bomb_of_whitespace_is_refused_in_bounded_memory(bombs):
    r = _cli("info", bombs["spaces"], fork=False)
    assert_refused(r, bombs["spaces"], "ends before its first complete event")
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb


def test_bomb_stops_at_the_inflated_limit_with_a_clear_message(bombs):
    env = {"GPUVIEWER_MAX_INFLATED_BYTES": str(256 * MiB)}
    r = _cli("info", bombs["spaces"], env, fork=False)
    line = assert_refused(r, bombs["spaces"], "GPUVIEWER_MAX_INFLATED_BYTES")
    assert "256.0 MB" in line and "bomb" in line
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb


def test_bomb_event_alone_is_refused_naming_the_limit(bombs):
    r = _cli("info", bombs["string"], fork=False)
    line = assert_refused(r, bombs["string"], "GPUVIEWER_MAX_EVENT_BYTES")
    assert "larger than 64 MB" in line
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb


def test_bomb_event_among_others_is_skipped_with_a_warning(bombs, tmp_path):
    p = _assemble(
        tmp_path,
        "among.json.gz",
        b'{"traceEvents": [' + _ev(0) + b', {"ph": "X", "name": "big", "pid": 1, "tid": 1, '
        b'"ts": 15, "dur": 1, "args": {"s": "',
        bombs["x_member"],
        b'"}}, ' + _ev(2) + b", " + _ev(3) + b"]}",
    )
    r = _cli("info", p, fork=False)
    assert_clean(r)
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb
    out = json.loads(r.stdout)
    assert out["events"] == 3
    _warned(out, "skipped 1 event(s) larger than 64 MB")


def test_bomb_after_a_damaged_piece_is_walked_exactly_in_bounded_memory(bombs, tmp_path):
    """A damaged event in the first piece sends the whole document through the exact walk
    (the old whole-document fallback read everything into memory); the bomb after it must not
    reach memory there either."""
    evs = [_ev(i) for i in range(30_000)]  # ~3.5 MB: several pieces
    evs[100] = evs[100].replace(b'"ph": "X",', b'"ph": "X"', 1)  # a missing comma
    p = _assemble(
        tmp_path,
        "exact.json.gz",
        b'{"traceEvents": [' + b", ".join(evs) + b', {"ph": "X", "name": "big", "pid": 1, '
        b'"tid": 1, "ts": 1, "dur": 1, "args": {"s": "',
        bombs["x_member"],
        b'"}}]}',
    )
    r = _cli("info", p, fork=False)
    assert_clean(r)
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb
    out = json.loads(r.stdout)
    assert out["events"] == 30_000 - 1
    _warned(out, "skipped 1 damaged event")
    _warned(out, "larger than 64 MB")
    assert not any("ends early" in w for w in out["warnings"])


def test_bomb_of_whitespace_between_events_is_dropped(bombs, tmp_path):
    p = _assemble(tmp_path, "gap.json.gz", b'{"traceEvents": [' + _ev(0) + b",", bombs["ws_member"], _ev(1) + b"]}")
    r = _cli("info", p, fork=False)
    assert_clean(r)
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb
    out = json.loads(r.stdout)
    assert out["events"] == 2 and out["warnings"] == []


def test_bomb_of_whitespace_in_the_top_level_object_is_refused(bombs, tmp_path):
    """'{' and 1 GiB of whitespace: no traceEvents key within reach of the fast path, so the
    exact walk reads it, dropping the whitespace as it goes."""
    p = _assemble(tmp_path, "object.json.gz", b"{", bombs["ws_member"])
    r = _cli("info", p, fork=False)
    assert_refused(r, p, "ends before its first complete event")
    assert r.rss_mb < RSS_BOUND_MB, r.rss_mb


def test_long_name_is_cut_with_a_warning(tmp_path):
    evs = _events()
    evs[5]["name"] = "n" * (3 * MiB)
    out = _opened(_put(tmp_path, "long.json", _doc(evs)))
    assert out["events"] == 100
    _warned(out, "GPUVIEWER_MAX_STRING_BYTES")


# -- 2. NaN, Infinity, bad UTF-8: read, never called truncated ---------------------------------
_TOKENS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _inject_small(kind: str) -> bytes:
    evs = _events()
    if kind in _TOKENS:
        evs[50]["args"]["v"] = _TOKENS[kind]
        data = _doc(evs)
        assert kind.encode() in data
        return data
    evs[50]["args" if kind == "utf8-args" else "name"] = "BAD" if kind == "utf8-name" else {"v": "BAD"}
    return _doc(evs).replace(b"BAD", b"ab\xff\xfecd")


@pytest.mark.parametrize("kind", ["NaN", "Infinity", "-Infinity", "utf8-args", "utf8-name"])
def test_nan_infinity_and_bad_utf8_keep_every_event_small(tmp_path, kind):
    data = _inject_small(kind)
    p = _put(tmp_path, "small.json", data)
    out = _opened(p)
    assert out["events"] == _stdlib_count(data) == 100
    assert out["warnings"] == []  # in particular, never "ends early"
    from gpuviewer.io.args import event_args
    from gpuviewer.io.session import load

    t = load([p], use_cache=False)
    names = [t.name_of(i) for i in range(len(t))]
    i = names.index("ab\ufffd\ufffdcd" if kind == "utf8-name" else "op50")
    a = event_args(t, i)
    if kind in _TOKENS:
        v = a["v"]
        assert math.isnan(v) if kind == "NaN" else v == _TOKENS[kind]
    elif kind == "utf8-args":
        assert a["v"] == "ab\ufffd\ufffdcd"


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


@pytest.fixture(scope="module")
def big_text():
    """A real Kineto file's events in many pieces: launch_bound_big (1M events, 288 MB of JSON)
    cut, at event boundaries, to its first 8 MB (annotations, CPU ops), 16 MB from its middle
    (runtime calls, kernels, flows) and its last 64 KB (the metadata events and closing keys);
    and where the 'External id' value nearest its middle lies, to overwrite. About 12 pieces of
    2 MB (25 MB of the 288): the token lands in a middle piece, as it did in the whole file."""
    with gzip.open(trace_path("kineto", "launch_bound_big.json.gz"), "rb") as f:
        data = f.read()

    def at(pos: int) -> int:  # just after the '}' of the first event boundary from pos
        return _BOUNDARY.search(data, pos).start() + 1

    mid = len(data) // 2
    cut = data[: at(8 * MiB)] + data[at(mid - 8 * MiB) : at(mid + 8 * MiB)] + data[at(len(data) - 64 * 1024) :]
    m = re.compile(rb'"External id": (\d+)').search(cut, len(cut) // 2)
    return cut, m.start(1), m.end(1)


@pytest.mark.parametrize("kind", ["NaN", "Infinity", "-Infinity", "utf8-args"])
def test_nan_infinity_and_bad_utf8_keep_every_event_big(tmp_path, big_text, kind):
    data, a, b = big_text
    token = b'"ab\xff\xfecd"' if kind == "utf8-args" else kind.encode()
    data = data[:a] + token + data[b:]
    # gzip's stored blocks keep the file over 4 MiB, where the reader decodes its pieces in its
    # worker pool (io/kineto.py), as it does the whole file; deflated, the cut is under 2 MB
    p = _put(tmp_path, "big.json.gz", gzip.compress(data, 0))
    assert os.path.getsize(p) >= 4 * MiB
    out = _opened(p)
    assert out["events"] == _stdlib_count(data) > 60_000
    assert out["warnings"] == []


def test_really_cut_file_is_the_only_one_said_to_end_early(tmp_path):
    data = _doc(_events())
    out = _opened(_put(tmp_path, "cut.json", data[: len(data) * 2 // 3]))
    assert 0 < out["events"] < 100
    _warned(out, "ends early")


def test_damaged_event_is_skipped_not_called_truncated(tmp_path):
    data = _doc(_events()).replace(b'"name": "op50", ', b'"name": "op50" ', 1)
    out = _opened(_put(tmp_path, "damaged.json", data))
    assert out["events"] == 99
    _warned(out, "skipped 1 damaged event")
    assert not any("ends early" in w for w in out["warnings"])


@pytest.mark.parametrize("form", ["object", "array"])
@pytest.mark.parametrize(
    "damage",
    [
        (b'"name": "op30"', b'"name": op30"'),
        (b'{"v": 30}}', b'{"v": 30}'),
        (b'"cat": "cpu_op", "name": "op30"', b'"cat": "cpu_op", "name": "op30]"]'),
    ],
    ids=["quote", "brace", "bracket"],
)
def test_a_quote_or_bracket_out_of_place_loses_one_event_not_the_rest(tmp_path, form, damage):
    """One byte out of place makes an event swallow the rest of the file; the reader must
    notice (the end of the file is intact), skip that event and read on."""
    data = (_doc(_events()) if form == "object" else json.dumps(_events()).encode()).replace(*damage, 1)
    out = _opened(_put(tmp_path, "quote.json", data))
    assert out["events"] == 99
    _warned(out, "skipped 1 damaged event")
    assert not any("ends early" in w or "cut off" in w for w in out["warnings"])


def test_missing_commas_and_stray_tokens_between_events(tmp_path):
    evs = [_ev(i) for i in range(10)]
    data = b"[" + b", ".join(evs[:3]) + b" " + evs[3] + b", " + evs[4] + b" garbage, " + b", ".join(evs[5:]) + b"]"
    out = _opened(_put(tmp_path, "commas.json", data))
    assert out["events"] == 10
    _warned(out, "1 entries of traceEvents that are not events")
    assert not any("ends early" in w for w in out["warnings"])


def test_begin_end_only_trace_opens(tmp_path):
    evs = [{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 10}, {"ph": "E", "pid": 1, "tid": 1, "ts": 20}]
    out = _opened(_put(tmp_path, "be.json", _doc(evs)))
    assert out["events"] == 1 and out["ranks"][0]["end_ns"] - out["ranks"][0]["start_ns"] == 10_000


def test_trailing_garbage_is_ignored_with_a_warning(tmp_path):
    out = _opened(_put(tmp_path, "trailing.json", _doc(_events()) + b" garbage {}"))
    assert out["events"] == 100
    _warned(out, "ignored what follows the end of the JSON document")
    assert not any("ends early" in w for w in out["warnings"])


# -- 3. numbers ------------------------------------------------------------------------------
def test_step_number_past_int64_is_not_a_step(tmp_path):
    evs = _events()
    evs[3].update(name="ProfilerStep#9223372036854775808", cat="user_annotation")
    evs[4].update(name="ProfilerStep#" + "9" * 5000, cat="user_annotation")
    evs[5].update(name="ProfilerStep#7", cat="user_annotation")
    out = _opened(_put(tmp_path, "step.json", _doc(evs)))
    assert out["ranks"][0]["steps"] == [7]
    _warned(out, "2 ProfilerStep annotation name(s) with a step number too large")


@pytest.mark.parametrize("bad", ["abc", None, [1], {"a": 1}, float("nan"), float("inf"), 1e300, "1e999"], ids=repr)
def test_unreadable_ts_is_skipped_not_time_zero(tmp_path, bad):
    evs = _events(base=1.7e15)  # epoch µs: a ts read as 0 would stretch the span to 54 years
    if bad is None:
        del evs[3]["ts"]
    else:
        evs[3]["ts"] = bad
    out = _opened(_put(tmp_path, "ts.json", _doc(evs)))
    r = out["ranks"][0]
    assert out["events"] == 99
    assert r["end_ns"] - r["start_ns"] == 995_000
    assert r["start_ns"] == 1_700_000_000_000_000_000
    _warned(out, "1 events with an unreadable ts")


def test_ts_and_dur_as_numeric_strings_are_read(tmp_path):
    evs = _events()
    evs[0]["ts"], evs[0]["dur"] = "12.5", "3"
    out = _opened(_put(tmp_path, "strnum.json", _doc(evs)))
    assert out["events"] == 100 and out["warnings"] == []
    assert out["ranks"][0]["start_ns"] == 10_000  # op1 at 10 µs; op0 now at 12.5 µs


@pytest.mark.parametrize("bad", [-5, float("nan"), float("-inf"), "abc", 1e300, [1]], ids=repr)
def test_negative_or_unreadable_duration_is_skipped(tmp_path, bad):
    evs = _events()
    evs[3]["dur"] = bad
    out = _opened(_put(tmp_path, "dur.json", _doc(evs)))
    assert out["events"] == 99
    _warned(out, "1 events with a negative or unreadable duration skipped")


@pytest.mark.parametrize("base", [1e30, 10**30, -1, "abc", True, [1], float("inf")], ids=repr)
def test_absurd_base_time_is_ignored_with_a_warning(tmp_path, base):
    out = _opened(_put(tmp_path, "base.json", _doc(_events(), baseTimeNanoseconds=base)))
    assert out["events"] == 100
    assert out["ranks"][0]["start_ns"] == 0
    _warned(out, "baseTimeNanoseconds")


def test_plausible_base_time_is_used(tmp_path):
    out = _opened(_put(tmp_path, "base.json", _doc(_events(), baseTimeNanoseconds=1_700_000_000_000_000_000)))
    assert out["ranks"][0]["start_ns"] == 1_700_000_000_000_000_000 and out["warnings"] == []


# -- 4. wrong types anywhere, and what the messages say ----------------------------------------
_ODD = [[1], {"a": 1}, True, 10**30, -(10**30), 1.5, 1e300, float("nan"), "", None]


@pytest.mark.parametrize("field", ["name", "cat", "pid", "tid", "id", "s", "args", "ph"])
def test_wrong_types_in_any_field_never_raise(tmp_path, field):
    """Each odd value in an event of its own, on complete events and on an instant, a
    begin/end pair and a metadata event (which take other paths): nothing raises, events are
    kept (an unknown phase is not an event), and odd names, categories and ids are counted."""
    evs = _events()
    evs[40].update(ph="i", s="t")
    evs[41].update(ph="B")
    evs[42].update(ph="E")
    evs[43].update(ph="M", name="thread_name", args={"name": ["not text"]})
    for k, v in enumerate(_ODD):
        evs[10 + k][field] = v
    if field != "ph":
        for e in evs[40:44]:
            e[field] = _ODD[0]
    out = _opened(_put(tmp_path, f"{field}.json", _doc(evs)))
    # 96 complete events, an instant and one slice from the begin/end pair
    assert out["events"] == (98 - len(_ODD) if field == "ph" else 98)
    if field in ("name", "cat", "pid", "tid"):
        _warned(out, "shown as text")


def test_wrong_types_in_counters_memory_and_metadata_never_raise(tmp_path):
    evs = _events() + [
        {"ph": "C", "name": "c", "pid": 1, "ts": "x", "args": {"a": 1}},
        {"ph": "C", "name": ["c"], "pid": [1], "ts": 3, "args": {"a": 1e300, "b": "z", "c": [1], "d": 10**400}},
        {
            "ph": "i",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": "q",
            "args": {"Device Type": 1, "Device Id": [0], "Total Allocated": "x"},
        },
        {
            "ph": "i",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 4,
            "args": {"Device Type": 1, "Device Id": 10**30, "Total Allocated": {"a": 1}},
        },
        {"ph": "b", "name": "a", "cat": ["x"], "id": {"a": 1}, "pid": 1, "tid": 1, "ts": 7},
        {"ph": "e", "name": "a", "cat": ["x"], "id": {"a": 1}, "pid": 1, "tid": 1, "ts": 8},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 10**30,
            "tid": [1],
            "ts": 9,
            "dur": 1,
            "args": {"correlation": 10**30, "device": [1], "stream": "x"},
        },
        5,
        "text",
        None,
        [1, 2],
    ]
    meta = {
        "distributedInfo": {"rank": 10**30, "world_size": [2]},
        "host_name": ["x"],
        "deviceProperties": [{"id": 10**30}, {"id": 0, "name": ["x"], "mem": 10**40}, "x"],
    }
    out = _opened(_put(tmp_path, "mixed.json", _doc(evs, **meta)))
    assert out["events"] == 100 + 1 + 1  # the async pair and the odd kernel
    _warned(out, "not events")
    _warned(out, "unreadable ts")


def test_utf8_bom_opens(tmp_path):
    bom = b"\xef\xbb\xbf"
    for name, data in (
        ("bom.json", bom + _doc(_events())),
        ("bomarray.json", bom + json.dumps(_events()).encode()),
        ("bomgz.json.gz", gzip.compress(bom + b"\n " + _doc(_events()))),
    ):
        out = _opened(_put(tmp_path, name, data))
        assert out["events"] == 100 and out["warnings"] == []


def test_gzip_cut_in_the_middle_keeps_what_decompresses_and_says_so(tmp_path):
    data = gzip.compress(_doc(_events(5000)))
    out = _opened(_put(tmp_path, "cut.json.gz", data[: len(data) // 2]))
    assert 0 < out["events"] < 5000
    w = _warned(out, "compressed stream is cut short")
    assert "kept the complete events" in w
    assert len(out["warnings"]) == 1


def test_gzip_damaged_in_the_middle_keeps_what_decompresses_and_says_so(tmp_path):
    data = open(trace_path("kineto", "dataloader_stall.json.gz"), "rb").read()
    k = len(data) // 2
    out = _opened(_put(tmp_path, "damaged.json.gz", data[:k] + bytes(300) + data[k + 300 :]))
    assert out["events"] > 1000
    _warned(out, "compressed data is damaged")


@pytest.mark.parametrize(
    "layout,n,warns",
    [
        (b'{"traceEvents": [], "x": 1, "traceEvents": %s}', 100, False),
        (b'{"traceEvents": %s, "traceEvents": []}', 100, False),
        (b'{"traceEvents": %s, "traceEvents": %s}', 100, True),
    ],
)
def test_two_trace_events_keys_read_the_one_with_events(tmp_path, layout, n, warns):
    ten = json.dumps(_events(10)).encode()
    full = json.dumps(_events()).encode()
    data = layout % ((full,) if layout.count(b"%s") == 1 else (ten, full))
    out = _opened(_put(tmp_path, "dup.json", data))
    assert out["events"] == n
    assert any("more than one traceEvents" in w for w in out["warnings"]) == warns


def test_two_trace_events_keys_big(tmp_path):
    """Big enough that the fast path cuts pieces across the second key, then walks exactly."""
    first = json.dumps(_events(20_000)).encode()
    second = json.dumps(_events(30_000, base=5.0)).encode()
    out = _opened(_put(tmp_path, "dup.json", b'{"traceEvents": ' + first + b', "traceEvents": ' + second + b"}"))
    assert out["events"] == 30_000
    _warned(out, "more than one traceEvents")


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"{garbage", "not valid JSON"),
        (b'{"traceEvents": "abc"}', "not a list of events"),
        (b'{"traceEvents": {"a": 1}}', "not a list of events"),
        (b"[1, 2, 3]", "not events"),
        (b'{"traceEvents": []}', "no trace events"),
        (b'{"other": 1}', "not a trace"),
        (b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "not events"),
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": "x"}]}', "unreadable ts"),
    ],
    ids=["garbage", "events-text", "events-object", "scalars", "empty", "other", "deep", "bad-ts"],
)
def test_refusals_name_the_file_and_say_what_is_wrong(tmp_path, content, needle):
    _refused(_put(tmp_path, "bad.json", content), needle)
