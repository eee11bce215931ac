"""A bounded memo for the hot path: a dict that is emptied when it is full.

The request path remembers a few things that repeat from request to request
(a socket peer's parsed address, a path's rate-limit quota, the JSON of a
cached answer, a log field's quoted form). Those keys are the client's to
choose, so the memo must be bounded; and a hit must cost no more than a dict
lookup, because it is taken on every request.

Emptying the whole memo when it is full, rather than evicting the least
recently used entry, keeps both the hit and the insert free of bookkeeping:
the working set of a busy client is back after a handful of misses. Where
recency matters and a function is pure, ``functools.lru_cache`` is the better
tool (it is in C and never remembers an exception).

A memo holds only what is put in it: answers, never failures (a caller
remembers a value after computing it, and an exception leaves nothing
behind), and only immutable values, since every later hit shares the object.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V]):
    """At most ``capacity`` entries; storing one more first empties the memo.

    Lookups are the dict's own (``get``, ``[]``, ``in``); storing goes
    through ``memo[key] = value``, the one place the bound is kept."""

    __slots__ = ("capacity",)

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a memo must hold at least one entry")
        super().__init__()
        self.capacity = capacity

    def __setitem__(self, key: K, value: V, /) -> None:
        if len(self) >= self.capacity:
            self.clear()
        super().__setitem__(key, value)
