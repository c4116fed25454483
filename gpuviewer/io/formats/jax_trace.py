"""JAX / XLA profiler traces: the Chrome trace JSON `jax.profiler` writes as
plugins/profile/<run>/<host>.trace.json.gz (io/jax_trace.py reads it), and the `.xplane.pb`
beside it, which only XLA's own converter reads."""

from __future__ import annotations

import re

from ...model.trace import Trace
from ..reader import Job, Probe, Reader
from ..streams import first_text_bytes

# XLA names its processes /device:GPU:0, /host:CPU; PyTorch's Kineto never does
_XLA_PROCESS = re.compile(rb'"name"\s*:\s*"/(device:[A-Za-z_]+:\d+|host:CPU)"')
# what a Kineto file says near its top: no need to look further into it
_KINETO_HEAD = re.compile(rb'"(schemaVersion|deviceProperties|distributedInfo|baseTimeNanoseconds)"')
_LOOK_BYTES = 64 << 10  # XLA writes its metadata events first; a little further when the 4 KB head has none


class JaxTrace(Reader):
    name = "jax"
    order = 45  # before the Kineto reader, which takes any JSON
    words = "a JAX/XLA profiler trace"

    def sniff(self, probe: Probe) -> bool:
        if probe.body[:1] not in (b"{", b"["):
            return False
        if _XLA_PROCESS.search(probe.text):
            return True
        if _KINETO_HEAD.search(probe.text) or len(probe.text) < 4096:
            return False
        return bool(_XLA_PROCESS.search(first_text_bytes(probe.path, _LOOK_BYTES)))

    def read(self, files: list[str], job: Job) -> Trace:
        from ..jax_trace import load_jax

        return load_jax(files, job.progress, job.cancelled)


class XPlane(Reader):
    """An XSpace protobuf: converted with xprof (tensorboard-plugin-profile) when it is
    installed, else refused with the file to open instead."""

    name = "xplane"
    order = 31  # by name, like an .nsys-rep
    words = "an XLA profile (.xplane.pb)"
    in_folders = False  # the .trace.json.gz beside it is the one a folder opens
    converts = True
    cached = False  # the conversion is cached, under its own name, when job.open reads it

    def sniff(self, probe: Probe) -> bool:
        return probe.path.lower().endswith(".xplane.pb")

    def read(self, files: list[str], job: Job) -> Trace:
        from ..jax_xplane import convert_xplanes

        return job.open(convert_xplanes(files))


READERS = [JaxTrace(), XPlane()]
