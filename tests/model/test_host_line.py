"""The rank line's host split (model/fmt.utilization_line): the part blocked on a full launch queue
is said only where the run had one, and never as '0%'."""

from gpuviewer.model.fmt import utilization_line


def _row(queue: float) -> dict:
    rest = (1.0 - queue) / 4
    host = {"framework": rest, "launch": rest, "queue": queue, "sync": rest, "idle": rest}
    return {"gpu_utilization": 0.9, "host_breakdown": host}


def test_the_queue_part_is_said_only_where_it_prints_as_a_share():
    # 0.005 is a share analyze --json gives (it rounds them to 4 places) and prints as 0%
    for q in (0.0, 0.0049, 0.005, 0.0051, 0.0149, 0.67):
        line = utilization_line(_row(q))
        printed = f"{q:.0%}"
        assert ("blocked on a full launch queue" in line) == (printed != "0%"), (q, line)
        assert "blocked on a full launch queue 0%" not in line, line
        if printed != "0%":
            assert f"blocked on a full launch queue {printed}" in line, line


def test_a_rank_without_gpu_work_says_so_rather_than_zero_of_everything():
    """A CPU-only capture (lighttransport's profile.sqlite, HTA's cpu_only rank) has no GPU time
    to share out: 'GPU utilization 0% (compute); ... idle 0%' contradicted itself."""
    none = {"compute": 0.0, "nccl_transfer": 0.0, "nccl_wait": 0.0, "copy": 0.0, "idle": 0.0, "busy": 0.0}
    line = utilization_line({"gpu_utilization": 0.0, "utilization_breakdown": none, "host_breakdown": {"idle": 1.0}})
    assert line == "no GPU work on record; host: no op recorded 100%", line
    idle = dict(none, idle=1.0)  # kernels elsewhere in the capture, none in the steps: idle, said so
    line = utilization_line({"gpu_utilization": 0.0, "utilization_breakdown": idle})
    assert line.startswith("GPU utilization 0% (compute);") and "idle 100%" in line, line
