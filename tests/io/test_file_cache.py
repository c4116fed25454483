"""One cache for every session of a file (issue 31, item 4): a rank cached by a `--dask` worker
(or by opening the file alone, as the window does) is not parsed again when a session holding it
(the folder) is opened: its entry is joined (io/cache_join.py). Seen from outside: `info --json`
says how many files came from their own entries and how many were parsed, and the ranks' entries
are untouched (same inode and mtime of their column files). The joined session is the session
read whole: `info` and `analyze` print the same as with --no-cache. A folder opened with nothing
cached reads its files one by one and leaves each file's entry too."""

from __future__ import annotations

import json
import os
import shutil

from conftest import ROOT, run_cli

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
    import gzip

    for r, rel in placed.items():
        with gzip.open(os.path.join(DDP, f"ddp_rank{r % 2}.json.gz"), "rb") as f:
            doc = json.load(f)
        doc["distributedInfo"]["rank"] = r
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)


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
