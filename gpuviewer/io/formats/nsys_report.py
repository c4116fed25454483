""".nsys-rep / .qdrep reports: a proprietary container that only NVIDIA's nsys can export, so
they are exported to SQLite (with nsys, when it is installed; refused with the command to run
when not) and the export is opened instead."""

from __future__ import annotations

from ..reader import Job, Probe, Reader


class NsysReport(Reader):
    name = "nsys-rep"
    order = 30  # by name: after the content tests that are certain (SQLite, pickle)
    words = "an Nsight Systems report"
    in_folders = False  # an export can take minutes: only when the user names the file
    converts = True
    cached = False  # the export is cached, under its own name, when job.open reads it

    def sniff(self, probe: Probe) -> bool:
        return probe.path.lower().endswith((".nsys-rep", ".qdrep"))

    def read(self, files: list[str], job: Job):
        from ..nsys_rep import export_reports

        return job.open(export_reports(files, progress=job.progress, cancelled=job.cancelled))


READERS = [NsysReport()]
