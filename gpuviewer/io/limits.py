"""Limits that keep hostile or broken inputs from exhausting memory or time.

Each limit has a default sized for real traces (the largest real ones we have seen are far
below them) and an environment variable to raise it. README.md lists them.
"""

from __future__ import annotations

import os


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if not v:
        return default
    try:
        n = int(float(v))
    except ValueError:
        return default
    return n if n > 0 else default


def max_string_bytes() -> int:
    """Longest event name or argument value kept; longer ones are cut (with a warning)."""
    return _env_int("GPUVIEWER_MAX_STRING_BYTES", 1 << 20)


def max_event_bytes() -> int:
    """Largest single JSON event; a bigger one is skipped (with a warning)."""
    return _env_int("GPUVIEWER_MAX_EVENT_BYTES", 64 << 20)


def max_inflated_bytes() -> int:
    """Most bytes a (decompressed) JSON trace may hold; beyond it reading stops with a message."""
    return _env_int("GPUVIEWER_MAX_INFLATED_BYTES", 64 << 30)


def max_snapshot_objects() -> int:
    """Most objects the restricted unpickler builds (or visits through shared references)."""
    return _env_int("GPUVIEWER_MAX_SNAPSHOT_OBJECTS", 20_000_000)


def max_sqlite_steps() -> int:
    """Most SQLite virtual-machine steps (in thousands) one query may run before it is stopped,
    plus 4 steps per byte of the file (so a big export is never refused for its size)."""
    return _env_int("GPUVIEWER_MAX_SQLITE_KSTEPS", 2_000_000)


def max_annotations() -> int:
    """Most annotations read from one sidecar."""
    return _env_int("GPUVIEWER_MAX_ANNOTATIONS", 10_000)


def max_sidecar_bytes() -> int:
    """Largest annotations sidecar read."""
    return _env_int("GPUVIEWER_MAX_SIDECAR_BYTES", 16 << 20)


def max_summary_json_bytes() -> int:
    """Largest manifest.json or analysis.json of a summary read (thousands of ranks are far below)."""
    return _env_int("GPUVIEWER_MAX_SUMMARY_JSON_BYTES", 1 << 30)
