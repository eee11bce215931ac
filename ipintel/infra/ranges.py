"""Address-range matching that stays fast with hundreds of thousands of prefixes: each list of published
prefixes (``3.2.34.0/26``, ``2600:1f14::/35``) becomes sorted, disjoint integer intervals per IP version, each
with a tag set, and a lookup is one :func:`bisect.bisect_right`.
"""

from __future__ import annotations

import socket
from bisect import bisect_right
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any, Generic, TypeVar

from ipintel.addresses import IPAddress

T = TypeVar("T", bound=Hashable)

_BITS = {4: 32, 6: 128}
_EMPTY: frozenset[Any] = frozenset()  # shared by every index: one empty answer


class PrefixError(ValueError):
    """Text that is not an address or a CIDR prefix."""


def parse_prefix(text: str) -> tuple[int, int, int, int]:
    """``"3.2.34.0/26"`` -> ``(version, first, last, prefix_length)`` as integers.

    A bare address is its own /32 or /128; host bits are cleared, as
    ``ipaddress.ip_network(strict=False)`` would, but several times faster
    (``inet_pton`` does the parsing in C), which matters when a snapshot of
    300k lines is loaded at start."""
    address, slash, length_text = text.strip().partition("/")
    if ":" in address:
        version, family = 6, socket.AF_INET6
    else:
        version, family = 4, socket.AF_INET
    try:
        value = int.from_bytes(socket.inet_pton(family, address), "big")
    except (OSError, ValueError):
        raise PrefixError(f"{text!r} is not an address or prefix") from None
    bits = _BITS[version]
    if slash:
        if not length_text.isdigit() or len(length_text) > 3:
            raise PrefixError(f"{text!r} has an invalid prefix length")
        length = int(length_text)
        if length > bits:
            raise PrefixError(f"{text!r} has a prefix length over {bits}")
    else:
        length = bits
    host_mask = (1 << (bits - length)) - 1
    first = value & ~host_mask
    return version, first, first | host_mask, length


class RangeIndex(Generic[T]):
    """Sorted disjoint intervals ``[start, end]`` of one IP version, each with a tag set. A verdict asks up to a
    dozen lists per request: a linear scan would cost milliseconds and a radix tree in pure Python a dict hop per
    bit, where a bisect is ``O(log n)``, about a microsecond at 300k intervals.

    Immutable once built: a feed refresh builds a new index and swaps the
    reference, so lookups in flight never see a half-built one."""

    __slots__ = ("_ends", "_starts", "_tags")

    def __init__(self, starts: list[int], ends: list[int], tags: list[frozenset[T]]) -> None:
        self._starts = starts
        self._ends = ends
        self._tags = tags

    @classmethod
    def build(cls, ranges: Iterable[tuple[int, int, T]]) -> RangeIndex[T]:
        """Index ``(first, last, tag)`` triples (inclusive bounds; overlaps allowed)."""
        by_tag: dict[T, list[tuple[int, int]]] = {}
        for first, last, tag in ranges:
            if first > last:
                raise ValueError(f"empty range {first}..{last}")
            by_tag.setdefault(tag, []).append((first, last))
        merged = {tag: _merge(spans) for tag, spans in by_tag.items()}
        if len(merged) == 1:  # the common case: no overlap resolution needed
            ((tag, spans),) = merged.items()
            only = frozenset((tag,))
            return cls([s for s, _ in spans], [e for _, e in spans], [only] * len(spans))
        # Overlapping ranges with different tags (a feed's single address inside its prefix) are split into
        # elementary segments tagged with the union: a lookup returns every tag that applies from one interval.
        return cls(*_sweep(merged))

    def lookup(self, value: int) -> frozenset[T]:
        """The tags of the ranges holding ``value`` (empty when none does)."""
        i = bisect_right(self._starts, value) - 1
        if i >= 0 and value <= self._ends[i]:
            return self._tags[i]
        return _EMPTY

    def intervals(self) -> Iterable[tuple[int, int, frozenset[T]]]:
        """Every ``(start, end, tags)`` interval, in order (to combine several indexes into one)."""
        return zip(self._starts, self._ends, self._tags, strict=True)

    def __len__(self) -> int:
        return len(self._starts)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Coalesce overlapping and adjacent intervals (after sorting)."""
    spans.sort()
    out: list[tuple[int, int]] = []
    cur_start, cur_end = spans[0]
    for start, end in spans[1:]:
        if start <= cur_end + 1:
            if end > cur_end:
                cur_end = end
        else:
            out.append((cur_start, cur_end))
            cur_start, cur_end = start, end
    out.append((cur_start, cur_end))
    return out


def _sweep(merged: dict[T, list[tuple[int, int]]]) -> tuple[list[int], list[int], list[frozenset[T]]]:
    """Split intervals of several tags into elementary segments labelled with
    the set of tags covering them; adjacent segments with equal sets are joined."""
    events: list[tuple[int, int, T]] = []  # (position, +1 start / -1 end, tag)
    for tag, spans in merged.items():
        for start, end in spans:
            events.append((start, 1, tag))
            events.append((end + 1, -1, tag))
    events.sort(key=lambda e: e[0])
    active: Counter[T] = Counter()
    interned: dict[frozenset[T], frozenset[T]] = {}
    starts: list[int] = []
    ends: list[int] = []
    tags: list[frozenset[T]] = []
    i, n = 0, len(events)
    while i < n:
        position = events[i][0]
        while i < n and events[i][0] == position:
            _, delta, tag = events[i]
            active[tag] += delta
            if not active[tag]:
                del active[tag]
            i += 1
        if tags and ends[-1] == -1:  # close the open segment just before this position
            ends[-1] = position - 1
        if active:
            current = frozenset(active)
            current = interned.setdefault(current, current)
            if tags and tags[-1] is current and ends[-1] == position - 1:
                ends[-1] = -1  # extend the previous segment: same tags, contiguous
            else:
                starts.append(position)
                ends.append(-1)
                tags.append(current)
    return starts, ends, tags


class AddressRanges(Generic[T]):
    """An IPv4 and an IPv6 :class:`RangeIndex` behind one ``lookup(ip)``."""

    __slots__ = ("prefixes", "v4", "v6")

    def __init__(self, v4: RangeIndex[T], v6: RangeIndex[T], prefixes: int) -> None:
        self.v4 = v4
        self.v6 = v6
        self.prefixes = prefixes  # entries as published, before merging

    @classmethod
    def build(cls, entries: Iterable[tuple[int, int, int, T]]) -> AddressRanges[T]:
        """From ``(version, first, last, tag)`` quadruples, as :func:`parse_prefix` gives plus a tag."""
        v4: list[tuple[int, int, T]] = []
        v6: list[tuple[int, int, T]] = []
        for version, first, last, tag in entries:
            (v4 if version == 4 else v6).append((first, last, tag))
        return cls(RangeIndex.build(v4), RangeIndex.build(v6), len(v4) + len(v6))

    def lookup(self, ip: IPAddress) -> frozenset[T]:
        return (self.v4 if ip.version == 4 else self.v6).lookup(int(ip))

    def __len__(self) -> int:
        return len(self.v4) + len(self.v6)
