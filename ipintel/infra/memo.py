"""A bounded memo for the hot path: a dict that is emptied when it is full, for what repeats from request to
request (a socket peer's parsed address, a path's rate-limit quota, the JSON of a cached answer, a log field's
quoted form). Where recency matters and a function is pure, ``functools.lru_cache`` is the better tool (it is in
C and never remembers an exception).
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V]):
    """At most ``capacity`` entries; storing one more first empties the memo. The keys are the client's to
    choose, hence the bound; a hit is taken on every request, hence no more than a dict lookup.

    Lookups are the dict's own (``get``, ``[]``, ``in``); storing goes
    through ``memo[key] = value``, the one place the bound is kept. It holds only what is put in it: answers,
    never failures (an exception leaves nothing behind), and only immutable values, since every later hit shares
    the object."""

    __slots__ = ("capacity",)

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a memo must hold at least one entry")
        super().__init__()
        self.capacity = capacity

    def __setitem__(self, key: K, value: V, /) -> None:
        if len(self) >= self.capacity:
            # Emptied whole rather than evicting the least recently used entry: the hit and the insert stay free
            # of bookkeeping, and a busy client's working set is back after a handful of misses.
            self.clear()
        super().__setitem__(key, value)
