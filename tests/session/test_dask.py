"""Issue 15: per-rank analysis on Dask and session summaries. Real processes throughout: the
CLI in a child, a real `dask scheduler` and `dask worker`s on 127.0.0.1, a LocalCluster; the
answer is always compared with the in-process `gpuviewer analyze` of the same files.

Inputs are made from real traces: 16 ranks with ../shared/tools/scale_trace.py (conftest's
ranks16, made once for the run), two-host sessions with tests/make_hosts.py, a rank cut off while
it was being written.

One `local:N` run starts the LocalCluster the command owns; the other runs that leave their
cluster as they found it share one running scheduler and its workers (shared_cluster), since each
cluster started costs seconds of CPU on a small machine; the tests that kill workers start their
own."""

from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli_once, trace_path
from make_hosts import make

from gpuviewer.analysis.efficiency_findings import ADVICE as EFFICIENCY_ADVICE
from gpuviewer.analysis.rule_base import TC_HINT

SRC = trace_path("kineto", "ddp_clean", "ddp_clean_rank0.json.gz")
HANG_S = 300  # a guard against a hang, not a time limit


def cli(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuviewer", *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout
    )


def analyze_json(*args: str) -> dict:
    r = cli("analyze", *args, "--json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


SAVINGS = (
    "saves_ms",
    "saves_ms_per_step",
    "saves_pct",
    "saving",
    "saves_steps",
    "saves_ms_by_step",
    "saves_ms_in_steps",
    "saves_pct_in_steps",
    "steps_profiled",
    "saves_after_above",
    "saves_ms_alone_in_steps",
    "saves_beside_cause",
    "saves_once_above",
    "saves_ms_alone_by_step",
)
EFFICIENCY_RULES = set(EFFICIENCY_ADVICE)  # findings from the kernels' efficiency: in process only


def _without_savings(a):
    """The analysis less what only an in-process run can say: what fixing each finding would save
    (a what-if replay of the events, which a Dask driver does not hold) and the order by it, and
    each step's critical path with the job's bound_by (the same replay); the findings sorted alike
    on both sides."""

    def strip(f):
        # severity follows the saving where there is one
        f = {k: v for k, v in f.items() if k not in SAVINGS and k != "severity"}
        m = f.get("metrics") or {}
        if "job_duration_text" in m:  # a step's time said in the job's (the replay's) figures, as the rank's
            f["title"] = f["title"].replace(m["job_duration_text"], m["duration_text"], 1)
            f["metrics"] = {
                k: v for k, v in m.items() if k not in ("job_duration_text", "job_step_ms", "job_median_ms")
            }
        if f.get("advice"):  # the Tensor-Core hint is dropped by the efficiency, in process only
            f["advice"] = TC_HINT.sub(")", f["advice"])
        f["children"] = sorted((strip(c) for c in f.get("children", [])), key=_key)
        return f

    # efficiency and its findings: op shapes, in process; steps and bound_by: the critical paths, in process
    out = {k: v for k, v in a.items() if k not in ("notes", "efficiency", "steps", "bound_by")}
    out["findings"] = sorted((strip(f) for f in a.get("findings") or [] if f["rule"] not in EFFICIENCY_RULES), key=_key)
    return out


def _key(f):
    return (f["rule"], f["start_ns"], f["title"])


def assert_same(a, b, path="$"):
    """Equal JSON, floats to 1e-9 relative (an analysis: apart from its savings, see above)."""
    if path == "$" and isinstance(a, dict) and "findings" in a and isinstance(b, dict) and "findings" in b:
        a, b = _without_savings(a), _without_savings(b)
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ: {sorted(set(a) ^ set(b))}"
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
        ), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.fixture(scope="session")
def inproc16(ranks16) -> dict:
    a = analyze_json(ranks16)
    assert len(a["ranks"]) == 16 and a["collectives"]  # 16 ranks whose collectives matched
    return a


