"""Writing files the user asked for (tables, images, reports), through the session package: one
atomic writer with the user's umask, and the check that an output replaces only a file gpuviewer
wrote. The window and export/ use these, never io/ themselves (.importlinter)."""

from __future__ import annotations

from ..io.atomic import umask, write_path, write_text, write_with
from ..io.outputs import SOFTWARE, check

__all__ = ["SOFTWARE", "check", "umask", "write_path", "write_text", "write_with"]
