"""File > Compare with… (files) or Compare with folder…, and a late rank's "compare with the
others": a Compare window beside the main one opens at once and reads the other run itself, off
the UI thread, with progress and Cancel (compare_window)."""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog


def compare_with_dialog(win) -> None:
    if win.trace is None:
        win.statusBar().showMessage("Open a session first, then compare it with another", 5000)
        return
    paths, _ = QFileDialog.getOpenFileNames(
        win,
        "Compare with (files of the other run)",
        "",
        "Traces (*.json *.json.gz *.gz *.sqlite *.nsys-rep);;All files (*)",
    )
    if paths:
        compare_with(win, paths)


def compare_with_folder_dialog(win) -> None:
    """The other run as a folder (one file per rank, found by content, as File > Open folder)."""
    if win.trace is None:
        win.statusBar().showMessage("Open a session first, then compare it with another", 5000)
        return
    d = QFileDialog.getExistingDirectory(win, "Compare with (the other run's folder)")
    if d:
        compare_with(win, [d])


def compare_with(win, paths: list[str]):
    """Compare the window's session with the run in `paths` (files or folders): the Compare
    window opens now and reads them with its progress bar."""
    from .compare_window import open_compare

    win._compare_window = open_compare(win, win.session, [str(p) for p in paths])
    return win._compare_window


def compare_rank(win, rank: int):
    from .compare_window import compare_rank_with_others

    if win.session is not None:
        win._compare_window = compare_rank_with_others(win, win.session, rank)
