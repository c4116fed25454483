"""The Compare window's collectives table (session.compare.collectives_frame) and `gpuviewer diff`'s
(app.diff_cmd.tables) say the same verdict and size of each collective: one wording
(analysis.diff_text), read here against the significance flags of `diff --json` itself."""

import json

import pytest
from conftest import run_cli, trace_path

from gpuviewer.app.diff_cmd import COLL_HEAD, tables
from gpuviewer.session.compare import collectives_frame

STRAGGLER = trace_path("kineto", "gpu_straggler")


@pytest.fixture(scope="module")
def d():
    p = run_cli("diff", STRAGGLER, "--ranks", "1", "0", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def expected(r: dict) -> tuple[str, str]:
    changed = [p for p in ("wait", "transfer") if r[f"{p}_significant"]]
    verdict = f"{' and '.join(changed)} significant" if changed else "within noise"
    return ("all" if r["bytes"] is None else format(r["bytes"], ",")), verdict


@pytest.mark.parametrize("by_size", [False, True])
def test_window_and_command_line_say_the_same_of_each_collective(d, by_size):
    rows = d["collectives" if by_size else "collective_totals"]
    want = [expected(r) for r in rows]
    assert want and any(v != "within noise" for _, v in want)  # the straggler's wait is significant
    frame = collectives_frame(d, by_size=by_size)
    assert list(zip(frame["bytes"], frame["verdict"], strict=True)) == want
    title = "Collectives by size" if by_size else "Collectives (ms a step, every size together)"
    (cli,) = [t for t in tables(d, top=len(rows)) if t[0] == title]
    at_bytes, at_verdict = COLL_HEAD.index("bytes"), len(COLL_HEAD) - 1
    assert [(row[at_bytes], row[at_verdict]) for row in cli[3]] == want
