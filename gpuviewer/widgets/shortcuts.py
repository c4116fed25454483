"""Keyboard help (?): the timeline's keys (handled in TimelineView.keyPressEvent) and every
shortcut the window's actions and panels define, collected from the widgets themselves so the
list cannot fall behind them."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QMessageBox

from ..model.fmt import esc

TIMELINE_KEYS = [
    ("W / S", "zoom in / out (at the cursor when it is over the timeline)"),
    ("A / D", "pan left / right"),
    ("wheel", "zoom at the cursor;  Shift+wheel scrolls lanes"),
    ("drag", "pan;  Shift+drag selects an area and summarises it"),
    ("click", "select an event (details, flow arrows to its launch or kernels)"),
    ("F", "zoom to the selection"),
    ("0 / Home", "fit the whole trace"),
    ("Shift+Home", "every profiled step, a warm-up step the view opened without included"),
    ("← / →", "previous / next event on the selected lane"),
    ("↑ / ↓", "scroll lanes"),
    ("/", "search; Enter / Shift+Enter step through matches"),
    ("M / Shift+M", "a note at the selection / a region over the area: typed in place, Enter adds, Esc cancels"),
    ("Esc", "clear the selection (a click that only brings focus back to the timeline keeps it)"),
    ("?", "this help"),
]
# what a QShortcut does, by its key (QShortcut has no text of its own)
SHORTCUT_WORDS = {
    "Ctrl+Return": "run the SQL query (SQL tab)",
    "Ctrl+Enter": "run the SQL query (SQL tab)",
    "Ctrl+C": "copy the selected rows of a table (SQL, Statistics)",
    "/": "search names on the timeline",
    "Ctrl+F": "search names on the timeline (from anywhere in the window)",
}


def _text(seq: QKeySequence) -> str:
    return seq.toString(QKeySequence.NativeText)


def collect(win) -> list[tuple[str, str]]:
    """(keys, what) for every key the window answers to."""
    rows = list(TIMELINE_KEYS)
    seen = {k for k, _ in rows}
    for a in win.findChildren(QAction):
        for seq in a.shortcuts():
            k = _text(seq)
            if k and k not in seen:
                seen.add(k)
                what = a.toolTip() if a.toolTip() and a.toolTip() != a.text().replace("&", "") else ""
                rows.append((k, (a.text().replace("&", "").rstrip("…") + (f" — {what}" if what else "")).strip()))
    for s in win.findChildren(QShortcut):
        k = _text(s.key())
        if k and k not in seen:
            seen.add(k)
            rows.append((k, SHORTCUT_WORDS.get(s.key().toString(), s.whatsThis() or "")))
    return rows


def help_html(win) -> str:
    return (
        "<table>"
        + "".join(f"<tr><td><b>{esc(k)}</b></td><td>&nbsp;&nbsp;{esc(v)}</td></tr>" for k, v in collect(win))
        + "</table>"
    )


def show(win) -> None:
    QMessageBox.information(win, "Keyboard shortcuts", help_html(win))
