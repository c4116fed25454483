"""File > Compare with… and a late rank's "compare with the others": open the other session off
the UI thread, then a Compare window beside the main one."""
from __future__ import annotations

from PySide6.QtWidgets import QFileDialog

from .background import Background


def compare_with_dialog(win) -> None:
    if win.trace is None:
        win.statusBar().showMessage("Open a session first, then compare it with another", 5000)
        return
    paths, _ = QFileDialog.getOpenFileNames(win, "Compare with (files of the other run)", "",
                                            "Traces (*.json *.json.gz *.sqlite *.pt.trace.json);;All files (*)")
    if paths:
        compare_with(win, paths)


def compare_with(win, paths: list[str]):
    """Load `paths` as session B in the background; the Compare window opens when it is read."""
    from ..session import Session
    bg = getattr(win, "_compare_bg", None)
    if bg is None:
        bg = win._compare_bg = Background(win)
        bg.done.connect(lambda _t, b: _open(win, b))
        bg.failed.connect(lambda _t, msg: win._failed(f"Cannot compare: {msg}"))
    win.statusBar().showMessage(f"Reading {len(paths)} file(s) to compare…")
    bg.run(lambda: Session.open(paths))
    return bg


def _open(win, session_b):
    from .compare_window import open_compare
    win.statusBar().clearMessage()
    win._compare_window = open_compare(win, win.session, session_b)


def compare_rank(win, rank: int):
    from .compare_window import compare_rank_with_others
    if win.session is not None:
        win._compare_window = compare_rank_with_others(win, win.session, rank)
