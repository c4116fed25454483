"""A Kineto trace sampled or filtered after it was written (HTA's trace filter kept ~1% of its
host events) says so: PyTorch's profiler numbers its host events in order ("Ev Idx"), and a file
holding few of the numbers between its first and its last has lost the rest. Checked against the
numbers counted here from the raw files, on HTA's sampled traces, on a complete trace (no word),
and on the complete trace with host ops dropped (the warning appears, with their count), through
the in-memory, out-of-core and cached paths; the analysis' rank line says the host shares are of
what is left."""

from __future__ import annotations

import gzip
import json
import os

import pytest
from conftest import compat_path, raw_events, run_cli, trace_path

from gpuviewer.io.session import load

SAMPLED = compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter", "sampled_rank-0.json.gz")


def _numbers(events: list[dict]) -> list[int]:
    return [e["args"]["Ev Idx"] for e in events if isinstance(e.get("args"), dict) and "Ev Idx" in e["args"]]


def _warned(t, name: str) -> list[str]:
    return [w for w in t.warnings if w.startswith(name + ":") and "host events the profiler numbered" in w]


def test_a_sampled_trace_is_told_with_the_numbers_it_holds():
    idx = _numbers(raw_events(SAMPLED))
    lo, hi = min(idx), max(idx)
    t = load([SAMPLED], use_cache=False)
    (w,) = _warned(t, "sampled_rank-0.json.gz")
    assert f"it holds {len(idx):,} of the {hi - lo + 1:,} host events" in w
    assert f"(Ev Idx {lo:,} to {hi:,}; {len(idx) / (hi - lo + 1):.1%})" in w
    assert "sampled or filtered" in w


def test_a_complete_trace_says_nothing_and_one_with_ops_dropped_does(tmp_path):
    src = trace_path("kineto", "ddp", "ddp_rank0.json.gz")
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    t = load([src], use_cache=False)
    assert not _warned(t, "ddp_rank0.json.gz")
    assert all(pf.get("host_numbered") for pf in t.metadata["per_file"])
    # every other CPU op dropped, as a filter would: half the numbers of ops gone
    ops = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cpu_op"]
    drop = set(ops[::2][: len(ops) // 2])
    doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in drop]
    cut = tmp_path / "filtered_rank0.json"
    cut.write_text(json.dumps(doc))
    idx = _numbers(doc["traceEvents"])
    assert len(idx) < 0.9 * (max(idx) - min(idx) + 1)
    (w,) = _warned(load([str(cut)], use_cache=False), "filtered_rank0.json")
    assert f"it holds {len(idx):,} of the {max(idx) - min(idx) + 1:,} host events" in w


def test_a_stray_or_huge_number_is_no_filter(tmp_path):
    """One number far off (a complete file with one odd value) gives no warning: the numbers must
    have gaps throughout, not only at their ends; a number past any int64 neither makes the file
    unreadable nor counts (a review's findings)."""
    src = trace_path("kineto", "ddp", "ddp_rank0.json.gz")
    with gzip.open(src, "rt") as fh:
        text = fh.read()
    doc = json.loads(text)
    numbered = [e["args"] for e in doc["traceEvents"] if isinstance(e.get("args"), dict) and "Ev Idx" in e["args"]]
    numbered[len(numbered) // 2]["Ev Idx"] = 10 * len(numbered)  # one stray number
    stray = tmp_path / "stray_rank0.json"
    stray.write_text(json.dumps(doc))
    t = load([str(stray)], use_cache=False)
    assert len(t) > 0 and not _warned(t, "stray_rank0.json")
    huge = tmp_path / "huge_rank0.json"
    huge.write_text(json.dumps(doc).replace(f'"Ev Idx": {10 * len(numbered)}', '"Ev Idx": ' + "9" * 400, 1))
    assert "9" * 400 in huge.read_text()
    t2 = load([str(huge)], use_cache=False)
    assert len(t2) == len(t) and not _warned(t2, "huge_rank0.json")


@pytest.mark.parametrize("out_of_core", [False, True])
def test_the_rank_line_and_a_finding_say_its_host_shares_are_of_what_is_left(tmp_path, monkeypatch, out_of_core):
    folder = compat_path("facebookresearch__HolisticTraceAnalysis", "trace_filter")
    env = {"GPUVIEWER_CACHE_DIR": str(tmp_path / "cache")}
    if out_of_core:
        env["GPUVIEWER_OUT_OF_CORE_MB"] = "0"  # built rank by rank, as a big session is
    kept = {}
    for name in sorted(os.listdir(folder)):
        idx = _numbers(raw_events(os.path.join(folder, name)))
        kept[int(name.split("-")[1].split(".")[0])] = len(idx) / (max(idx) - min(idx) + 1)
    for _ in range(2):  # built, then from the cache
        p = run_cli("analyze", folder, "--json", env=env)
        assert p.returncode == 0, p.stderr
        ranks = {r["rank"]: r for r in json.loads(p.stdout)["ranks"]}
        assert {r: ranks[r]["host_events_kept"] for r in ranks} == {r: round(k, 4) for r, k in kept.items()}
        # and in a finding, which the window lists (its warnings sit behind a status-bar link)
        (thin,) = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "thin_data"]
        assert thin["metrics"]["host_events_kept"] == {str(r): round(k, 4) for r, k in kept.items()}
        lo, hi = (f"{min(kept.values()):.1%}", f"{max(kept.values()):.1%}")
        assert f"ranks 0 and 1: their traces hold {lo}-{hi} of the host events the profiler numbered" in thin["title"]
    p = run_cli("analyze", folder, env=env)
    for r, k in kept.items():
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"rank {r}:"))
        assert f"host (of the {k:.1%} of its host events its trace holds: sampled or filtered):" in line
    assert p.stderr.count("host events the profiler numbered") == 2


@pytest.mark.parametrize("head", [0, 2, 70])
def test_a_piece_whose_ends_hold_no_number_is_read_as_its_numbers_say(head):
    """A piece's numbers are read from the numbered events nearest its ends (a tiled or merged
    trace's pieces start with instants that hold none: 'Iteration Start' has no args); the
    answer equals the one counted here from the raw events, with `head` unnumbered instants and
    as many unnumbered ops ahead of the events and behind them."""
    from gpuviewer.io.kineto_piece import extract_piece

    evs = raw_events(trace_path("kineto", "ddp", "ddp_rank0.json.gz"))[:20_000]
    bare = [{"ph": "i", "name": "Iteration Start: PyTorch Profiler", "ts": 1.0, "pid": 1, "tid": 1, "s": "t"}] * head
    ops = [{"ph": "X", "cat": "cpu_op", "name": "untagged", "ts": 1.0, "dur": 1.0, "pid": 1, "tid": 1}] * head
    piece = bare + ops + evs + ops + bare
    got = extract_piece(json.dumps(piece).encode(), 0)["numbered"]
    host = [
        e["args"]["Ev Idx"]
        for e in evs
        if (e.get("cat") in ("cpu_op", "user_annotation", "python_function") and e.get("ph") == "X")
        or e.get("ph") in ("i", "I")
        if isinstance(e.get("args"), dict) and "Ev Idx" in e["args"]
    ]
    s = sorted(host)
    assert len(set(s)) == len(s)  # the profiler's numbers are unique in a real file
    widest = max(b - a for a, b in zip(s, s[1:])) - 1
    assert got[1:3] == (s[0], s[-1])
    # every number between the first and last is there, as the count here says, or the gap is told
    assert (got[0], got[3]) == ((len(s), widest) if widest else (s[-1] - s[0] + 1, 0))
