"""Interval arithmetic (model/intervals.py, where the timeline's renderer can use it too)."""

from ..model.intervals import EMPTY, Intervals, clip, clipped_kept, gaps, intersect, length, lengths_in, subtract, union

__all__ = [
    "EMPTY",
    "Intervals",
    "clip",
    "clipped_kept",
    "gaps",
    "intersect",
    "length",
    "lengths_in",
    "subtract",
    "union",
]
