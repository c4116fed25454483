"""Nsight Systems SQLite exports (`nsys export --type sqlite`)."""

from __future__ import annotations

from ..errors import Cancelled, TraceError, file_names, unexpected
from ..reader import Job, Probe, Reader
from ..streams import SQLITE_MAGIC


class NsysSqlite(Reader):
    name = "nsys-sqlite"
    order = 10
    words = "an Nsight Systems export"

    def sniff(self, probe: Probe) -> bool:
        return probe.head.startswith(SQLITE_MAGIC)

    def read(self, files: list[str], job: Job):
        from ..nsys import load_nsys

        try:
            return load_nsys(files, progress=job.progress, cancelled=job.cancelled)
        except (TraceError, Cancelled):
            raise
        except Exception as e:  # noqa: BLE001 - named after the files that caused it
            raise unexpected(file_names(files), e) from e


READERS = [NsysSqlite()]
