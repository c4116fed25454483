"""The file formats this program reads: every Reader (io/reader.py) that a module in io/formats/
lists in its READERS. A new format is one new module there; nothing else names it. The session
loader (io/session.py), folder expansion (io/sniff.py) and the window all ask here what a file
is, by its content (an .nsys-rep, which only nsys can open, by its name)."""

from __future__ import annotations

from .reader import Companion, Probe, Reader
from .streams import head

_readers: list[Reader] | None = None


def readers() -> list[Reader]:
    """Every format's reader, in sniffing order; the format modules are imported on first use."""
    global _readers
    if _readers is None:
        import importlib
        import pkgutil

        from . import formats

        found: list[Reader] = []
        for m in sorted(pkgutil.iter_modules(formats.__path__), key=lambda m: m.name):
            found += getattr(importlib.import_module(f"{formats.__name__}.{m.name}"), "READERS", [])
        names = [r.name for r in found]
        if len(set(names)) != len(names):
            raise RuntimeError(f"two readers share a format name: {sorted(names)}")
        _readers = sorted(found, key=lambda r: r.order)
    return _readers


def sniff(path: str) -> Reader | None:
    """The reader of a file, judged from its content (None: no format we read)."""
    try:
        first = head(path, 16)
    except OSError:
        return None
    probe = Probe(path, first)
    return next((r for r in readers() if r.sniff(probe)), None)


def companion_of(path: str) -> str | None:
    """The name of the companion a file would join a session as ("topology", "memory"), if any."""
    r = sniff(path)
    return r.companion.name if r is not None and r.companion is not None else None


def companions() -> list[Companion]:
    """Every companion, the one whose join wraps all the others first."""
    found = {id(r.companion): r.companion for r in readers() if r.companion is not None}
    return sorted(found.values(), key=lambda c: c.order)
