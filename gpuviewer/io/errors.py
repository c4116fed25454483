"""Errors a reader raises for bad input: one clear sentence, shown without a traceback."""


class TraceError(Exception):
    """The input cannot be read as a trace. str(e) names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Cancelled(Exception):
    """The user cancelled a load."""


def unexpected(path: str, e: BaseException) -> TraceError:
    """A reader failed in a way it did not foresee: tell the user what that means for them
    (the Python error text is for --debug, not for the message)."""
    if isinstance(e, MemoryError):
        return TraceError(path, "not enough memory to read it (close other programs, or open fewer "
                                "ranks at once)")
    if isinstance(e, RecursionError):
        return TraceError(path, "nested too deeply to read (a damaged or hostile file?)")
    if isinstance(e, UnicodeError):
        return TraceError(path, "holds text that is not valid UTF-8 where the format requires it")
    return TraceError(path, "cannot read it: a value of an unexpected type or shape (a damaged file, or a "
                            "producer version this program does not know); --debug shows where")


def file_names(files: list[str]) -> str:
    """Files for a message: all of a few, the first two and a count of many."""
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]}, {files[1]} and {len(files) - 2} more files"
