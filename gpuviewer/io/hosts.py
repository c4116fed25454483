"""Which ranks share a clock (a host).

From the files: one Nsight Systems report is one host's clock; PyTorch's
tensorboard_trace_handler names its files HOST_PID.TIMESTAMP.pt.trace.json; otherwise ranks
whose files sit in different folders are taken to be on different hosts (a job folder with one
subfolder per node), and files of one folder on one host. `--hosts 0-3,4-7` (or the dialog)
overrides all of it.
"""

from __future__ import annotations

import os
import re

from ..model.trace import Trace
from .errors import TraceError

_HANDLER_NAME = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)\.\d+\.pt\.trace\.json(\.gz)?$")


def hosts_from_files(trace: Trace) -> tuple[dict[int, str], str]:
    """rank -> host name, and how it was found ('file names', 'folders', 'one report per host',
    'one folder')."""
    return hosts_from_paths({r.rank: (r.files[0] if r.files else "") for r in trace.ranks}, trace.format)


def hosts_from_paths(files: dict[int, str], fmt: str) -> tuple[dict[int, str], str]:
    """hosts_from_files from each rank's (first) file and the session's format: what a Dask run,
    which never holds the whole trace, knows."""
    if fmt.startswith("nsys"):
        return {r: os.path.basename(f) for r, f in files.items()}, "one report per host"
    if fmt == "jax":  # jax.profiler writes one <host>.trace.json.gz per host
        from .jax_trace import host_of

        return {r: host_of(f) for r, f in files.items()}, "one file per host"
    named = {r: _HANDLER_NAME.match(os.path.basename(f)) for r, f in files.items()}
    if files and all(named.values()):
        return {r: m.group("host") for r, m in named.items() if m}, "file names"
    folders = {r: os.path.dirname(os.path.abspath(f)) for r, f in files.items()}
    if len(set(folders.values())) > 1:
        # node0/prof and node1/prof are two hosts: name each by its path below the common part
        common = os.path.commonpath(list(folders.values()))
        return {r: os.path.relpath(d, common) for r, d in folders.items()}, "folders"
    return {r: "host" for r in files}, "one folder"


def parse_hosts(spec: str, ranks: list[int]) -> dict[int, str]:
    """'0-3,4-7' -> ranks 0-3 on host0, 4-7 on host1; ranks not named get a host each."""
    out: dict[int, str] = {}
    for k, part in enumerate(p for p in spec.split(",") if p.strip()):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", part)
        if not m:
            raise TraceError("--hosts", f"'{part}' is not a rank or a range of ranks (write e.g. 0-3,4-7)")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise TraceError("--hosts", f"'{part}': the range runs backwards")
        for r in (x for x in ranks if a <= x <= b):  # the session's ranks only: "0-999999999" is cheap
            if r in out:
                raise TraceError("--hosts", f"rank {r} is named for two hosts")
            out[r] = f"host{k}"
    for r in ranks:
        out.setdefault(r, f"rank{r}")
    return {r: out[r] for r in ranks}
