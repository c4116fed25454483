"""One cache for every session of a file (issue 31, item 4): a rank cached by a `--dask` worker
(or by opening the file alone, as the window does) is not parsed again when a session holding it
(the folder) is opened: its entry is joined (io/cache_join.py). Seen from outside: `info --json`
says how many files came from their own entries and how many were parsed, and the ranks' entries
are untouched (same inode and mtime of their column files). The joined session is the session
read whole: `info` and `analyze` print the same as with --no-cache. A folder opened with nothing
cached reads its files one by one and leaves each file's entry too. Entries are found by the
files' identity (a link, a relative path, `..`: the same entry; a copy or a rewrite in place: read
again), and a session built out of core leaves pointers its files' entries are cut from."""

from __future__ import annotations

import gzip
import json
import os
import shutil

from conftest import ROOT, run_cli, write_json_gz

DDP = os.path.join(ROOT, "samples", "ddp")


def _entries(cache: str) -> dict[str, tuple[int, int]]:
    """Each finished entry -> (inode, mtime) of its start column."""
    out = {}
    for e in sorted(os.listdir(cache)):
        if e.startswith("."):
            continue
        st = os.stat(os.path.join(cache, e, "start.npy"))
        out[e] = (st.st_ino, st.st_mtime_ns)
    return out


def _without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def _json(*args: str, env: dict | None = None) -> dict:
    r = run_cli(*args, env=env)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_a_rank_cached_by_dask_is_not_parsed_again_by_info_of_the_folder(tmp_path):
    cache = str(tmp_path / "cache")
    env = {"GPUVIEWER_CACHE_DIR": cache}
    _json("analyze", DDP, "--dask", "local:1", "--json", env=env)  # a real scheduler and worker
    ranks = _entries(cache)
    assert len(ranks) == 2  # one entry per file, written by the worker

    info = _json("info", DDP, "--json", env=env)
    assert info["file_caches"] == {"reused": 2, "read": 0}
    after = _entries(cache)
    assert {k: after[k] for k in ranks} == ranks  # neither rank was written again
    assert len(after) == 3  # and the folder's session has its entry now
    alias = tmp_path / "alias"  # rank 1 again, through a link of another name in another folder
    alias.mkdir()
    (alias / "r1.json.gz").symlink_to(os.path.join(DDP, "ddp_rank1.json.gz"))
    one = _json("info", str(alias), "--json", env=env)
    assert one["files"] == [str(alias / "r1.json.gz")] and [r["rank"] for r in one["ranks"]] == [1]
    assert _entries(cache) == after  # the worker's entry: nothing parsed, nothing written

    whole = _json("info", DDP, "--json", "--no-cache")
    assert _without(info, "load_seconds", "file_caches") == _without(whole, "load_seconds")
    # the folder's session, opened again, is its own entry; its analysis is the whole read's
    joined = _json("analyze", DDP, "--json", env=env)
    assert joined == _json("analyze", DDP, "--json", "--no-cache")


def test_a_file_opened_alone_is_reused_and_the_others_are_read(tmp_path):
    cache = str(tmp_path / "cache")
    env = {"GPUVIEWER_CACHE_DIR": cache}
    folder = tmp_path / "run"
    shutil.copytree(DDP, folder)
    os.chmod(folder / "ddp_rank0.json.gz", 0o444)
    _json("info", str(folder / "ddp_rank1.json.gz"), "--json", env=env)  # as the window opens one file
    one = _entries(cache)
    info = _json("info", str(folder), "--json", env=env)
    assert info["file_caches"] == {"reused": 1, "read": 1}
    after = _entries(cache)
    assert {k: after[k] for k in one} == one
    assert len(after) == 3  # rank 0 got an entry of its own as it was read, then the session
    assert sorted(os.listdir(folder)) == ["ddp_rank0.json.gz", "ddp_rank1.json.gz"]  # nothing beside the input
    whole = _json("info", str(folder), "--json", "--no-cache")
    assert _without(info, "load_seconds", "file_caches") == _without(whole, "load_seconds")


def _ranks_in(folder, placed: dict[int, str]) -> None:
    """Rank r of a job written to placed[r] (a sub-path of folder): samples/ddp's two files,
    each written again with its distributedInfo.rank set to r."""
    for r, rel in placed.items():
        with gzip.open(os.path.join(DDP, f"ddp_rank{r % 2}.json.gz"), "rb") as f:
            doc = json.load(f)
        doc["distributedInfo"]["rank"] = r
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_gz(path, doc)


