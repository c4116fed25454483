"""Many ranks (issue 15): 256 ranks of ~120k events, analysed in one process (the whole trace,
`gpuviewer analyze DIR`) and as one map per file on a LocalCluster of 2 workers (`gpuviewer
analyze DIR --dask local:2`): wall time and peak RSS of every process, the per-rank map time and
memory, and an extrapolation to 1,024 ranks x 1M events. No target was set: the figures are
printed next to what they imply.

  python ../shared/tools/scale_trace.py kineto \\
      ../shared/traces/kineto/ddp_clean/ddp_clean_rank0.json.gz /tmp/gpuviewer-bench/scaleout_256x3 \\
      --ranks 256 --tiles 3          # 256 files, 121,668 events each (~10 min here)
  python bench/bench_scaleout.py /tmp/gpuviewer-bench/scaleout_256x3 [--workers 2] [--skip-single | --skip-dask]

Each run is a fresh process with an empty column cache (so both parse the JSON and write their
cache, as a first open does), then repeated with its cache in place (the whole session's for one
process, one per file for Dask).
Peak RSS: VmHWM from /proc of the main process and of every process under it (LocalCluster
workers and their nannies), polled while it runs (psutil when installed lists them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402  (puts the checkout on sys.path)

_SINGLE = r"""
import json, sys, time
t0 = time.perf_counter()
from gpuviewer.session import open_session
from gpuviewer.session.analysis import analyze_session
t = open_session([sys.argv[1]])
t1 = time.perf_counter()
a = analyze_session(t)
t2 = time.perf_counter()
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps({"wall": t2 - t0, "load": t1 - t0, "analyze": t2 - t1, "rss": hwm, "events": t.n_events,
                  "ranks": len(t.ranks), "findings": len(a.findings)}))
"""

_DASK = r"""
import json, pickle, sys, time
t0 = time.perf_counter()
from gpuviewer.scale import dask_run
from gpuviewer.scale.many import analyze_many
client, cluster = dask_run.connect("local:" + sys.argv[2])
t1 = time.perf_counter()
last = [t1]
def progress(done, total):
    last[0] = time.perf_counter()
try:
    res = analyze_many([sys.argv[1]], client=client, progress=progress)
finally:
    t2 = time.perf_counter()
    dask_run.close(client, cluster)
parts_bytes = sum(len(pickle.dumps(p, protocol=5)) for p in res.parts)
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps({"wall": time.perf_counter() - t0, "startup": t1 - t0, "maps": last[0] - t1,
                  "reduce": t2 - last[0], "map_seconds": res.map_seconds, "parts_bytes": parts_bytes,
                  "rss": hwm, "ranks": len(res.parts), "events": sum(p.info["events"] for p in res.parts),
                  "findings": len(res.analysis.findings), "failed": len(res.failed)}))
