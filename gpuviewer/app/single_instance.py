"""One running window per user: a second start hands its files to the first through a
QLocalServer (a Unix socket / named pipe) and exits."""

from __future__ import annotations

import getpass
import json

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket


def server_name() -> str:
    import os

    if os.environ.get("GPUVIEWER_INSTANCE_NAME"):  # separate instances (tests, several sessions)
        return os.environ["GPUVIEWER_INSTANCE_NAME"]
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001
        user = "user"
    return f"gpuviewer-{user}"


def send_to_running(paths: list[str], name: str | None = None, timeout_ms: int = 5000) -> bool:
    """True when a running instance took the files. The wait only matters when a window is
    listening: a busy one (reading a big trace) may answer late, and a second window opened
    beside it would be worse than a few seconds' wait; with none listening, the connect fails at once."""
    sock = QLocalSocket()
    sock.connectToServer(name or server_name())
    if not sock.waitForConnected(timeout_ms):
        return False
    sock.write(json.dumps({"open": paths}).encode() + b"\n")
    sock.flush()  # (waitForBytesWritten answers False once flush() has written everything)
    # wait for the acknowledgement, so the sender exits only once the window has the files
    ok = sock.waitForReadyRead(timeout_ms) and sock.readAll().data().startswith(b"ok")
    sock.disconnectFromServer()
    return bool(ok)


class InstanceServer(QObject):
    openRequested = Signal(list)

    def __init__(self, name: str | None = None, parent=None) -> None:
        super().__init__(parent)
        self.name = name or server_name()
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.UserAccessOption)
        if not self.server.listen(self.name):
            QLocalServer.removeServer(self.name)  # a stale socket from a crashed run
            self.server.listen(self.name)
        self.server.newConnection.connect(self._accept)

    def listening(self) -> bool:
        return self.server.isListening()

    def _accept(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            sock.readyRead.connect(lambda s=sock: self._read(s))
            if sock.bytesAvailable():  # the message may already be here
                self._read(sock)

    def _read(self, sock: QLocalSocket) -> None:
        if not sock.canReadLine():
            return  # wait for the whole line
        data = sock.readLine().data()
        try:
            msg = json.loads(data.decode("utf-8", "replace").strip().splitlines()[0])
            paths = [p for p in msg.get("open", []) if isinstance(p, str)]
        except (ValueError, IndexError, AttributeError):
            paths = []
        sock.write(b"ok\n" if paths else b"error\n")
        sock.flush()
        if paths:
            self.openRequested.emit(paths)
