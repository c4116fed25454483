"""Interned string table: names are stored once, events hold an int32 id."""

from __future__ import annotations


class Interner:
    def __init__(self, strings: list[str] | None = None) -> None:
        self.strings: list[str] = list(strings or [])
        self._index: dict[str, int] = {s: i for i, s in enumerate(self.strings)}

    def id(self, s: str) -> int:
        i = self._index.get(s)
        if i is None:
            i = self._index[s] = len(self.strings)
            self.strings.append(s)
        return i

    def ids(self, values) -> list[int]:
        """Intern many strings at once (a comprehension over a dict is the fast path)."""
        index, strings = self._index, self.strings
        out: list[int] = []
        append = out.append
        for s in values:
            i = index.get(s)
            if i is None:
                i = index[s] = len(strings)
                strings.append(s)
            append(i)
        return out

    def find(self, s: str) -> int | None:
        """The string's id, None where it was never interned."""
        return self._index.get(s)

    def __len__(self) -> int:
        return len(self.strings)
