"""One error family (issue 29, step 4): every error gpuviewer explains derives from
gpuviewer.errors.GpuviewerError, and `describe` says one sentence for any error, in the user's
terms, the same in the CLI and the window."""

import ast
import os

from conftest import ROOT

from gpuviewer.errors import GpuviewerError, describe

# Raised and caught inside one module to steer its own control flow; never shown to a user.
INTERNAL = {
    "Fallback": "io/chrome_json.py: the fast decoder hands a file to the careful one",
    "Damaged": "io/cache_check.py: a cache entry found damaged is rebuilt, never reported as such",
    "TooManyObjects": "io/memsnap.py: turned into a TraceError naming the snapshot",
    "NotRegular": "io/bounded.py: each reader says in its own words that the file is not a regular file",
    "TooLarge": "io/bounded.py: each reader says in its own words that the file is over its limit",
    "_Pointer": "io/cache.py: an entry that points into an out-of-core session's entry, cut out by cache_slice, never reported",
}


def _error_classes():
    base = os.path.join(ROOT, "gpuviewer")
    for root, _dirs, files in os.walk(base):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(root, f)
                with open(p, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                for node in tree.body:
                    if isinstance(node, ast.ClassDef):
                        bases = [ast.unparse(b) for b in node.bases]
                        if any(b.endswith(("Error", "Exception")) or b in ("GpuviewerError",) for b in bases):
                            yield os.path.relpath(p, base), node.name


def test_every_error_class_is_of_the_family():
    import importlib

    found = list(_error_classes())
    assert len(found) >= 10
    for rel, name in found:
        if name in INTERNAL or name == "GpuviewerError":
            continue
        mod = importlib.import_module("gpuviewer." + rel[:-3].replace(os.sep, "."))
        assert issubclass(getattr(mod, name), GpuviewerError), f"{rel}: {name} is not a GpuviewerError"


def test_describe_is_one_line_in_the_users_terms():
    for e in (
        KeyError("ph"),
        TypeError("'NoneType' object is not subscriptable"),
        ValueError("x"),
        IndexError("list index out of range"),
        MemoryError(),
        RecursionError(),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
    ):
        line = describe(e, ["/data/run/rank0.json.gz", "/data/run/rank1.json.gz"])
        assert line.startswith("/data/run/rank0.json.gz and 1 more: ") and "\n" not in line
        assert type(e).__name__ not in line and "NoneType" not in line
    from gpuviewer.io.errors import TraceError

    assert describe(TraceError("/x.json", "not a trace"), ["/y"]) == "/x.json: not a trace"
