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