def test_a_folder_opened_cold_leaves_each_files_entry_for_later_sessions(tmp_path):
    cache = str(tmp_path / "cache")
    env = {"GPUVIEWER_CACHE_DIR": cache}
    run = tmp_path / "run"
    _ranks_in(run, {0: "rank0.json.gz", 1: "rank1.json.gz", 2: "more/rank2.json.gz", 3: "more/rank3.json.gz"})

    info = _json("info", str(run), "--json", env=env)  # nothing cached yet
    assert info["file_caches"] == {"reused": 0, "read": 4}
    first = _entries(cache)
    assert len(first) == 5  # each file's entry and the folder's
    whole = _json("info", str(run), "--json", "--no-cache")
    assert _without(info, "load_seconds", "file_caches") == _without(whole, "load_seconds")

    # one file of the folder alone (as the window opens it): its entry, nothing written
    one = _json("info", str(run / "rank0.json.gz"), "--json", env=env)
    assert _entries(cache) == first
    assert [r["rank"] for r in one["ranks"]] == [0]

    # another folder holding two of the files: joined from their entries, none parsed again
    sub = _json("info", str(run / "more"), "--json", env=env)
    assert sub["file_caches"] == {"reused": 2, "read": 0}
    after = _entries(cache)
    assert {k: after[k] for k in first} == first
    assert len(after) == 6  # only the new session's entry was written
    whole_sub = _json("info", str(run / "more"), "--json", "--no-cache")
    assert _without(sub, "load_seconds", "file_caches") == _without(whole_sub, "load_seconds")


def _info_as_read(path: str, env: dict) -> dict:
    """`info --json` of path through the cache, checked equal to reading path with no cache
    (the paths it prints, warnings included, are the ones asked for)."""
    got = _json("info", path, "--json", env=env)
    whole = _json("info", path, "--json", "--no-cache")
    assert _without(got, "load_seconds", "file_caches") == _without(whole, "load_seconds")
    return got


def test_links_and_other_spellings_of_the_same_files_find_their_entries(tmp_path):
    cache = str(tmp_path / "cache")
    env = {"GPUVIEWER_CACHE_DIR": cache}
    run = tmp_path / "run"
    # two files naming rank 0: the second is shown as rank 1 with a warning that names it
    _ranks_in(run, {0: "a.json.gz", 1: "b.json.gz"})
    with gzip.open(run / "b.json.gz", "rt") as f:
        doc = json.load(f)
    doc["distributedInfo"]["rank"] = 0
    write_json_gz(run / "b.json.gz", doc)
    first = _json("info", str(run), "--json", env=env)
    assert first["file_caches"] == {"reused": 0, "read": 2}
    assert any(w.startswith("b.json.gz: rank 0 appears twice") for w in first["warnings"])
    entries = _entries(cache)
    assert len(entries) == 3  # each file's and the folder's

    (tmp_path / "link").symlink_to(run, target_is_directory=True)
    renamed = tmp_path / "renamed"  # links of other names to the same files, in the same order
    renamed.mkdir()
    (renamed / "x0.json.gz").symlink_to(run / "a.json.gz")
    (renamed / "x1.json.gz").symlink_to(run / "b.json.gz")
    (tmp_path / "one.json.gz").symlink_to(run / "b.json.gz")
    spellings = {
        str(tmp_path / "link"): tmp_path / "link",
        str(tmp_path / "run" / ".." / "link"): tmp_path / "link",
        os.path.relpath(run, ROOT): run,  # the CLI runs in ROOT
    }
    for p, folder in spellings.items():
        got = _json("info", p, "--json", env=env)
        assert "file_caches" not in got, p  # the session's own entry, not even joined
        assert got["files"] == [str(folder / "a.json.gz"), str(folder / "b.json.gz")], p
        assert _without(got, "files", "load_seconds") == _without(first, "files", "load_seconds", "file_caches")
        assert _entries(cache) == entries, p  # nothing parsed, nothing written
    # named otherwise: what it prints (files, the warning naming one) is what reading it says
    said = _info_as_read(str(renamed), env)
    assert _entries(cache) == entries
    assert any(w.startswith("x1.json.gz: rank 0 appears twice") for w in said["warnings"])

    one = _info_as_read(str(tmp_path / "one.json.gz"), env)  # a link to one file: its own entry
    assert one["files"] == [str(tmp_path / "one.json.gz")]
    assert _entries(cache) == entries

    copy = tmp_path / "copy"  # a copy is another file (another inode): read again, its own entries
    shutil.copytree(run, copy)
    assert _json("info", str(copy), "--json", env=env)["file_caches"] == {"reused": 0, "read": 2}
    assert len(_entries(cache)) == 6


def test_a_file_rewritten_in_place_to_its_old_size_and_mtime_is_read_again(tmp_path, monkeypatch):
    """Same path, inode, size and mtime (set back), new content: only its ctime tells, and the
    key holds it, so the old entry is never served."""
    import re

    import numpy as np

    from gpuviewer.io.session import load

    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "rank0.json"
    with gzip.open(os.path.join(DDP, "ddp_rank0.json.gz"), "rb") as f:
        p.write_bytes(f.read())
    before = load([str(p)])
    assert not before.metadata.get("from_cache")
    assert load([str(p)]).metadata.get("from_cache")  # the entry is there and used
    st = os.stat(p)
    raw = p.read_bytes()
    # every event's duration with a leading 1 gets a leading 2: same length, other content
    new = re.sub(rb'("dur": ?)1', rb"\g<1>2", raw)
    assert new != raw and len(new) == len(raw)
    with open(p, "r+b") as f:
        f.write(new)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.stat(p)
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)

    after = load([str(p)])
    assert not after.metadata.get("from_cache")
    fresh = load([str(p)], use_cache=False)
    assert np.array_equal(after.columns["dur"], fresh.columns["dur"])
    assert not np.array_equal(after.columns["dur"], before.columns["dur"])


