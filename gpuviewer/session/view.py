"""What the user is looking at in a session: the time range, the lane layout, the selection, an
area, the search and its matches, a highlighted finding. Plain data; the actions change it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.layout import ViewState


@dataclass
class View:
    """What the user is looking at. Times are absolute ns on the session's axis."""

    range: tuple[int, int] | None = None
    lanes: ViewState = field(default_factory=ViewState)  # shared with the timeline view's layout
    selected: int | None = None
    area: tuple[int, int, list[int]] | None = None
    search: str = ""
    regex: bool = False
    search_error: str = ""
    mask: np.ndarray | None = None  # per event: matches the search
    matches: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    match_pos: int = -1
    highlight: tuple[int, int, set] | None = None

    def to_json(self) -> dict:
        """What the sidecar keeps of the view."""
        return {
            "range": [int(self.range[0]), int(self.range[1])] if self.range else None,
            "lanes": self.lanes.to_json(),
        }
