"""Everything about an address in one call, and many addresses in one request (docs/API.md#profile).

A *profile* is what five capabilities answer about one address, each part
exactly the ``data`` its own route answers (same schema, same caches): the
GeoIP record, the VPN verdict, the registry record, the blacklist check and
the reverse-DNS names. The parts are asked concurrently, so an uncached
profile costs about its slowest upstream, not their sum; a part that fails is
its error object in its place and never fails the others.

A *batch* is the profiles of many addresses, in the order given: a bad or
reserved address is its own entry's error, and an address given twice (in
any spelling) is looked up once. A batch never floods an upstream: at most
:data:`ADDRESSES_IN_FLIGHT` addresses are worked on at once, at most
:data:`~ipintel.infra.registry_gate.PER_HOST_IN_FLIGHT` RDAP lookups go to one
registry at once, and a registry that answers 429 is not asked again for the
rest of the batch (:class:`~ipintel.infra.registry_gate.RegistryGate`). Registries rate-limit hard, LACNIC most: asking
again at once only prolongs the refusal.

Rate limits stay honest: each part that asks an upstream spends one token of
its own quota per address (the quota its single route spends), and a part
whose token is not there is ``rate_limited`` in its place while the address's
other parts are answered. GeoIP and VPN verdicts are local lookups and spend
nothing per address.
"""

from __future__ import annotations

import asyncio
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

# At most this many addresses of one batch are worked on at once (see the module docstring).
ADDRESSES_IN_FLIGHT = 16


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


@dataclass
class Batch:
    """The shared state of one request's lookups: the rate-limit spender and the bounds on upstreams."""

    spend: Spend = spend_nothing
    registries: RegistryGate = field(default_factory=RegistryGate)
    addresses: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(ADDRESSES_IN_FLIGHT))


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
            await batch.spend(part.quota)
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
    return {"ip": ip, **{part.name: answer for part, answer in zip(parts, answers, strict=True)}}


async def profiles(
    given: Sequence[str], parts: Sequence[Part], batch: Batch, canonical: Callable[[str], str]
) -> list[dict[str, Any]]:
    """One entry per given address, in order: ``{"ip": <as given>, "data": profile}`` or
    ``{"ip": <as given>, "error": {...}}``. ``canonical`` turns client text into the canonical public
    address or raises ``ApiError``; addresses with the same canonical form are looked up once."""
    done: dict[str, dict[str, Any]] = {}
    work: dict[str, asyncio.Task[dict[str, Any]]] = {}
    keys: list[str | ApiError] = []
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
