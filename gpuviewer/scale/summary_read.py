"""A summary reads only itself: every name its manifest gives (analysis.json, the tables) is a
plain file name inside the summary folder: no folder part, no `..`, not absolute, no symbolic
link leading out, a regular file (never a FIFO, a device or /dev/zero), of bounded size. A
manifest that points elsewhere is refused without opening the target.

The rank files a manifest lists are the traces the summary was written from, outside it by
design; they are opened only when the user expands a rank, through the trace readers and their
own checks (io/)."""

from __future__ import annotations

import os
import stat

from ..io.bounded import NotRegular, TooLarge, read_regular
from ..io.limits import max_summary_json_bytes


def inside(folder: str, name: str, what: str, error) -> str:
    """The path of `name` in the summary `folder`, or error(one line) when the manifest names
    something outside it or something that is not a regular file. Nothing is opened."""
    bad = (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "\0" in name
        or "/" in name
        or "\\" in name
        or os.path.isabs(name)
        or os.path.basename(name) != name
    )
    if bad:
        raise error(
            f"{folder}: the summary's manifest names its {what} {name!r}, not a file inside the summary; not read", True
        )
    path = os.path.join(folder, name)
    real_folder = os.path.realpath(folder)
    if os.path.dirname(os.path.realpath(path)) != real_folder:
        raise error(f"{folder}: the summary's {what} {name!r} is a link out of the summary; not read", True)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{folder}: the summary's {what} ({name}) is missing", True) from None
    except OSError as e:
        raise error(f"{folder}: the summary's {what} ({name}) cannot be read ({e.strerror})", True) from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{folder}: the summary's {what} ({name}) is not a regular file; not read", True)
    return path


def read_json(folder: str, name: str, what: str, error):
    """The JSON value of the file `name` inside the summary (bounded, never blocking)."""
    import msgspec

    path = inside(folder, name, what, error)
    limit = max_summary_json_bytes()
    try:
        data, _st = read_regular(path, limit)
    except OSError as e:
        raise error(f"{folder}: the summary's {what} ({name}) cannot be read ({e.strerror})", True) from None
    except NotRegular:
        raise error(f"{folder}: the summary's {what} ({name}) is not a regular file; not read", True) from None
    except TooLarge as e:
        if e.size is None:
            raise error(f"{folder}: the summary's {what} ({name}) is too large (over {limit:,} bytes)", True) from None
        raise error(
            f"{folder}: the summary's {what} ({name}) is too large ({e.size:,} bytes > "
            f"{limit:,}; raise GPUVIEWER_MAX_SUMMARY_JSON_BYTES to read it)",
            True,
        ) from None
    # a manifest that cannot be decoded but names the summary format is a damaged summary (said
    # as such), not a folder of traces
    ours = what != "manifest" or b'"gvsum"' in data
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise error(f"{folder}: the summary's {what} ({name}) is not valid JSON ({e})", ours) from None
    except RecursionError:
        raise error(f"{folder}: the summary's {what} ({name}) is not valid: nested too deeply", ours) from None
