import gzip
import hashlib
import json
import os
import shutil

import pytest
from conftest import run_cli, trace_path


def _sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


@pytest.fixture(scope="module")
def small_json():
    with gzip.open(trace_path("kineto", "dataloader_stall.json.gz"), "rb") as f:
        return f.read()


def _info(path):
    before = _sha(path)
    p = run_cli("info", str(path), "--json", "--no-cache")
    assert "Traceback" not in p.stderr
    assert _sha(path) == before, "input file was modified"
    return p


def _salvaged(path) -> dict:
    """`info` keeps the complete events before the cut and says so."""
    r = _info(path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["events"] > 1000
    assert out["warnings"]
    return out


def test_json_cut_mid_event_is_salvaged(tmp_path, small_json):
    p = tmp_path / "cut.json"
    p.write_bytes(small_json[: len(small_json) // 2])
    out = _salvaged(p)
    assert any("ends early" in w for w in out["warnings"])


def test_gzip_cut_mid_stream_is_salvaged(tmp_path):
    data = open(trace_path("kineto", "dataloader_stall.json.gz"), "rb").read()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    _salvaged(p)


def test_missing_closing_bracket_array_form(tmp_path):
    events = [{"ph": "X", "name": f"e{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(10)]
    text = "[" + ",\n".join(json.dumps(e) for e in events) + ",\n"
    p = tmp_path / "array.json"
    p.write_text(text)
    r = _info(p)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["events"] == 10


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"", "empty"),
        (os.urandom(4096), "not"),
        (b'{"hello": [1, 2, 3]}', "not a trace"),
        (b'{"traceEvents": [{"ph": "X", "name": ', "ends before its first complete event"),
        # mtime=0 and named ids: the gzip header's time stamp in a test id made xdist's two workers collect different tests
        (gzip.compress(b"", mtime=0), "empty"),
    ],
    ids=["empty", "random-bytes", "json-not-a-trace", "cut-json", "empty-gzip"],
)
def test_bad_inputs_exit_2_with_one_clear_line(tmp_path, content, needle):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    r = _info(p)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert str(p) in lines[0] or "bad.json" in lines[0]
    assert needle in lines[0]


def test_folder_without_traces(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    r = run_cli("info", str(tmp_path), "--no-cache")
    assert r.returncode == 2
    assert "no trace files" in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_file():
    r = run_cli("info", "/nonexistent/x.json")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_debug_shows_traceback(tmp_path):
    p = tmp_path / "bad.json"
    p.write_bytes(b"garbage")
    r = run_cli("info", str(p), "--debug", "--no-cache")
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_read_only_input_opens(tmp_path):
    src = trace_path("kineto", "dataloader_stall.json.gz")
    p = tmp_path / "ro.json.gz"
    shutil.copy(src, p)
    os.chmod(p, 0o444)
    r = _info(p)
    assert r.returncode == 0
