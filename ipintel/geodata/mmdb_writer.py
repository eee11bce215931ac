"""Write a MaxMind DB (``.mmdb``) from non-overlapping networks and their records.

Used at fetch time to turn a database published in another format (the ip-location-db AS table is CSV ranges)
into the one format the service reads.
"""

from __future__ import annotations

import bisect
import ipaddress
import struct
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

_METADATA_MARKER = b"\xab\xcd\xefMaxMind.com"
_EMPTY = -1  # a tree record that leads nowhere (no data for the addresses below it)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _control(type_id: int, size: int) -> bytes:
    """A data field's control byte(s): the type in the top three bits (or an extended type byte) and the size."""
    if size < 29:
        head, extra = size, b""
    elif size < 29 + 256:
        head, extra = 29, bytes([size - 29])
    elif size < 285 + 65536:
        head, extra = 30, (size - 285).to_bytes(2, "big")
    else:
        head, extra = 31, (size - 65821).to_bytes(3, "big")
    if type_id <= 7:
        return bytes([(type_id << 5) | head]) + extra
    return bytes([head, type_id - 7]) + extra


class Uint:
    """An unsigned integer written with a fixed type (16, 32 or 64 bits): the metadata's fields have fixed
    types, which the C reader checks, where a record's integers take the smallest type that holds them."""

    __slots__ = ("bits", "value")
    _TYPES: ClassVar[dict[int, int]] = {16: 5, 32: 6, 64: 9}

    def __init__(self, bits: int, value: int) -> None:
        self.bits, self.value = bits, value

    def encoded(self) -> bytes:
        raw = self.value.to_bytes((self.value.bit_length() + 7) // 8, "big")
        return _control(self._TYPES[self.bits], len(raw)) + raw


def encode(value: Any) -> bytes:
    """The MaxMind DB data-section encoding of ``value`` (str, bool, int >= 0, float, dict, list, :class:`Uint`)."""
    if isinstance(value, Uint):
        return value.encoded()
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return _control(2, len(raw)) + raw
    if isinstance(value, bool):
        return _control(14, int(value))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("negative integers are not written")
        raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
        type_id = 5 if value < 1 << 16 else 6 if value < 1 << 32 else 9 if value < 1 << 64 else 10
        return _control(type_id, len(raw)) + raw
    if isinstance(value, float):
        return _control(3, 8) + struct.pack(">d", value)
    if isinstance(value, Mapping):
        return _control(7, len(value)) + b"".join(encode(str(k)) + encode(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return _control(11, len(value)) + b"".join(encode(v) for v in value)
    raise TypeError(f"cannot encode {type(value).__name__}")


# The general-purpose writer on PyPI builds a Python object per tree node and took minutes for the 500,000
# ranges of an AS table; this tree is built from the sorted networks in one recursive pass (seconds).
class _Tree:
    """The search tree as two parallel lists of records: a node index, ``_EMPTY``, or ``-2 - data index``."""

    def __init__(self, starts: list[int], lengths: list[int], data: list[int]) -> None:
        self.starts, self.lengths, self.data = starts, lengths, data
        self.left: list[int] = []
        self.right: list[int] = []

    def _node(self) -> int:
        self.left.append(_EMPTY)
        self.right.append(_EMPTY)
        return len(self.left) - 1

    def build(self, lo: int, hi: int, depth: int, base: int) -> int:
        """The record for the subtree at ``depth`` covering ``base``..., holding networks ``lo:hi``."""
        if lo == hi:
            return _EMPTY
        if hi - lo == 1:
            length = self.lengths[lo]
            leaf = -2 - self.data[lo]
            if length == depth:
                return leaf
            # One network below: a chain of nodes down to it, without searching at every level.
            start = self.starts[lo]
            top = node = self._node()
            for bit_depth in range(depth, length - 1):
                child = self._node()
                if (start >> (127 - bit_depth)) & 1:
                    self.right[node] = child
                else:
                    self.left[node] = child
                node = child
            if (start >> (127 - (length - 1))) & 1:
                self.right[node] = leaf
            else:
                self.left[node] = leaf
            return top
        if self.lengths[lo] == depth:
            raise ValueError("overlapping networks")
        node = self._node()
        middle = base | (1 << (127 - depth))
        split = bisect.bisect_left(self.starts, middle, lo, hi)
        self.left[node] = self.build(lo, split, depth + 1, base)
        self.right[node] = self.build(split, hi, depth + 1, middle)
        return node


def write(
    path: Path,
    networks: Iterable[tuple[Network, Mapping[str, Any]]],
    *,
    database_type: str,
    description: str,
    build_epoch: int | None = None,
    languages: tuple[str, ...] = ("en",),
) -> int:
    """Write the database to ``path``; returns the number of networks. Networks must not overlap."""
    records: dict[bytes, int] = {}  # encoded record -> its index in the data section: each distinct record once
    entries: list[tuple[int, int, int]] = []
    for network, record in networks:
        encoded = encode(record)
        index = records.setdefault(encoded, len(records))
        # The tree is IPv6 with IPv4 at ::/96, the layout MaxMind's readers expect of a database that holds both
        # families (ip_version 6).
        if network.version == 4:
            entries.append((int(network.network_address), network.prefixlen + 96, index))
        else:
            entries.append((int(network.network_address), network.prefixlen, index))
    entries.sort()
    starts = [e[0] for e in entries]
    tree = _Tree(starts, [e[1] for e in entries], [e[2] for e in entries])
    del entries
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    root = tree.build(0, len(starts), 0, 0)
    if root < 0:  # an empty database still needs a root node
        root = tree._node()
    node_count = len(tree.left)

    offsets: list[int] = []
    position = 0
    for encoded in records:  # dicts keep insertion order: index i is the i-th record
        offsets.append(position)
        position += len(encoded)

    def pointer(record: int) -> int:
        if record == _EMPTY:
            return node_count
        if record >= 0:
            return record
        return node_count + 16 + offsets[-2 - record]

    highest = node_count + 16 + position
    record_size = 24 if highest < 1 << 24 else 28 if highest < 1 << 28 else 32
    with path.open("wb") as out:
        chunk = bytearray()
        for left, right in zip(tree.left, tree.right, strict=True):
            a, b = pointer(left), pointer(right)
            if record_size == 24:
                chunk += a.to_bytes(3, "big") + b.to_bytes(3, "big")
            elif record_size == 28:
                chunk += (a & 0xFFFFFF).to_bytes(3, "big")
                chunk.append(((a >> 24) << 4) | (b >> 24))
                chunk += (b & 0xFFFFFF).to_bytes(3, "big")
            else:
                chunk += a.to_bytes(4, "big") + b.to_bytes(4, "big")
            if len(chunk) > 1 << 20:
                out.write(chunk)
                chunk.clear()
        out.write(chunk)
        out.write(b"\x00" * 16)
        for encoded in records:
            out.write(encoded)
        out.write(_METADATA_MARKER)
        out.write(
            encode(
                {
                    "binary_format_major_version": Uint(16, 2),
                    "binary_format_minor_version": Uint(16, 0),
                    "build_epoch": Uint(64, int(build_epoch if build_epoch is not None else time.time())),
                    "database_type": database_type,
                    "description": {"en": description},
                    "ip_version": Uint(16, 6),
                    "languages": list(languages),
                    "node_count": Uint(32, node_count),
                    "record_size": Uint(16, record_size),
                }
            )
        )
    return len(starts)
