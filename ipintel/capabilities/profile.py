"""Everything about an address in one call, and many addresses in one request (docs/API.md#profile-and-batch).

A profile asks its parts (each the ``data`` of its own route) concurrently; a part that fails is its error
object in its place. A batch is the profiles of many addresses, in the order given, each looked up once, within
bounds on every upstream; its geo and vpn parts are local and say what they did not consult (``notConsulted``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipintel.errors import ApiError
from ipintel.infra.limiter import Quota, Spend, spend_nothing
from ipintel.infra.registry_gate import RegistryGate

# The parts, in the order a profile lists them.
PART_NAMES: tuple[str, ...] = ("geo", "vpn", "whois", "blacklist", "ptr")
# What a batch looks up when it does not say: the two local lookups, which cost no upstream and no token.
BATCH_DEFAULT: tuple[str, ...] = ("geo", "vpn")

# At most this many addresses of one batch are worked on at once: a batch never floods an upstream.
ADDRESSES_IN_FLIGHT = 16
# A batch of inline (local) parts gives the event loop to other requests after this many addresses.
_INLINE_SLICE = 64
# The reasons of a verdict that name a source it did not consult (``unchecked:ptr``).
UNCHECKED = "unchecked:"


@dataclass(frozen=True)
class Part:
    """One part of a profile: its name, the quota one lookup spends per address (``None``: a local lookup,
    free), how to fetch it for a canonical public address within a batch, and, for a local part, how to
    find it in its cache without awaiting (``peek``: ``None`` when it is not there, else a function giving
    what ``fetch`` would answer from the cache; see :meth:`ipintel.infra.cache.Cache.peek`)."""

    name: str
    quota: Quota | None
    fetch: Callable[[str, Batch], Awaitable[dict[str, Any]]]
    peek: Callable[[str], Callable[[], dict[str, Any]] | None] | None = None
    # Asks no upstream (a batch's geo and vpn): awaited in the request's own task, without a task per address.
    inline: bool = False


@dataclass
class Batch:
    """The shared state of one request's lookups: the rate-limit spender and the bounds on upstreams."""

    spend: Spend = spend_nothing
    registries: RegistryGate = field(default_factory=RegistryGate)
    addresses: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(ADDRESSES_IN_FLIGHT))
    # quota -> (monotonic time its bucket holds a token again, the refusal): not asked again before then, since a
    # refused spend is a round trip to Redis and a spent quota stays spent for seconds.
    refused: dict[Quota, tuple[float, ApiError]] = field(default_factory=dict)
    # address -> the sources a local part could not consult for it (the profile's notConsulted).
    notes: dict[str, set[str]] = field(default_factory=dict)

    async def take(self, quota: Quota) -> None:
        """Spend one token of ``quota``, or raise its ``rate_limited`` without asking while it is known spent."""
        known = self.refused.get(quota)
        if known is not None:
            if time.monotonic() < known[0]:
                raise ApiError(known[1].code, known[1].message)
            del self.refused[quota]
        try:
            await self.spend(quota)
        except ApiError as failure:
            if failure.code == "rate_limited":
                wait = failure.headers.get("Retry-After", "1")
                self.refused[quota] = (time.monotonic() + (float(wait) if wait.isdigit() else 1.0), failure)
            raise

    def note(self, ip: str, source: str) -> None:
        """``source`` was not consulted for ``ip`` (a local part's answer)."""
        self.notes.setdefault(ip, set()).add(source)


def parse_include(requested: Iterable[object] | None, default: Sequence[str]) -> tuple[str, ...]:
    """The parts asked for, in profile order; ``invalid_request`` for an unknown or empty selection."""
    if requested is None:
        return tuple(default)
    asked: set[str] = set()
    for name in requested:
        if not isinstance(name, str) or name not in PART_NAMES:
            shown = repr(name)[:40]
            raise ApiError("invalid_request", f"include: unknown part {shown}; the parts are {', '.join(PART_NAMES)}")
        asked.add(name)
    if not asked:
        raise ApiError("invalid_request", f"include names no part; the parts are {', '.join(PART_NAMES)}")
    return tuple(name for name in PART_NAMES if name in asked)


