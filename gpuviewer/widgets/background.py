"""Run a function off the UI thread and get its result back as a queued signal. Each call gets
a token, so a result that arrives after a newer request (or after the session changed) is
recognised and dropped by the panel."""
from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Signal


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
                self.failed.emit(token, str(e) or type(e).__name__)
            else:
                self.done.emit(token, result)
        threading.Thread(target=work, daemon=True, name="gpuviewer-query").start()
        return token
