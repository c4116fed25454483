"""The one family of errors gpuviewer explains to its user, and the one sentence it says for any
error while opening or reading something (`describe`): the command line, the window, its loader
process and reports all say the same words.

Every error class of gpuviewer derives from GpuviewerError: str(e) is already that sentence, one
line naming the file or folder it is about. Anything else (a bug, or an input no check foresaw)
is described in the user's terms, never as a Python exception's name; --debug shows the
traceback. This module imports nothing of gpuviewer: every layer may use it."""

from __future__ import annotations


class GpuviewerError(Exception):
    """An error gpuviewer explains: str(e) is one sentence naming what it is about."""


def session_name(paths) -> str:
    """A session of files in a message: the file, or the first and how many more."""
    paths = [str(p) for p in ([paths] if isinstance(paths, str) else paths)] or ["(nothing)"]
    return paths[0] if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more"


def unexpected_problem(e: BaseException) -> str:
    """What an error no check foresaw means for the user (the problem, without the file)."""
    if isinstance(e, MemoryError):
        return "not enough memory to read it (close other programs, or open fewer ranks at once)"
    if isinstance(e, RecursionError):
        return "nested too deeply to read (a damaged or hostile file?)"
    if isinstance(e, UnicodeError):
        return "holds text that is not valid UTF-8 where the format requires it"
    if isinstance(e, PermissionError):
        return "cannot read it: permission denied"
    if isinstance(e, FileNotFoundError):
        return "no such file or folder"
    from concurrent.futures.process import BrokenProcessPool  # here: loaded only on an error

    if isinstance(e, BrokenProcessPool):  # a decode worker killed (out of memory, kill -9): the file is not at fault
        return "a reading process stopped without an answer (killed, or out of memory?); free memory and open it again"
    return (
        "cannot read it: a value of an unexpected type or shape (a damaged file, or a producer "
        "version this program does not know); --debug shows where"
    )


def describe(error: BaseException, paths=()) -> str:
    """The one line to show for `error` met while opening or reading `paths`."""
    if isinstance(error, GpuviewerError):
        return str(error)
    return f"{session_name(paths)}: {unexpected_problem(error)}"
