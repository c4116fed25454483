"""What a file format is to this program: a Reader (see io/registry.py for how formats are found
and chosen). The format modules in io/formats/ import this, never the registry, so the registry
can import them without a cycle.

A Reader has:
  name        the format's id ("kineto", "nsys-sqlite", ...; what io.sniff.sniff() returns)
  order       when its sniff runs: lowest first (the cheap, certain tests before the guesses)
  sniff(p)    True when the Probe p (the file's first bytes, and its first text) is this format
  read(files, job) -> Trace   for formats that make a session. All files of one session are of
              one format, except that a reader with converts=True takes the others along (an
              .nsys-rep is exported, then opened with the rest through job.open)
  companion   for files that join the session of the traces beside them (a topology, memory
              snapshots) instead: the Companion that reads them; readers that share one are
              read together by it
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from ..model.trace import Trace
from .streams import first_text_bytes

Progress = Callable[[float, str], None]


class Probe:
    """What sniffing looks at, read once per file and only as far as a test asks."""

    def __init__(self, path: str, first: bytes) -> None:
        self.path = path
        self.head = first  # the first 16 bytes as stored (magic numbers)

    @cached_property
    def text(self) -> bytes:
        """The first 4 KB of the content, decompressed."""
        return first_text_bytes(self.path, 4096) if self.head else b""

    @cached_property
    def body(self) -> bytes:
        """text from its first character that is not blank space or a byte-order mark."""
        return self.text.lstrip(b" \t\r\n\xef\xbb\xbf")


@dataclass
class Job:
    """What a reader gets besides its files."""

    progress: Progress | None
    cancelled: Callable[[], bool] | None
    optional: frozenset  # files found inside an opened folder (the others were named by the user)
    open: Callable[[list[str]], Trace]  # other files through the whole loader (cache included)


@dataclass(frozen=True, eq=False)
class Companion:
    """Files that join the session of the traces beside them.
    join(files, kinds, rest): kinds maps each file to its Reader; rest() loads the other files
    of the session (None when there are none). The companion of the lowest order wraps all the
    others: a topology is read before the traces and memory after them, as they always were."""

    name: str
    order: int
    join: Callable[[list[str], dict, Callable[[], Trace] | None], Trace]


class Reader:
    """One file format (the module docstring says what each part is for)."""

    name: str = ""
    order: int = 100
    words: str | None = None  # how messages name the format: "is {words}, but the other files ..."
    in_folders: bool = True  # picked up, by content, from a folder the user opened
    converts: bool = False
    cached: bool = True  # what read() returns is stored in the column cache
    companion: Companion | None = None

    def sniff(self, probe: Probe) -> bool:
        raise NotImplementedError

    def read(self, files: list[str], job: Job) -> Trace:
        raise NotImplementedError(f"{self.name} files join a session; they are not read alone")


def empty_trace(files: list[str], format: str) -> Trace:
    """A session of companions alone (a topology or a snapshot without traces)."""
    from ..model.build import TraceBuilder

    b = TraceBuilder(format)
    b.rank(0).files.extend(os.path.abspath(f) for f in files)
    return b.finish()
