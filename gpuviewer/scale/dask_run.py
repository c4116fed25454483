"""Running the maps on Dask: a LocalCluster of this machine's cores, or a running scheduler.

Each file is one task (work.map_file), submitted by path: the workers read the files from a
file system they share with this machine. A task whose worker dies is run again elsewhere by
the scheduler; when that keeps failing (KilledWorker), or the scheduler goes away, or no worker
is left, the run stops with one line saying so: never a result with ranks silently missing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from ..errors import GpuviewerError

NO_WORKERS_S = 60.0  # with no worker at all this long, a run is stuck: stop it
_POLL_S = 1.0


class DaskMissing(GpuviewerError, RuntimeError):
    pass


class ClusterFailed(GpuviewerError, RuntimeError):
    """The run could not finish on the cluster (str: one line for the user)."""


def require() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise DaskMissing("--dask needs dask.distributed: pip install gpuviewer[cluster]") from None


def connect(address: str | None, quiet: bool = True):
    """A Client, and the LocalCluster it owns (None for a running scheduler). address None (or
    "local"): a LocalCluster of one single-threaded worker process per core on 127.0.0.1, no
    dashboard; "local:N": of N worker processes."""
    require()
    from distributed import Client, LocalCluster

    workers = os.cpu_count() or 1
    if address is not None and address.startswith("local"):
        try:
            workers = int(address.split(":", 1)[1]) if ":" in address else workers
        except ValueError:
            raise ClusterFailed(f"--dask {address}: write local:N with N a number of workers") from None
        if not 1 <= workers <= 4096:
            raise ClusterFailed(f"--dask {address}: between 1 and 4096 workers")
        address = None
    if quiet:  # Dask's own log lines (worker restarts, ...) are for --debug
        for name in (
            "distributed",
            "distributed.worker",
            "distributed.scheduler",
            "distributed.nanny",
            "distributed.core",
            "distributed.comm",
            "distributed.client",
        ):
            logging.getLogger(name).setLevel(logging.CRITICAL)
    if address is None:
        cluster = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.CRITICAL if quiet else logging.WARNING,
        )
        try:
            return Client(cluster), cluster
        except BaseException:
            cluster.close()
            raise
    try:
        return Client(address, timeout="20s"), None
    except (OSError, TimeoutError, ValueError) as e:
        raise ClusterFailed(f"cannot reach the Dask scheduler at {address} ({type(e).__name__}: {e})") from None


def run(client, calls: list[tuple[str, dict]], done: Callable[[int, dict], None] | None = None) -> list[dict]:
    """calls: (path, keyword arguments of work.map_file) -> their results, in order. done(i,
    result) is called as each finishes (progress)."""
    from distributed import wait
    from distributed.client import FutureCancelledError

    from .work import map_file

    # A result is waited for a poll at a time (_result); when the run stops, the client's
    # abandoned waits end with AllExit and asyncio logs "Task exception was never retrieved" and
    # a traceback at exit, after the one line that said why the run stopped.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    stamp = f"{os.getpid()}-{time.time_ns()}"
    futures = [
        client.submit(map_file, path, key=f"gpuviewer-map-{stamp}-{i}", pure=False, **kw)
        for i, (path, kw) in enumerate(calls)
    ]
    where = {f.key: i for i, f in enumerate(futures)}
    results: list[dict | None] = [None] * len(calls)
    pending = set(futures)
    no_workers_since = None
    try:
        while pending:
            try:
                finished, pending = wait(list(pending), timeout=_POLL_S, return_when="FIRST_COMPLETED")
                pending = set(pending)
            except TimeoutError:
                finished = []
            for f in finished:
                i = where[f.key]
                try:
                    results[i], no_workers_since = _result(client, f, no_workers_since)
                except ClusterFailed:
                    raise
                except (Exception, FutureCancelledError) as e:  # noqa: BLE001 - the cluster's, not the file's
                    raise ClusterFailed(_why(e, calls[i][0])) from None
                f.release()  # held here now: a worker lost later need not compute it again
                if done:
                    done(i, results[i])
            if not finished and pending:
                no_workers_since = _check_workers(client, no_workers_since)
    finally:
        for f in futures:
            f.release()
    return results  # type: ignore[return-value]


def _result(client, f, no_workers_since: float | None):
    """A finished future's result. It can be finished and then lost with the worker that held
    it (killed): the scheduler runs it again, and with no worker left f.result() would wait
    forever; so wait a poll at a time and give up as the run itself does."""
    while True:
        try:
            return f.result(timeout=_POLL_S), None
        except TimeoutError:
            no_workers_since = _check_workers(client, no_workers_since)


def _check_workers(client, since: float | None) -> float | None:
    try:
        n = len(client.scheduler_info().get("workers", {}))
    except Exception as e:  # noqa: BLE001
        raise ClusterFailed(
            f"lost the Dask scheduler ({type(e).__name__}): the run stopped, nothing was written"
        ) from None
    if n:
        return None
    now = time.monotonic()
    if since is None:
        return now
    if now - since > float(os.environ.get("GPUVIEWER_DASK_NO_WORKERS_S", NO_WORKERS_S)):
        raise ClusterFailed(
            f"no Dask worker has been connected to the scheduler for {now - since:.0f} s: the run "
            "stopped, nothing was written"
        )
    return since


def _why(e: BaseException, path: str) -> str:
    name = type(e).__name__
    if name == "KilledWorker":
        return (
            f"Dask workers died again and again while mapping {path} (KilledWorker: out of memory, or "
            "killed): the run stopped, nothing was written"
        )
    return f"the Dask run failed while mapping {path} ({name}: {str(e)[:200]}): the run stopped, nothing was written"


def close(client, cluster) -> None:
    try:
        client.close()
    finally:
        if cluster is not None:
            cluster.close()
