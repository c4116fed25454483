"""Nesting depth of the slices of one lane.

Slices are sorted by (start, -duration). Properly nested slices get their depth from one
vectorised formula; lanes where slices partially overlap (concurrent kernels on a stream,
unmatched B/E) fall back to a stack, which never drops a slice: each one gets the first free row.

A slice that never ended (it runs to the lane's last end, where the profiler stopped) although the
slice it began in ended before is closed where that one ends: PyTorch's Python tracer writes a
frame still open at the stop as ending there, and fsdp's 78 such `__exit__` frames, begun inside
the steps, pushed every later op of their thread one row deeper each (lanes 415 rows deep, the ops'
own times wrong: lm_step's 77 ms "own" time was its callees' under those frames). Its end is at
most its caller's (a frame returns before its caller does).
"""

from __future__ import annotations

import numpy as np

from .categories import Cat


def _vector_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    # depth_i = slices before i (in sort order) that have not ended when i starts.
    ends_sorted = np.sort(end)
    return np.arange(len(start)) - np.searchsorted(ends_sorted, start, side="right")


def _has_collision(start: np.ndarray, end: np.ndarray, depth: np.ndarray) -> bool:
    if len(start) < 2:
        return False
    # by depth, then start: the slices come sorted by start, so a stable sort by depth alone
    # is lexsort((start, depth)); a radix sort when depths fit 16 bits (one pass, not three)
    key = depth.astype(np.uint16) if int(depth.max()) < 1 << 16 else depth
    order = np.argsort(key, kind="stable")
    d, s, e = depth[order], start[order], end[order]
    same = d[1:] == d[:-1]
    return bool(np.any(same & (e[:-1] > s[1:])))


UNENDED_TOL_NS = 1_000  # an end within this of the lane's last end: the profiler's stop (its ts are in µs)


def lane_depth(start: np.ndarray, dur: np.ndarray, cat: np.ndarray | None = None) -> np.ndarray:
    """Each slice's depth; dur (a view of the column) is shortened in place for a Python frame
    (cat: the slices' categories) that never ended and began in one that did (module docstring)."""
    end = start + dur
    if len(start) < 2 or not np.any(end[:-1] > start[1:]):
        # no slice starts before the one before it ends (a GPU stream, most launch threads):
        # all at depth 0, found in one pass rather than a sort and a search
        return np.zeros(len(start), np.int64)
    depth = _vector_depth(start, end)
    if len(depth) and depth.min() < 0:
        depth = np.maximum(depth, 0)
    if _has_collision(start, end, depth):
        frames = (cat == Cat.PYTHON) if cat is not None else None
        depth, closed = _open_stack_depth(start, end, frames)
        for i, e in closed:
            dur[i] = e - int(start[i])
    return depth


def _open_stack_depth(
    start: np.ndarray, end: np.ndarray, frames: np.ndarray | None = None
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Each slice on the first row above the slices still open around it (ones that began before
    it and end at or after its end) whose last slice has ended: rows never collide, and a
    slice sits under what encloses it. Rows of slices that ended under one still open are used
    again: fsdp's ProfilerStep#N begins inside profiler.step()'s frames and ends after them, a
    chain that kept four more dead rows a step under every later op (thread lanes 60 rows deep
    where the stacks nest 37). Also the Python frames (frames: a mask) closed where the slice they
    began in ends: (position, end)."""
    out: list[int] = []  # a list, not numpy item assignment: a quarter less time a slice
    stack: list[int] = []  # ends of the slices open, innermost last (one not enclosing may sit on top)
    rows: list[int] = []  # their rows
    owner: list[int] = []  # their positions
    top: list[int] = []  # the highest row at or under each stack position
    row_end: list[int] = []  # per row, the end of the last slice placed on it
    closed: list[tuple[int, int]] = []
    last = int(end.max()) - UNENDED_TOL_NS if len(end) else 0
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        while stack and stack[-1] <= s:
            stack.pop()
            rows.pop()
            owner.pop()
            top.pop()
        if stack and e > stack[-1] and e >= last and frames is not None and frames[i] and frames[owner[-1]]:
            # a frame that never ended, begun in a frame that did (a frame returns before its
            # caller; not so a range such as ProfilerStep#4, which ends inside profiler.step())
            e = stack[-1]
            closed.append((i, e))
        # above every open slice enclosing this one: from the top down, until no slice below
        # sits higher (top[k]: the highest row at or under k; a row used again may sit on top
        # of the stack over a deeper one). Nested slices stop at the top one.
        r = 0
        k = len(stack) - 1
        dead = False
        while k >= 0 and top[k] >= r:
            if stack[k] <= s:
                dead = True  # ended under one still open: dropped below, once
            elif stack[k] >= e and rows[k] >= r:
                r = rows[k] + 1
            k -= 1
        if dead:
            # starts only grow: a slice that has ended never encloses a later one. Dropping them
            # keeps a chain of slices each overlapping the next from walking the whole chain a
            # slice (32k such slices: 15 s, not 0.02; helper-114)
            keep = [j for j, en in enumerate(stack) if en > s]
            stack[:] = [stack[j] for j in keep]
            rows[:] = [rows[j] for j in keep]
            owner[:] = [owner[j] for j in keep]
            hi = -1
            for j, rw in enumerate(rows):
                hi = rw if rw > hi else hi
                top[j] = hi
            del top[len(rows) :]
        while r < len(row_end) and row_end[r] > s:
            r += 1
        if r == len(row_end):
            row_end.append(e)
        else:
            row_end[r] = e
        out.append(r)
        stack.append(e)
        rows.append(r)
        owner.append(i)
        top.append(max(r, top[-1]) if top else r)
    return np.array(out, dtype=np.int64), closed
