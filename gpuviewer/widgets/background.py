"""Run a function off the UI thread and get its result back as a queued signal. Each call gets
a token, so a result that arrives after a newer request (or after the session changed) is
recognised and dropped by the panel."""

from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, QObject, QTimer, Signal


class Background(QObject):
    done = Signal(int, object)
    failed = Signal(int, str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.token = 0

    def run(self, fn) -> int:
        self.token += 1
        token = self.token

        def work():
            try:
                result = fn()
            except Exception as e:  # noqa: BLE001 - shown in the panel, never a crash
                _tell(self.failed, token, str(e) or type(e).__name__)
            else:
                _tell(self.done, token, result)

        threading.Thread(target=work, daemon=True, name="gpuviewer-query").start()
        return token


def _tell(signal, *args) -> None:
    try:
        signal.emit(*args)
    except RuntimeError:  # "Signal source has been deleted": the window closed while fn ran (a
        pass  # screenshot command exits once it has its picture); no one is left to tell


def after_first_paint(widget, fn, at_most_ms: int = 2000) -> None:
    """Call fn once `widget` has painted (the event loop's next turn after its paint event), or
    after at_most_ms if it does not paint (hidden): work on other threads that would compete with
    that frame for the interpreter (imports, the analysis) starts after it."""
    state = {"done": False}

    def fire() -> None:
        if not state["done"]:
            state["done"] = True
            widget.removeEventFilter(watch)
            fn()

    class _Watch(QObject):
        def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
            if ev.type() == QEvent.Paint and not state["done"]:
                QTimer.singleShot(0, watch, fire)  # once this paint is done
            return False

    watch = _Watch(widget)
    widget.installEventFilter(watch)
    # the timers belong to `watch` (a child of the widget): a window closed before they fire
    # takes them with it, so fn never runs on deleted widgets
    QTimer.singleShot(at_most_ms, watch, fire)
