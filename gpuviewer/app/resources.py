"""Where the files of resources/ are at run time: in a PyInstaller bundle, in a source checkout,
or installed under <prefix>/share/gpuviewer by the wheel."""

from __future__ import annotations

import os
import sys


def resources_dir() -> str | None:
    candidates = []
    if getattr(sys, "frozen", False):
        candidates.append(os.path.join(getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)), "resources"))
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates.append(os.path.join(here, "resources"))
    candidates.append(os.path.join(sys.prefix, "share", "gpuviewer"))
    for c in candidates:
        if os.path.exists(os.path.join(c, "linux", "gpuviewer.desktop")):
            return c
    return None
