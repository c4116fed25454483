"""Make multi-host sessions from one real Kineto rank, for clock-alignment tests.

Every rank is a copy of the same real rank (so their collectives line up exactly on one clock),
with a small per-rank jitter; ranks are spread over hosts and each host's clock is moved by its
offset (every timestamp of its ranks). One rank can be made late: all its events move D ms later
and every other rank's NCCL kernels last D ms longer (they wait for it), so the collectives still
end together, as they do on real hardware.

usage: python tests/make_hosts.py SRC OUTDIR --ranks 8 --hosts 2 --offsets-us 0,2700
           [--late-rank 5 --late-ms 25] [--layout folders|hostnames|flat] [--jitter-us 3]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import os
import random

import msgspec


@functools.lru_cache(maxsize=4)
def _read(path: str) -> dict:
    """The source trace, parsed once per process (tests make many sessions from one rank);
    callers copy what they change."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    with (gzip.open if gz else open)(path, "rb") as f:
        return msgspec.json.decode(f.read())


def make(
    src: str,
    out: str,
    ranks: int = 8,
    hosts: int = 2,
    offsets_us: list[float] | None = None,
    late_rank: int | None = None,
    late_ms: float = 0.0,
    layout: str = "folders",
    jitter_us: float = 3.0,
    seed: int = 0,
) -> list[str]:
    doc = _read(src)
    offsets_us = offsets_us or [0.0] * hosts
    per_host = -(-ranks // hosts)
    rng = random.Random(seed)
    paths = []
    for r in range(ranks):
        h = r // per_host
        shift = offsets_us[h] + rng.uniform(-jitter_us, jitter_us)
        late = late_ms * 1000 if r == late_rank else 0.0
        evs = []
        for e in doc["traceEvents"]:
            e = dict(e)
            ts = e.get("ts")
            if isinstance(ts, (int, float)) and not isinstance(ts, bool):
                e["ts"] = round(ts + shift + late, 3)
                if (
                    late_rank is not None
                    and r != late_rank
                    and e.get("cat") == "kernel"
                    and "nccl" in str(e.get("name", "")).lower()
                    and isinstance(e.get("dur"), (int, float))
                ):
                    e["dur"] = round(e["dur"] + late_ms * 1000, 3)  # waits for the late rank
            evs.append(e)
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        info = dict(meta.get("distributedInfo") or {"backend": "nccl"})
        info.update(rank=r, world_size=ranks)
        meta["distributedInfo"] = info
        if layout == "folders":
            path = os.path.join(out, f"host{h}", f"rank{r}.json.gz")
        elif layout == "hostnames":
            path = os.path.join(out, f"node{h:02d}_{4000 + r}.1790857026{r:03d}.pt.trace.json.gz")
        else:
            path = os.path.join(out, f"rank{r}.json.gz")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # msgspec (the app's own JSON library) encodes several times faster than json.dump
        with open(path, "wb") as f:
            f.write(gzip.compress(msgspec.json.encode(dict(meta, traceEvents=evs)), 1))
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--offsets-us", default="")
    ap.add_argument("--late-rank", type=int)
    ap.add_argument("--late-ms", type=float, default=0.0)
    ap.add_argument("--layout", default="folders", choices=["folders", "hostnames", "flat"])
    ap.add_argument("--jitter-us", type=float, default=3.0)
    a = ap.parse_args()
    offs = [float(x) for x in a.offsets_us.split(",")] if a.offsets_us else None
    for p in make(a.src, a.out, a.ranks, a.hosts, offs, a.late_rank, a.late_ms, a.layout, a.jitter_us):
        print(p)


if __name__ == "__main__":
    main()