# The test's clusters run no dashboard: the workers' statistical profiler (a stack sample every
# 10 ms) and the event loop's health ticks only feed one. With them on, an idle scheduler and two
# workers took 5.8 s of CPU a minute on the 2-core VM, with them off 1.1 s, and the shared cluster
# idles while the other tests run.
QUIET_DASK = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "2s",
}


class Cluster:
    """A `dask scheduler` and `dask worker`s (no nanny: a killed worker stays dead), stopped at
    the end whatever happens. The workers run in a folder of their own (tmp_path/"workers", also
    their scratch space), so a path the command failed to make absolute would not be found."""

    def __init__(self, tmp_path, workers: int = 2) -> None:
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []
        try:
            self._start(tmp_path, workers)
        except BaseException:
            self.stop()  # whatever started is stopped, also when starting fails
            raise

    def _start(self, tmp_path, workers: int) -> None:
        sched_file = tmp_path / "scheduler.json"
        log = open(tmp_path / "dask.log", "wb")
        env = dict(os.environ, **QUIET_DASK)
        self.procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_scheduler",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--scheduler-file",
                    str(sched_file),
                    "--no-dashboard",
                ],
                stdout=log,
                stderr=log,
                env=env,
            )
        )
        t0 = time.monotonic()
        self.address = None
        while self.address is None:  # polled: the scheduler writes the file once it listens
            assert time.monotonic() - t0 < 60, "the scheduler did not start"
            assert self.procs[0].poll() is None, "the scheduler died"
            try:
                self.address = json.loads(sched_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        where = tmp_path / "workers"
        where.mkdir()
        for _ in range(workers):
            w = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_worker",
                    "--scheduler-file",
                    str(sched_file),
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                    "--local-directory",
                    str(where),
                ],
                stdout=log,
                stderr=log,
                cwd=where,
                env=env,
            )
            self.workers.append(w)
            self.procs.append(w)
        from distributed import Client

        with Client(self.address, timeout=60) as c:
            c.wait_for_workers(workers, timeout=120)

    def stop(self) -> None:
        """SIGKILL: the cluster is this test's own with nothing to save (its scratch space is in
        tmp_path). SIGTERM to all of them took 2.2-2.8 s a cluster on the 2-core VM, and 22 s and
        40 s in two runs: a worker whose heartbeat was under way when the scheduler went retried
        the connection for Dask's 30 s connect timeout before it exited (its log says so). The
        graceful close users wait for is the LocalCluster's (the local:N test)."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait()


@pytest.fixture
def cluster(tmp_path):
    """A cluster of this test's own, for the tests that kill its workers."""
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One running cluster for the tests that leave it as they found it (a run's tasks are named
    by its process and time, and released when it ends)."""
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()


def test_16_ranks_on_a_running_scheduler_equal_in_process(ranks16, inproc16, shared_cluster):
    r = cli("analyze", ranks16, "--dask", shared_cluster.address, "--json")
    assert r.returncode == 0, r.stderr
    assert_same(inproc16, json.loads(r.stdout))
    # progress on stderr: ranks done/total, ending with all of them
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("ranks ")]
    assert progress and progress[-1].startswith("ranks 16/16")
    assert "Traceback" not in r.stderr and "warning" not in r.stderr


def test_local_cluster_of_2_workers_equal_in_process(ranks16, inproc16):
    got = analyze_json(ranks16, "--dask", "local:2")
    assert_same(inproc16, got)
    # what only a run in one process makes is said to be missing, not left for '-' to suggest
    # that fixing nothing would save anything (a run in one process has savings and efficiency)
    from gpuviewer.scale.many import MAP_REDUCE_NOTE

    assert MAP_REDUCE_NOTE in got["notes"] and MAP_REDUCE_NOTE not in (inproc16.get("notes") or [])
    assert "efficiency" not in got or got["efficiency"] is None


def _analyze_started(ranks16: str, cluster: Cluster, **env: str) -> subprocess.Popen:
    """`analyze --json` of the 16 ranks on the cluster, running: files read afresh (--no-cache),
    so every map takes a while and a worker can be killed mid-run."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpuviewer", "analyze", ranks16, "--dask", cluster.address, "--json", "--no-cache"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, **env),
    )


