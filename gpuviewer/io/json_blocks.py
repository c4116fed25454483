"""A trace file's bytes in blocks, plain or gzip, decompressed in a background thread beside the
decoder (io/chrome_json.py), within the inflated-size limit."""

from __future__ import annotations

import os
import queue
import threading

from .errors import TraceError
from .limits import max_inflated_bytes
from .streams import GZIP_MAGIC, Inflater


def size_words(n: int) -> str:
    """A byte count as people read it: 3 KB, 2.5 MB, 1.2 GB."""
    if n >= (1 << 30):
        return f"{n / (1 << 30):.1f} GB"
    return f"{n / (1 << 20):.1f} MB" if n >= (1 << 20) else f"{max(1, n >> 10)} KB"


class BlockReader:
    """Decompresses in a background thread; read() returns the next block or b'' at the end.
    A cut or damaged gzip stream ends early (see `damage`); past max_inflated_bytes read()
    raises a TraceError."""

    def __init__(self, path: str, block: int) -> None:
        self.path = path
        self.raw = open(path, "rb")
        self.size = os.fstat(self.raw.fileno()).st_size
        magic = self.raw.read(2)
        self.raw.seek(0)
        self.gzip = magic == GZIP_MAGIC
        self.f = Inflater(self.raw) if self.gzip else self.raw
        self.block = block
        self.limit = max_inflated_bytes()
        self.total = 0  # bytes handed out
        self.ended = False
        self.q: queue.Queue = queue.Queue(maxsize=3)
        self.error: BaseException | None = None
        self._stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        try:
            n = 0
            while not self._stop:
                b = self.f.read(self.block)
                n += len(b)
                if n > self.limit:
                    what = "decompresses to" if self.gzip else "holds"
                    raise TraceError(
                        self.path,
                        f"{what} more than {size_words(self.limit)} of JSON (a "
                        "decompression bomb?), so it was not read; if it is a "
                        "real trace, raise GPUVIEWER_MAX_INFLATED_BYTES",
                    )
                self.q.put(b)
                if not b:
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the reading thread
            self.error = e
            self.q.put(b"")

    def read(self) -> bytes:
        if self.ended:  # the end stays the end (the thread has stopped putting blocks)
            return b""
        b = self.q.get()
        if not b:
            self.ended = True
            if self.error is not None:
                err, self.error = self.error, None
                raise err
        self.total += len(b)
        return b

    @property
    def damage(self) -> str | None:
        return self.f.damage if isinstance(self.f, Inflater) else None

    def fraction(self) -> float:
        try:
            return min(1.0, self.raw.tell() / max(1, self.size))
        except (OSError, ValueError):
            return 0.0

    def close(self) -> None:
        self._stop = True
        while self.t.is_alive():
            try:
                self.q.get_nowait()
            except queue.Empty:
                self.t.join(0.01)
        self.raw.close()
