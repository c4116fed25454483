"""The one door into the core: a Session is what the command line, reports, notebooks and the
window hold of an opened set of traces. Qt-free; widgets, render and export reach the readers and
the analysis through it.

  opening.py   open_session: read the files, find the hosts, align their clocks
  session.py   Session: the trace, its analysis, view, notes and events, the query tables
  view.py      View: what the user is looking at (range, lanes, selection, search, highlight)
  actions.py   what a user does to a session, in the parts Session is composed of (view, notes,
               topology; each change announced as an event)
  events.py    plain events (the window's controller turns them into Qt signals)
  notes.py     the annotations: the sidecar, saves merged with other processes
  analysis.py  the analysis of an opened session (readers' arguments handed to the analysis)
  summary.py   a session summary (.gvsum) opened as a Session
"""

from .opening import align_clocks, alignment_line, alignment_text, open_session, set_hosts
from .session import Session
from .view import View

__all__ = ["Session", "View", "open_session", "set_hosts", "align_clocks", "alignment_text", "alignment_line"]
