"""The analysis as a report's parts (a step's cells, where a finding is, the Markdown text),
through the session package: export/ builds reports from these, never from analysis/ itself."""

from __future__ import annotations

from ..analysis.report_md import to_markdown
from ..analysis.report_parts import step_cells, where

__all__ = ["step_cells", "to_markdown", "where"]
