"""Errors a reader raises for bad input: one clear sentence, shown without a traceback."""

from ..errors import GpuviewerError, unexpected_problem


class TraceError(GpuviewerError):
    """The input cannot be read as a trace. str(e) names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Cancelled(GpuviewerError):
    """The user cancelled a load."""


def unexpected(path: str, e: BaseException) -> TraceError:
    """A reader failed in a way it did not foresee: tell the user what that means for them
    (the Python error text is for --debug, not for the message)."""
    return TraceError(path, unexpected_problem(e))


def file_names(files: list[str]) -> str:
    """Files for a message: all of a few, the first two and a count of many."""
    if len(files) <= 3:
        return ", ".join(files)
    return f"{files[0]}, {files[1]} and {len(files) - 2} more files"
