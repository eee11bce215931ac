"""A clock tests move by hand, so lifetimes and refills are tested without sleeping."""

from __future__ import annotations


class FakeClock:
    """Monotonic seconds that only change when :meth:`advance` is called.

    Pass it wherever a ``clock`` is accepted (``create_app(clock=...)``,
    ``running_app(settings, clock=...)``, :class:`~ipintel.infra.cache.Cache`,
    :class:`~ipintel.infra.limiter.RateLimiter`)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a monotonic clock does not go back")
        self.now += seconds