"""

_ONE_MAP = r"""
import json, sys, time
t0 = time.perf_counter()
from gpuviewer.scale.work import map_file
import gpuviewer.io.session, gpuviewer.analysis.rankmap, gpuviewer.io.kineto
base = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
t1 = time.perf_counter()
r = map_file(sys.argv[1], use_cache=False)
t2 = time.perf_counter()
hwm = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]) * 1024
print(json.dumps({"imports": t1 - t0, "map": t2 - t1, "rss": hwm, "base": base, "events": r["parts"][0].info["events"]}))
"""


def _hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return 0


def _children(pid: int) -> list[int]:
    try:
        import psutil

        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - the process ended
        return []
    kids, todo = [], [pid]
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    while todo:
        p = todo.pop()
        for c, pp in parent.items():
            if pp == p:
                kids.append(c)
                todo.append(c)
    return kids


def run(code: str, args: list[str], cache: str) -> tuple[dict, dict[int, int]]:
    """Run a probe in a fresh process; its JSON line, and the peak RSS of each process under it."""
    env = dict(os.environ, GPUVIEWER_CACHE_DIR=cache)
    p = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    peaks: dict[int, int] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            for c in _children(p.pid):
                peaks[c] = max(peaks.get(c, 0), _hwm(c))
            done.wait(0.5)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    out, err = p.communicate()
    done.set()
    t.join()
    if p.returncode != 0:
        raise SystemExit(err)
    return json.loads(out.strip().splitlines()[-1]), peaks


def mb(b: float) -> str:
    return f"{b / 2**20:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default="/tmp/gpuviewer-bench/scaleout_256x3")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-single", action="store_true")
    ap.add_argument("--skip-dask", action="store_true")
    a = ap.parse_args()
    files = sorted(os.listdir(a.dir))
    print(f"# {a.dir}: {len(files)} files; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as cache:
        one, _ = run(_ONE_MAP, [os.path.join(a.dir, files[0])], cache)
    print(
        f"one rank's map in a fresh process ({one['events']:,} events, JSON parsed, no cache): "
        f"{one['map']:.2f} s (+{one['imports']:.2f} s imports), peak RSS {mb(one['rss'])} "
        f"({mb(one['base'])} after imports)"
    )

    single = None
    if not a.skip_single:
        with tempfile.TemporaryDirectory() as cache:
            single, _ = run(_SINGLE, [a.dir], cache)
            again, _ = run(_SINGLE, [a.dir], cache)
        for label, d in (("cold (parse + cache)", single), ("warm (its session cache)", again)):
            print(
                f"single process, {label}: {d['wall']:.1f} s (open {d['load']:.1f} s + analysis "
                f"{d['analyze']:.1f} s), peak RSS {mb(d['rss'])}, {d['events']:,} events, {d['findings']} findings"
            )
    if a.skip_dask:
        return
    with tempfile.TemporaryDirectory() as cache:
        cold, peaks = run(_DASK, [a.dir, str(a.workers)], cache)
        warm, peaks_w = run(_DASK, [a.dir, str(a.workers)], cache)
    for label, d, pk in (("Dask, cold (parse + cache)", cold, peaks), ("Dask, warm (per-file caches)", warm, peaks_w)):
        top = sorted(pk.values(), reverse=True)
        ms = sorted(d["map_seconds"])
        print(
            f"{label}, LocalCluster of {a.workers}: {d['wall']:.1f} s (cluster start {d['startup']:.1f} s, "
            f"maps {d['maps']:.1f} s, reduce {d['reduce']:.1f} s); main peak RSS {mb(d['rss'])}; "
            f"largest processes under it {', '.join(mb(x) for x in top[: a.workers + 1])}; per-rank map "
            f"median {ms[len(ms) // 2]:.2f} s; maps shipped {mb(d['parts_bytes'])} "
            f"({d['parts_bytes'] / d['ranks'] / 1024:.0f} KB a rank); {d['findings']} findings"
        )
    if single is not None:
        print(
            f"speed-up of the Dask run over one process: cold {single['wall'] / cold['wall']:.2f}x, "
            f"warm {again['wall'] / warm['wall']:.2f}x"
        )
    # Extrapolation: a map is linear in its rank's events (its time measured in a worker of the
    # cold run: reading, caching, mapping, while the other workers share the cores); the reduce in
    # ranks x collectives a rank (here its time, scaled by ranks and by events a rank)
    ms = sorted(cold["map_seconds"])
    per_rank = ms[len(ms) // 2]
    scale = 1_000_000 / (cold["events"] / cold["ranks"])
    reduce_1k = cold["reduce"] * (1024 / cold["ranks"]) * scale
    worker_peak = max(sorted(peaks.values(), reverse=True)[: a.workers] or [0])
    worker_rss = worker_peak + (one["rss"] - one["base"]) * (scale - 1)  # a worker maps one rank at a time
    for n in (a.workers, 16, 64):
        maps = 1024 * per_rank * scale / n
        print(
            f"1,024 ranks x 1M events on {n} workers of this machine's speed ~ {(maps + reduce_1k) / 60:.0f} min "
            f"(maps {maps / 60:.0f} min + reduce {reduce_1k / 60:.1f} min); a worker ~ {mb(worker_rss)}, "
            f"the main process holds ~ {mb(cold['parts_bytes'] / cold['ranks'] * 1024 * scale)} of maps"
        )


if __name__ == "__main__":
    main()
