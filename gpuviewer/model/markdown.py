"""Markdown for every report (analyze --md, diff --md, the window's report): text from a trace
(kernel, group and file names, notes) escaped one way, so a name holding `|`, `*`, `<` or a
newline shows as written and stays in its table cell. Here in the model so that analysis, export
and the command line can all import it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .plain import line

# CommonMark's markup characters that can start something in running text: backslash, code,
# emphasis, links, HTML, entities, strikethrough, the table's cell separator, and `#` (a heading's
# text ending in " #" would lose it: taken for the heading's closing sequence)
_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~#])")
# what opens a block at the start of a line (a list item, a paragraph) when a name starts it:
# a bullet or an ordered list's marker, a setext underline; `#`, `>`, `*`, `` ` ``, `~`, `_` and
# `<` are escaped everywhere already, and a line's leading white space is gone
_BLOCK_START = re.compile(r"^([-+=]|\d{1,9}(?=[.)](?:\s|$)))")


class Code(str):
    """A table cell shown as code (a kernel's name): in backticks, not backslash-escaped."""


def _one_line(s: str, cut: int | None) -> str:
    # a cell or list item is one line: runs of white space (newlines too) become one space
    s = " ".join(str(s).split())
    if cut is not None and len(s) > cut:
        s = s[: cut - 1] + "…"
    return line(s)  # other control characters shown as \xNN


def escape_cell(text: str, cut: int | None = None) -> str:
    """Text for a table cell, a heading or within a line: one line (cut to `cut` characters with
    an ellipsis), control characters as \\xNN, markup characters backslash-escaped. Text that
    starts a line (a paragraph, a list item) goes through escape_line."""
    return _SPECIAL.sub(r"\\\1", _one_line(text, cut))


def escape_line(text: str, cut: int | None = None) -> str:
    """escape_cell's text where it starts a line (a paragraph, a list item's text): also a leading
    `-`, `+`, `=` or `1.` escaped, so "- x" or "1. x" from a trace opens no list."""
    s = escape_cell(text, cut)
    m = _BLOCK_START.match(s)
    if m is None:
        return s
    if m.group(1)[0].isdigit():  # "12." -> "12\.": the marker is the dot after the digits
        return s[: m.end()] + "\\" + s[m.end() :]
    return "\\" + s


def code_cell(text: str, cut: int | None = None) -> str:
    """Text as inline code in a table cell: one line, `|` escaped (GFM splits cells on it even in
    code), fenced with more backticks than it holds."""
    s = _one_line(text, cut).replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs) + 1 if runs else 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(value, cut: int | None = None) -> str:
    """A cell's text: Code as code, anything else escaped."""
    return code_cell(value, cut) if isinstance(value, Code) else escape_cell(str(value), cut)


def table(
    head: Sequence[str], rows: Iterable[Sequence], right: Sequence[bool] | None = None, cut: int | None = None
) -> list[str]:
    """A GFM table's lines: the header, the separator (`right`: which columns are right-aligned)
    and a line per row, every cell through cell()."""
    right = right or [False] * len(head)
    out = [
        "| " + " | ".join(cell(h, cut) for h in head) + " |",
        "|" + "|".join("---:" if r else "---" for r in right) + "|",
    ]
    out += ["| " + " | ".join(cell(c, cut) for c in r) + " |" for r in rows]
    return out
