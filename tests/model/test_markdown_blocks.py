"""Names from a trace open no block in a Markdown report: a real Kineto trace whose longest compute
kernel and whose host op (the one a finding names) are renamed to hold `|`, `_`, `*`, backticks,
`<script>`, a newline and then `# x`, in a folder whose name ends in " #", gives `analyze --md`
and `report -o OUT.md` outputs with exactly the headings gpuviewer writes, tables as wide as their
header, no raw HTML, and the names shown as written. Rendered by markdown-it-py (CommonMark + GFM
tables), not compared with our own idea of the text."""

import gzip
import json
from html.parser import HTMLParser

import pytest
from conftest import run_cli, trace_path, write_json_gz
from markdown_it import MarkdownIt

HOSTILE = "a|b_*c*`d`<script>\n# x"
SHOWN = " ".join(HOSTILE.split())  # one line in a cell, a heading or a list item
NOTE = "# not a heading\n- nor a list"  # an annotation's text: a paragraph of the report
FOLDER = "run_*1* #"  # the analysis' title names it; a heading ending in " #" would lose it
FILE = "rank_*0*.json.gz"  # the report's title names it
SOURCE = trace_path("kineto", "dataloader_stall.json.gz")
HOST_OP = "<built-in function sleep>"  # the host op the stall's finding names


def _md() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


class _Blocks(HTMLParser):
    """Headings (level, text), tables (rows of cell texts) and every tag of the rendered HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[tuple[int, str]] = []
        self.tables: list[list[list[str]]] = []
        self.paragraphs: list[str] = []
        self.tags: set[str] = set()
        self._text: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th", "p") or (len(tag) == 2 and tag[0] == "h" and tag[1].isdigit()):
            self._text = []

    def handle_endtag(self, tag):
        if self._text is None:
            return
        text = "".join(self._text)
        if tag in ("td", "th"):
            self.tables[-1][-1].append(text)
        elif tag == "p":
            self.paragraphs.append(text)
        elif tag[0] == "h" and tag[1:].isdigit():
            self.headings.append((int(tag[1:]), text))
        else:
            return
        self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def _text_of(markdown: str) -> str:
    t = _Text()
    t.feed(_md().render(markdown))
    return "".join(t.parts)


def blocks(markdown: str) -> _Blocks:
    tokens = _md().parse(markdown)
    raw = [t.type for t in tokens if t.type == "html_block"]
    raw += [c.type for t in tokens for c in (t.children or []) if c.type == "html_inline"]
    assert raw == [], "a name was passed through as HTML"
    b = _Blocks()
    b.feed(_md().render(markdown))
    for t in b.tables:
        assert all(len(row) == len(t[0]) for row in t), t  # nothing in a name split a cell
    return b


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The trace in FOLDER, its longest compute kernel (by total time, read from the raw file)
    and HOST_OP renamed HOSTILE; returns (folder, the kernel's old name)."""
    with gzip.open(SOURCE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    total: dict[str, float] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and not e.get("name", "").startswith("nccl"):
            total[e["name"]] = total.get(e["name"], 0.0) + float(e.get("dur", 0))
    victim = max(total, key=total.__getitem__)
    renamed = {victim: 0, HOST_OP: 0}
    for e in doc["traceEvents"]:
        if e.get("name") in renamed:
            renamed[e["name"]] += 1
            e["name"] = HOSTILE
    assert all(renamed.values()), renamed
    folder = tmp_path_factory.mktemp("hostile") / FOLDER
    folder.mkdir()
    write_json_gz(folder / FILE, doc)
    return str(folder)


@pytest.fixture(scope="module")
def findings(hostile):
    """Every finding's title as `analyze --json` says it, children too."""
    p = run_cli("analyze", hostile, "--json")
    assert p.returncode == 0, p.stderr

    def walk(fs):
        for f in fs:
            yield f
            yield from walk(f.get("children") or [])

    out = list(walk(json.loads(p.stdout)["findings"]))
    assert any(HOSTILE in f["title"] for f in out), "no finding names the renamed host op"
    return out


def test_analyze_md_has_only_its_own_headings(hostile, findings):
    p = run_cli("analyze", hostile, "--md")
    assert p.returncode == 0, p.stderr
    b = blocks(p.stdout)
    h1 = [t for level, t in b.headings if level == 1]
    assert h1 == [f"gpuviewer analysis: {FOLDER}"]
    h2 = [t for level, t in b.headings if level == 2]
    assert set(h2) <= {"Findings", "Collectives", "Per rank and step (ms)"} and "Findings" in h2
    assert all(t.startswith("Rank ") for level, t in b.headings if level == 3)
    assert {level for level, _ in b.headings} <= {1, 2, 3}
    kernels = [t for t in b.tables if t[0] == ["kernel", "count", "total ms", "share"]]
    assert kernels and any(row[0] == SHOWN for t in kernels for row in t[1:])
    text = _text_of(p.stdout)
    assert [f["title"] for f in findings if " ".join(f["title"].split()) not in text] == []


def test_report_md_has_only_its_own_headings(hostile, findings, tmp_path):
    """The report adds a heading per finding image ("rule: title") and per annotation image; a
    note's text is a paragraph, shown as written (its newline as a space)."""
    ann = tmp_path / "notes.json"
    note = {"kind": "note", "text": NOTE, "start_ns": 0, "rank": 0}
    ann.write_text(json.dumps({"schema": 1, "annotations": [note]}), encoding="utf-8")
    out = tmp_path / "r.md"
    p = run_cli("report", hostile, "--annotations", str(ann), "-o", str(out))
    assert p.returncode == 0, p.stderr
    b = blocks(out.read_text(encoding="utf-8"))
    assert [t for level, t in b.headings if level == 1] == [f"gpuviewer report: {FILE}"]
    h3 = [t for level, t in b.headings if level == 3]
    shown = {f"{f['rule']}: {' '.join(f['title'].split())}" for f in findings}
    images = [t for t in h3 if not t.startswith("Rank ") and t != "note · rank 0"]
    assert images and set(images) <= shown  # each finding image's heading: its rule and title
    assert any(SHOWN in t for t in images)
    assert "note · rank 0" in h3
    assert " ".join(NOTE.split()) in b.paragraphs
    assert not any(t in ("not a heading", "x") for _, t in b.headings)
