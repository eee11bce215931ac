"""Manners towards the RDAP registries within one batch of lookups (docs/API.md#profile-and-batch).

A :class:`RegistryGate` lives as long as one batch; the RDAP capability holds :meth:`slot` of a host while it
talks to it, asks :meth:`check` before every request (a redirect included), and calls :meth:`refused` on a 429.
"""

from __future__ import annotations

import asyncio

from ipintel.errors import UpstreamError

# RDAP lookups under way at once per registry host (the one the bootstrap names): a registry's limit per source
# address (docs/API.md#profile-and-batch) is shared by a fleet behind one NAT, so a batch of a thousand addresses
# must not become a thousand simultaneous requests to one registry.
PER_HOST_IN_FLIGHT = 2


class RegistryBackedOff(UpstreamError):
    """A registry answered 429 earlier in this batch, so it is not asked again (502 ``upstream_error``)."""

    def __init__(self, host: str) -> None:
        super().__init__(f"{host} is rate limiting us (HTTP 429); it is not asked again in this batch")


class RegistryGate:
    """The in-flight bound per registry host and the hosts that answered 429, for one batch."""

    def __init__(self, per_host: int = PER_HOST_IN_FLIGHT) -> None:
        self.per_host = per_host
        self._slots: dict[str, asyncio.Semaphore] = {}
        self.backed_off: set[str] = set()

    def slot(self, host: str) -> asyncio.Semaphore:
        """Hold this while a lookup that starts at ``host`` is under way."""
        self.check(host)
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = asyncio.Semaphore(self.per_host)
        return slot

    def check(self, host: str) -> None:
        """Raise :class:`RegistryBackedOff` when ``host`` answered 429 earlier in the batch."""
        if host in self.backed_off:
            raise RegistryBackedOff(host)

    def refused(self, host: str) -> None:
        """``host`` answered 429: nobody in this batch asks it again."""
        # Asking a registry again right after its 429 only prolongs the refusal.
        self.backed_off.add(host)
