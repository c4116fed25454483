"""One Markdown writer (model/markdown.py) for every report: a name holding `|`, a backtick, a
newline, `<` or `*` renders as one table cell showing what was written, in `analyze --md`,
`diff --md` and `report -o OUT.md`. Rendered by a real CommonMark + GFM-tables parser
(markdown-it-py), not compared with our own expectations of the text."""

import gzip
import json
import os
import shutil
from html.parser import HTMLParser

import pytest
from conftest import SAMPLES, run_cli, write_json_gz
from markdown_it import MarkdownIt

from gpuviewer.model.markdown import Code, table

HOSTILE = "a|b `c` <i>x</i>\n*y* & [z](u) _w_ ~v~ \\ end"
SHOWN = " ".join(HOSTILE.split())  # a cell is one line: the newline shows as a space


class _Tables(HTMLParser):
    """Each <table>'s rows as lists of cell texts (entities decoded, tags dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables_of(markdown: str) -> list[list[list[str]]]:
    p = _Tables()
    p.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return p.tables


def tables_with(markdown: str, want: str) -> list[list[list[str]]]:
    """The tables with a cell showing `want` (alone or within it), each checked: every row as
    wide as its header, so nothing in a name split a cell."""
    found = [t for t in tables_of(markdown) if any(want in c for row in t for c in row)]
    assert found, f"no table cell shows {want!r}"
    for t in found:
        assert all(len(row) == len(t[0]) for row in t), t
    return found


def headed(tables: list[list[list[str]]], first: str) -> list[list[str]]:
    (t,) = [t for t in tables if t[0][0] == first]
    return t


def test_table_keeps_each_cell_whole():
    (rows,) = tables_with("\n".join(table(["text", "code"], [[HOSTILE, Code(HOSTILE)]])), SHOWN)
    assert rows[1] == [SHOWN, SHOWN]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """samples/ddp with its longest kernel and its process group renamed HOSTILE (both ranks)."""
    d = tmp_path_factory.mktemp("hostile") / "ddp"
    d.mkdir()
    victim = None
    for name in sorted(os.listdir(os.path.join(SAMPLES, "ddp"))):
        with gzip.open(os.path.join(SAMPLES, "ddp", name), "rt", encoding="utf-8") as f:
            doc = json.load(f)
        events = doc["traceEvents"]
        if victim is None:
            total: dict[str, float] = {}
            for e in events:
                if e.get("cat") == "kernel" and not e.get("name", "").startswith("nccl"):
                    total[e["name"]] = total.get(e["name"], 0.0) + float(e.get("dur", 0))
            victim = max(total, key=total.__getitem__)
        renamed = 0
        for e in events:
            if e.get("name") == victim:
                e["name"] = HOSTILE
                renamed += 1
            args = e.get("args") or {}
            if "Process Group Description" in args:
                args["Process Group Description"] = HOSTILE
        assert renamed
        write_json_gz(d / name, doc)
    return str(d)


@pytest.fixture(scope="module")
def analyze_md(hostile):
    p = run_cli("analyze", hostile, "--md")
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_analyze_md_kernel_and_group_cells(analyze_md):
    found = tables_with(analyze_md, SHOWN)
    kernels = [t for t in found if t[0] == ["kernel", "count", "total ms", "share"]]
    assert kernels and all(any(row[0] == SHOWN for row in t[1:]) for t in kernels)  # each rank's top kernels
    groups = headed(found, "group")
    assert all(row[0].endswith(f"({SHOWN})") for row in groups[1:]), groups


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def test_analyze_md_findings_read_as_written(hostile, analyze_md):
    """Each finding's sentence, as `analyze --json` says it, is in the rendered Markdown word for
    word: a name like `<built-in function sleep>` is not taken for a tag, `__init__` not for bold."""
    p = run_cli("analyze", hostile, "--json")
    assert p.returncode == 0, p.stderr

    def titles(fs):
        for f in fs:
            yield f["title"]
            yield from titles(f.get("children") or [])

    want = [" ".join(t.split()) for t in titles(json.loads(p.stdout)["findings"])]
    assert want
    shown = _Text()
    shown.feed(MarkdownIt("commonmark").enable("table").render(analyze_md))
    text = "".join(shown.parts)
    assert [t for t in want if t not in text] == []


def test_diff_md_cells(hostile):
    p = run_cli("diff", os.path.join(SAMPLES, "ddp"), hostile, "--md")
    assert p.returncode == 0, p.stderr
    found = tables_with(p.stdout, SHOWN)
    assert any(SHOWN in row for t in found for row in t)  # the kernel's name: a whole cell


def test_report_md_annotation_cells(hostile, tmp_path):
    """Annotations past the report's images are listed in a table: a note's text in one cell."""
    from gpuviewer.export.report import MAX_ANNOTATION_IMAGES

    folder = tmp_path / "t"
    shutil.copytree(hostile, folder)
    notes = [
        {"kind": "note", "text": f"note {k}", "start_ns": 1000 * k, "rank": 0} for k in range(MAX_ANNOTATION_IMAGES)
    ]
    notes.append({"kind": "note", "text": HOSTILE, "start_ns": 10**6, "rank": 0})  # the first without an image
    ann = tmp_path / "notes.json"
    ann.write_text(json.dumps({"schema": 1, "annotations": notes}), encoding="utf-8")
    out = tmp_path / "r.md"
    p = run_cli("report", str(folder), "--annotations", str(ann), "-o", str(out))
    assert p.returncode == 0, p.stderr
    rows = headed(tables_with(out.read_text(encoding="utf-8"), SHOWN), "kind")
    assert rows[0] == ["kind", "rank", "at", "length", "text"]
    assert [row[-1] for row in rows[1:]] == [SHOWN]


@pytest.mark.parametrize("text", ["# x", "- x", "+ x", "* x", "1. x", "12) x", "> x", "===", "---", "```x", "a #"])
def test_a_name_starting_a_line_opens_no_block(text):
    """Where a name starts a list item or a paragraph (escape_line), or ends a heading (escape_cell),
    it renders as the text it is: no heading, list, quote, rule or code block of its own."""
    from gpuviewer.model.markdown import escape_cell, escape_line

    md = MarkdownIt("commonmark")
    item = md.parse(f"- {escape_line(text)}")
    assert [t.type for t in item if t.nesting == 1] == ["bullet_list_open", "list_item_open", "paragraph_open"]
    assert [t.content for t in item if t.type == "inline"] == [escape_line(text)]
    shown = _Text()
    shown.feed(md.render(f"- {escape_line(text)}\n\n{escape_line(text)}\n\n## {escape_cell(text)}\n"))
    assert "".join(shown.parts).split("\n") == ["", text, "", text, text, ""]
