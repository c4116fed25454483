"""Errors a reader raises for bad input: one clear sentence, shown without a traceback."""


class TraceError(Exception):
    """The input cannot be read as a trace. str(e) names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class Cancelled(Exception):
    """The user cancelled a load."""
