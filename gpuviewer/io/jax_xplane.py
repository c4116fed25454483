"""An XLA profile's `.xplane.pb` (an XSpace protobuf) into the trace JSON io/jax_trace.py reads,
with XLA's own converter (the `xprof` package, formerly `tensorboard-plugin-profile`) when it
is installed. Without it the file is refused with the one to open instead: jax.profiler writes
`<host>.trace.json.gz` beside every `.xplane.pb`."""

from __future__ import annotations

import os

from .errors import TraceError


def _converter():
    """xspace_to_tool_data(paths, tool, params) of whichever package is installed, or None."""
    for mod in ("xprof.convert.raw_to_tool_data", "tensorboard_plugin_profile.convert.raw_to_tool_data"):
        try:
            import importlib

            return importlib.import_module(mod).xspace_to_tool_data
        except (ImportError, AttributeError):
            continue
    return None


def convert_xplanes(files: list[str]) -> list[str]:
    """The session's files with each .xplane.pb replaced by its conversion (kept in the cache
    folder, never beside the input)."""
    out = []
    convert = None
    for f in files:
        if not f.lower().endswith(".xplane.pb"):
            out.append(f)
            continue
        convert = convert or _converter()
        if convert is None:
            raise TraceError(
                f,
                "an .xplane.pb needs XLA's converter (pip install xprof) to be read; "
                "open the .trace.json.gz that jax.profiler wrote beside it instead",
            )
        out.append(_convert_one(f, convert))
    return out


def _convert_one(path: str, convert) -> str:
    from .atomic import write_path
    from .cache import cache_root, key_for

    dest_dir = os.path.join(os.path.dirname(cache_root()), "xplane-export")
    os.makedirs(dest_dir, exist_ok=True)
    dest = os.path.join(dest_dir, key_for([path]) + ".trace.json")
    if os.path.exists(dest):
        return dest
    try:
        # "trace_viewer^": the older plugin asserts the '^' of xplane tools, xprof strips it;
        # no saved result, so that nothing is read from or written beside the input
        data, _content_type = convert([path], "trace_viewer^", {"use_saved_result": False})
    except Exception as e:  # noqa: BLE001 - the converter's own failure, said in one line
        raise TraceError(
            path,
            f"xprof could not convert it ({type(e).__name__}: {str(e)[:200]}); "
            "open the .trace.json.gz beside it instead",
        ) from None
    if not data:
        raise TraceError(path, "xprof converted it to nothing; open the .trace.json.gz beside it instead")
    raw = data.encode() if isinstance(data, str) else bytes(data)

    def produce(tmp: str) -> bool:
        with open(tmp, "wb") as fh:
            fh.write(raw)
        return True

    write_path(dest, produce)
    return dest