async def _part(part: Part, ip: str, batch: Batch) -> dict[str, Any]:
    try:
        if part.quota is not None:
            await batch.take(part.quota)
        return await part.fetch(ip, batch)
    except ApiError as failure:
        return failure.to_dict()


def cached_profile(ip: str, parts: Sequence[Part]) -> dict[str, Any] | None:
    """The profile of ``ip`` when every part is local and in its cache, answered without a task nor an
    address slot (a cached batch costs its lookups, not the event loop's bookkeeping); else ``None``."""
    takes = []
    for part in parts:
        take = part.peek(ip) if part.quota is None and part.peek is not None else None
        if take is None:
            return None
        takes.append(take)
    answer: dict[str, Any] = {"ip": ip}
    for part, take in zip(parts, takes, strict=True):
        try:
            answer[part.name] = take()
        except ApiError as failure:
            answer[part.name] = failure.to_dict()
    return _noted(answer, ())


def _noted(answer: dict[str, Any], notes: Iterable[str]) -> dict[str, Any]:
    """``answer`` with ``notConsulted``: the sources its local parts did not consult (``notes``, and the
    ``unchecked:`` reasons of its verdict), when there are any."""
    found = set(notes)
    verdict = answer.get("vpn")
    if verdict is not None and "reasons" in verdict:
        found.update(r[len(UNCHECKED) :] for r in verdict["reasons"] if r.startswith(UNCHECKED))
    if found:
        answer["notConsulted"] = sorted(found)
    return answer


async def profile(ip: str, parts: Sequence[Part], batch: Batch) -> dict[str, Any]:
    """The profile of one canonical public address: ``{"ip", <part>: data | {"error"}}``."""
    known = cached_profile(ip, parts)
    if known is not None:
        return known
    return await _fetch_profile(ip, parts, batch)


async def _fetch_profile(ip: str, parts: Sequence[Part], batch: Batch) -> dict[str, Any]:
    async with batch.addresses:
        if len(parts) == 1:
            answers = [await _part(parts[0], ip, batch)]
        else:
            answers = await asyncio.gather(*(_part(part, ip, batch) for part in parts))
    answer = {"ip": ip, **{part.name: answer for part, answer in zip(parts, answers, strict=True)}}
    return _noted(answer, batch.notes.pop(ip, ()))


async def _inline_profile(ip: str, parts: Sequence[Part], batch: Batch) -> dict[str, Any]:
    """The profile of parts that all ask no upstream, in the caller's task: no task, no address slot."""
    answer: dict[str, Any] = {"ip": ip}
    for part in parts:
        answer[part.name] = await _part(part, ip, batch)
    return _noted(answer, batch.notes.pop(ip, ()))


async def profiles(
    given: Sequence[str], parts: Sequence[Part], batch: Batch, canonical: Callable[[str], str]
) -> list[dict[str, Any]]:
    """One entry per given address, in order: ``{"ip": <as given>, "data": profile}`` or
    ``{"ip": <as given>, "error": {...}}``. ``canonical`` turns client text into the canonical public
    address or raises ``ApiError``; addresses with the same canonical form are looked up once."""
    done: dict[str, dict[str, Any]] = {}
    work: dict[str, asyncio.Task[dict[str, Any]]] = {}
    keys: list[str | ApiError] = []
    inline = all(part.inline for part in parts)
    computed = 0
    for text in given:
        try:
            ip = canonical(text)
        except ApiError as failure:
            keys.append(failure)
            continue
        keys.append(ip)
        if ip not in done and ip not in work:
            known = cached_profile(ip, parts)
            if known is not None:
                done[ip] = known
            elif inline:
                done[ip] = await _inline_profile(ip, parts, batch)
                computed += 1
                if computed % _INLINE_SLICE == 0:
                    await asyncio.sleep(0)  # other requests get the loop between slices
            else:
                work[ip] = asyncio.ensure_future(_fetch_profile(ip, parts, batch))
    if work:
        try:
            await asyncio.wait(work.values())
        finally:  # cancelled (the client went away): the lookups under way stop with the request
            for task in work.values():
                task.cancel()
    done.update((ip, task.result()) for ip, task in work.items())
    return [
        {"ip": text, **key.to_dict()} if isinstance(key, ApiError) else {"ip": text, "data": done[key]}
        for text, key in zip(given, keys, strict=True)
    ]