def test_a_worker_killed_mid_run_gives_the_whole_answer_or_a_clear_error(ranks16, inproc16, cluster):
    """SIGKILL one of the two workers once the first rank is done (files read afresh, so every
    map takes a while): the scheduler runs its tasks on the other worker."""
    p = _analyze_started(ranks16, cluster)
    try:
        seen = []
        while True:
            line = p.stderr.readline()
            assert line, f"the run ended before any rank was done: {''.join(seen)}"
            seen.append(line)
            if line.startswith("ranks "):
                done = int(line.split()[1].split("/")[0])
                break
        assert done < 16  # ranks are still to do: the kill lands mid-run
        victim = cluster.workers[0]
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        out, err = p.communicate(timeout=HANG_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    if p.returncode == 0:
        assert_same(inproc16, json.loads(out))
    else:  # allowed, but then one clear line and no result at all
        errors = [ln for ln in err.splitlines() if ln.startswith("gpuviewer:")]
        assert len(errors) == 1 and "Traceback" not in err, err
        assert out.strip() == ""


def test_every_worker_killed_ends_with_one_clear_line_and_no_result(ranks16, cluster):
    """With no worker left the run cannot finish: it says so (after GPUVIEWER_DASK_NO_WORKERS_S)
    and prints nothing on stdout, rather than waiting forever or printing part of the ranks."""
    p = _analyze_started(ranks16, cluster, GPUVIEWER_DASK_NO_WORKERS_S="3")
    try:
        while not p.stderr.readline().startswith("ranks "):
            assert p.poll() is None
        for w in cluster.workers:
            os.kill(w.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=HANG_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    # says how it ended when it did not end as it should (a clean CI run once failed here unexplained)
    assert p.returncode == 1 and out == "", f"rc {p.returncode}, {len(out)} chars on stdout; stderr: {err[-2000:]}"
    errors = [ln for ln in err.splitlines() if ln.startswith("gpuviewer:")]
    assert len(errors) == 1 and "no Dask worker" in errors[0] and "Traceback" not in err, err


def _cut_rank(path: str) -> None:
    """A rank whose profiler was stopped while writing: the file ends inside its first event."""
    data = gzip.open(trace_path("kineto", "tp", "tp_rank0.json.gz")).read()
    i = data.index(b'"traceEvents"')
    with open(path, "wb") as f:
        f.write(gzip.compress(data[: i + 60]))


def test_a_broken_rank_is_named_and_the_others_analysed(tmp_path, shared_cluster):
    job = tmp_path / "job"
    job.mkdir()
    for f in os.listdir(trace_path("kineto", "ddp_clean")):
        shutil.copy(trace_path("kineto", "ddp_clean", f), job / f)
    broken = str(job / "rank7.json.gz")
    _cut_rank(broken)
    # a relative path too (the workers run in a folder of their own)
    r = cli("analyze", os.path.relpath(job, ROOT), "--dask", shared_cluster.address, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [f["file"] for f in got.pop("failed_ranks")] == [broken]
    warned = [ln for ln in r.stderr.splitlines() if "warning" in ln and "rank7.json.gz" in ln]
    assert warned and "Traceback" not in r.stderr
    # the other ranks: exactly what they give on their own
    alone = run_cli_once("analyze", trace_path("kineto", "ddp_clean"), "--json")  # the run's one, shared
    assert alone.returncode == 0 and "Traceback" not in alone.stderr, alone.stderr
    assert_same(json.loads(alone.stdout), got)
    # in one process the session cannot be opened at all: that is what the map/reduce run improves
    assert cli("analyze", str(job), "--json").returncode == 2
    # every rank broken: exit 1, each named
    only = tmp_path / "only"
    only.mkdir()
    _cut_rank(str(only / "rank0.json.gz"))
    _cut_rank(str(only / "rank1.json.gz"))
    r = cli("analyze", str(only), "--dask", shared_cluster.address)
    assert r.returncode == 1 and r.stdout == ""
    assert "rank0.json.gz" in r.stderr and "rank1.json.gz" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("layout,extra", [("folders", ()), ("hostnames", ()), ("flat", ("--hosts", "0-1,2-3"))])
def test_two_hosts_aligned_in_the_reduce_as_open_session_aligns_them(tmp_path, layout, extra, shared_cluster):
    """Host 1's clock 2.7 ms off, rank 1 late by 10 ms: the reduce aligns the hosts from the
    collectives' ends as open_session does from the events, and finds the same late rank."""
    make(SRC, str(tmp_path), ranks=4, hosts=2, offsets_us=[0.0, 2700.0], late_rank=1, late_ms=10.0, layout=layout)
    here = analyze_json(str(tmp_path), *extra)
    assert any(f["rule"] == "straggler" and f["ranks"][0] == 1 for f in here["findings"])
    assert_same(here, analyze_json(str(tmp_path), *extra, "--dask", shared_cluster.address))


def test_summary_round_trip(tmp_path, ranks16, inproc16, shared_cluster):
    out = str(tmp_path / "run.gvsum")
    r = cli("analyze", ranks16, "--dask", shared_cluster.address, "--summary", out, "--json")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert_same(inproc16, made)
    assert_same(made, analyze_json(out))  # opened later, without the traces
    assert sorted(os.listdir(out)) == [
        "analysis.json",
        "collectives.parquet",
        "host_ops.parquet",
        "kernels.parquet",
        "manifest.json",
        "profiles.parquet",
        "steps.parquet",
    ]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temporary folder left
    info = cli("info", out, "--json")
    assert info.returncode == 0, info.stderr
    s = json.loads(info.stdout)
    assert s["format"] == "gvsum" and len(s["ranks"]) == 16 and s["findings"] == len(made["findings"])
    import duckdb

    steps = duckdb.sql(f"SELECT rank, step, wait_ns FROM '{out}/steps.parquet' ORDER BY rank, step").fetchall()
    want = [(r["rank"], st["step"], st["wait_ns"]) for r in made["ranks"] for st in r["steps"]]
    assert steps == want
    # written again in place, and in one process too: the same answer
    r = cli("analyze", ranks16, "--summary", out, "--json")
    assert r.returncode == 0, r.stderr
    assert_same(inproc16, analyze_json(out))
    text = cli("analyze", out)
    assert text.returncode == 0 and "GPU utilization" in text.stdout


def test_map_and_reduce_in_process_equal_the_whole_trace(tmp_path):
    """No cluster: the same map per file and reduce, one file after the other, against the
    analysis of the trace read whole (ranks claimed twice numbered as one session numbers them)."""
    from gpuviewer.scale.many import analyze_many

    job = tmp_path / "job"
    job.mkdir()
    for name, src in (
        ("a_rank0.json.gz", ("ddp", "ddp_rank0.json.gz")),
        ("b_rank0.json.gz", ("ddp", "ddp_rank0.json.gz")),
        ("c.json.gz", ("ddp", "ddp_rank1.json.gz")),
    ):
        shutil.copy(trace_path("kineto", *src), job / name)
    from gpuviewer.model.plain import json_bytes

    for paths in ([str(job)], [trace_path("nsys", "nsys_ddp.sqlite"), trace_path("nsys", "nsys_single.sqlite")]):
        res = analyze_many(paths)
        got = json.loads(json_bytes(res.analysis.to_json()))
        assert_same(analyze_json(*paths), got)
        assert [r["rank"] for r in got["ranks"]] == [0, 1, 2]


def test_without_dask_one_clear_line(tmp_path):
    code = (
        "import sys; sys.modules['distributed'] = None\n"
        "from gpuviewer.app.cli import main\n"
        f"sys.exit(main(['analyze', {trace_path('kineto', 'ddp')!r}, '--dask']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=HANG_S)
    assert r.returncode == 2
    assert r.stderr.strip() == "gpuviewer: --dask needs dask.distributed: pip install gpuviewer[cluster]"


def test_a_part_leaves_its_process_without_the_trace():
    """A rank's map pickles as its tables (the lazy ones computed on the way), never the events."""
    import pickle

    from gpuviewer.analysis.findings import analyze
    from gpuviewer.io.comm_args import collective_args
    from gpuviewer.session import open_session

    trace = open_session([trace_path("kineto", "ddp_clean")])
    a = analyze(trace, collective_args(trace), keep_parts=True)
    part = a.parts[1]
    blob = pickle.dumps(part)
    assert b"Trace" not in blob and len(blob) < len(trace) * 8  # far smaller than one column
    back = pickle.loads(blob)
    for name in ("gpu_names", "host_names", "host_explain", "profile", "op_stats"):
        assert pickle.dumps(back.table(name)) == pickle.dumps(part.table(name)), name


def test_a_rank_read_in_part_is_said_as_without_dask(tmp_path, shared_cluster):
    """A rank file cut short in the middle is read up to the cut, by a worker as in one process;
    the reader's warning reaches the terminal in both (it did only in `info`)."""
    job = tmp_path / "job"
    job.mkdir()
    shutil.copy(trace_path("kineto", "ddp_clean", "ddp_clean_rank0.json.gz"), job / "rank0.json.gz")
    data = open(trace_path("kineto", "ddp_clean", "ddp_clean_rank1.json.gz"), "rb").read()
    (job / "rank1.json.gz").write_bytes(data[: len(data) * 3 // 4])
    info = cli("info", str(job), "--json", "--no-cache")
    assert info.returncode == 0, info.stderr
    cut = [w for w in json.loads(info.stdout)["warnings"] if "cut short" in w]
    assert len(cut) == 1 and "rank1.json.gz" in cut[0], cut
    for extra in ([], ["--dask", shared_cluster.address]):
        r = cli("analyze", str(job), "--json", "--no-cache", *extra)
        assert r.returncode == 0, r.stderr[-2000:]
        assert f"gpuviewer: warning: {cut[0]}" in r.stderr.splitlines(), (extra, r.stderr[-2000:])
        json.loads(r.stdout)
    # a summary written from it says it again when analysed (the run that wrote it said it)
    summ = tmp_path / "job.gvsum"
    assert cli("analyze", str(job), "--no-cache", "--summary", str(summ)).returncode == 0
    again = cli("analyze", str(summ))
    assert again.returncode == 0 and f"gpuviewer: warning: {cut[0]}" in again.stderr.splitlines(), again.stderr


def test_a_capture_without_steps_rates_nothing_high_with_dask_too(shared_cluster):
    """h100_2gpu_1s marks no steps: in one process no finding is high (one capture does not show a
    steady state); a review found `--dask` still printed [high] copy_bound and low utilization,
    the rule being kept in the session layer a Dask run does not pass through. It is in the
    reduce now. The copies are still found, at the same figures."""
    from conftest import compat_path, flat_findings

    path = compat_path("GindaChen__nsys-ai", "h100_2gpu_1s.sqlite")
    r = cli("analyze", path, "--dask", shared_cluster.address, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    sev = {f["rule"]: f["severity"] for f in flat_findings(got["findings"])}
    assert sev.get("copy_bound") == "medium" and "high" not in sev.values(), sev
    here = json.loads(run_cli_once("analyze", path, "--json").stdout)
    (a,) = [f for f in got["findings"] if f["rule"] == "copy_bound"]
    (b,) = [f for f in here["findings"] if f["rule"] == "copy_bound"]
    assert a["title"] == b["title"]