def _same_session(t, read) -> None:
    """t is the session `read` is (read from the files with no cache), part for part; the kept
    arguments aside (an out-of-core entry keeps none: io/out_of_core.py)."""
    import numpy as np

    assert len(t) == len(read) > 0
    for k in read.columns:
        assert t.columns[k].dtype == read.columns[k].dtype and np.array_equal(t.columns[k], read.columns[k]), k
    for k in read.instants:
        assert np.array_equal(t.instants[k], read.instants[k]), k
    for a, b in zip(t.flows, read.flows, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(t.lane_offsets, read.lane_offsets)
    assert t.names == read.names  # the same ids: names in the order reading interns them
    assert (t.lanes, t.ranks, t.steps, t.sources, t.warnings) == (
        read.lanes,
        read.ranks,
        read.steps,
        read.sources,
        read.warnings,
    )
    assert [(c.rank, c.device, c.name, list(c.t), list(c.v)) for c in t.counters] == [
        (c.rank, c.device, c.name, list(c.t), list(c.v)) for c in read.counters
    ]
    skip = ("from_cache", "unread", "file_caches")
    assert [(k, v) for k, v in t.metadata.items() if k not in skip] == [
        (k, v) for k, v in read.metadata.items() if k not in skip
    ]


def test_an_out_of_core_session_leaves_each_file_an_entry_cut_from_its_own(tmp_path, monkeypatch):
    """Built out of core, a session writes no copy of each file's columns but a pointer under the
    file's key; opening the file alone, or a folder holding some of its files, cuts their entries
    out of the session's: nothing is read, and each is what reading the file alone gives."""
    from gpuviewer.io.cache import cache_root, dir_size, key_for
    from gpuviewer.io.session import load

    monkeypatch.setenv("GPUVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUVIEWER_OUT_OF_CORE_MB", "0")  # any size is built out of core
    # ranks read here one by one: a pool writes the same pointers, byte for byte (test_ooc_parallel)
    monkeypatch.setenv("GPUVIEWER_OOC_WORKERS", "1")
    run = tmp_path / "run"
    _ranks_in(run, {0: "rank0.json.gz", 1: "more/rank1.json.gz", 2: "more/rank2.json.gz", 3: "rank3.json.gz"})
    session = load([str(run)])
    assert len(session.ranks) == 4 and "file_caches" not in session.metadata  # not joined: out of core
    root = cache_root()
    entries = sorted(e for e in os.listdir(root) if not e.startswith("."))
    assert len(entries) == 5
    sizes = {e: dir_size(os.path.join(root, e)) for e in entries}
    big = max(sizes, key=lambda e: sizes[e])
    for e in entries:
        if e != big:  # a pointer: no columns
            assert sorted(os.listdir(os.path.join(root, e))) == ["meta.json", "part_names.npy", "sums.json"]
    del session

    said: list[str] = []
    one = load([str(run / "more" / "rank1.json.gz")], progress=lambda _f, msg: said.append(msg))
    assert said == ["opened from cache"]  # cut, not read
    read_said: list[str] = []
    read = load([str(run / "more" / "rank1.json.gz")], use_cache=False, progress=lambda _f, m: read_said.append(m))
    assert any(m.startswith("reading") for m in read_said)  # what reading it says
    _same_session(one, read)

    sub = load([str(run / "more")])  # rank 1's entry (cut above) and rank 2's (cut now), joined
    assert sub.metadata["file_caches"] == {"reused": 2, "read": 0}
    _same_session(sub, load([str(run / "more")], use_cache=False))

    # a file rewritten since the build finds no pointer (another identity): it is read
    _ranks_in(run, {7: "rank0.json.gz"})
    said.clear()
    again = load([str(run / "rank0.json.gz")], progress=lambda _f, msg: said.append(msg))
    assert any(m.startswith("reading") for m in said)
    assert [r.rank for r in again.ranks] == [7]

    # the session's entry gone (evicted, cleared): its pointers lead nowhere, and are removed
    shutil.rmtree(os.path.join(root, big))
    said.clear()
    last = load([str(run / "rank3.json.gz")], progress=lambda _f, msg: said.append(msg))
    assert any(m.startswith("reading") for m in said)
    _same_session(last, load([str(run / "rank3.json.gz")], use_cache=False))
    mine = os.path.join(root, key_for([str(run / "rank3.json.gz")]))
    assert os.path.exists(os.path.join(mine, "start.npy")) and not os.path.exists(os.path.join(mine, "part_names.npy"))
