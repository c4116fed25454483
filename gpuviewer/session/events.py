"""Plain events for Qt-free objects (napari's EmitterGroup, much smaller): a name, callbacks
that take keyword arguments, called in the thread that emits. The window's controller turns
them into Qt signals; tests and notebooks connect plain functions."""

from __future__ import annotations

from collections.abc import Callable


class Events:
    def __init__(self, *names: str) -> None:
        self._subs: dict[str, list[Callable[..., None]]] = {n: [] for n in names}

    def connect(self, name: str, fn: Callable[..., None]) -> Callable[..., None]:
        self._known(name).append(fn)
        return fn

    def disconnect(self, name: str, fn: Callable[..., None]) -> None:
        subs = self._known(name)
        if fn in subs:
            subs.remove(fn)

    def emit(self, name: str, **payload) -> None:
        for fn in list(self._known(name)):
            fn(**payload)

    def _known(self, name: str) -> list:
        try:
            return self._subs[name]
        except KeyError:
            # a typo in an event name would otherwise be a subscriber that never hears anything
            raise KeyError(f"no event {name!r}; known: {', '.join(self._subs)}") from None
