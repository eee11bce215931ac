"""Counters of upstream calls, kept by the clients that make them (HTTP, DNS).

The metrics endpoint reads these instead of every client importing
prometheus: clients stay free of exporter concerns, and tests can assert on
plain numbers. ``observers`` receive every call as it happens (the metrics
module hangs its latency histogram there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

Observer = Callable[[str, str, float], None]


class UpstreamStats:
    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # (source, outcome) -> count
        self.observers: list[Observer] = []

    def record(self, source: str, outcome: str, seconds: float) -> None:
        """``outcome``: ``ok``, ``error``, ``timeout``, or a source-specific word (``nxdomain``)."""
        self.calls[(source, outcome)] += 1
        for observer in self.observers:
            observer(source, outcome, seconds)
