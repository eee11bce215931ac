"""The blacklist check of one address: every zone and the reputation database at once.

All sources run concurrently under one deadline (``IPINTEL_BLACKLIST_DEADLINE``);
each DNS query also has its own timeout, the smaller of the DNS timeout and
what is left of the deadline. A source still running at the deadline is
``unavailable``; the answer never waits for it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from ipintel import addresses
from ipintel.capabilities.blacklist.answers import ask, interpret, seconds
from ipintel.capabilities.blacklist.self_tests import SelfTests
from ipintel.capabilities.blacklist.zones import Zone
from ipintel.capabilities.reputation import Reputation, SourceResult
from ipintel.errors import ApiError
from ipintel.infra.resolver import Resolver

log = logging.getLogger("ipintel.blacklist")


def public_ipv4(text: str) -> ipaddress.IPv4Address:
    """The address a client asked about, if it can be checked: DNSBLs are queried
    by reversed IPv4 octets (IPv6 lists are few and differently keyed), and
    non-global addresses are in no list (400 / 422, docs/API.md#errors)."""
    address = addresses.parse_ip(text)
    if not isinstance(address, ipaddress.IPv4Address):
        raise ApiError("ipv6_not_supported", f"{address} is an IPv6 address; blacklists are checked for IPv4 only")
    addresses.require_public(address)
    return address


async def _check_zone(
    zone: Zone, ip: ipaddress.IPv4Address, *, resolver: Resolver, tests: SelfTests, timeout: float
) -> SourceResult:
    known = tests.state(zone)
    if known is not None and known.verdict == "failed":
        return SourceResult(zone.name, "unavailable", f"failed its RFC 5782 self-test: {known.detail}")
    if known is not None:
        return interpret(zone, await ask(resolver, zone.query_name(ip), timeout))
    # Untested: ask, and verify the list in the same round trip. The shield keeps
    # the shared self-test running when this check hits its deadline.
    answer, test = await asyncio.gather(ask(resolver, zone.query_name(ip), timeout), asyncio.shield(tests.verify(zone)))
    if test.verdict == "failed":
        return SourceResult(zone.name, "unavailable", f"failed its RFC 5782 self-test: {test.detail}")
    result = interpret(zone, answer)
    if test.verdict == "inconclusive" and result.status != "unavailable":
        return SourceResult(
            zone.name,
            "unavailable",
            f"answered, but is not yet verified by its RFC 5782 self-test ({test.detail})",
        )
    return result


async def check(
    ip: ipaddress.IPv4Address,
    *,
    zones: Sequence[Zone],
    resolver: Resolver,
    tests: SelfTests,
    reputation: Reputation | None,
    reputation_name: str = "reputation",
    deadline: float,
    dns_timeout: float,
) -> dict[str, Any]:
    """The blacklist record of a public IPv4 address (the caller has checked it)."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + deadline
    per_query = max(0.001, min(dns_timeout, deadline))
    names = [zone.name for zone in zones]
    jobs: list[Awaitable[SourceResult]] = [
        _check_zone(zone, ip, resolver=resolver, tests=tests, timeout=per_query) for zone in zones
    ]
    if reputation is not None:
        names.append(reputation_name)
        jobs.append(reputation(ip, max(0.001, ends - loop.time())))
    tasks = [asyncio.ensure_future(job) for job in jobs]
    if tasks:
        await asyncio.wait(tasks, timeout=max(0.0, ends - loop.time()))
    sources: list[SourceResult] = []
    for name, task in zip(names, tasks, strict=True):
        if not task.done():
            task.cancel()
            sources.append(SourceResult(name, "unavailable", f"no answer within the {seconds(deadline)} deadline"))
        elif task.cancelled():
            sources.append(SourceResult(name, "unavailable", "the check was cancelled"))
        elif task.exception() is not None:
            log.error("blacklist source %s crashed", name, exc_info=task.exception())
            sources.append(SourceResult(name, "unavailable", "internal error while asking this source"))
        else:
            sources.append(task.result())
    # Let cancelled queries unwind (their futures are cancellable) before answering.
    await asyncio.gather(*(t for t in tasks if not t.done()), return_exceptions=True)
    status = overall_status(sources)
    return {
        "ip": str(ip),
        "status": status,
        "listed": status == "listed",
        "sources": [source.to_dict() for source in sources],
    }


def overall_status(sources: Sequence[SourceResult]) -> str:
    """``listed`` when any source lists; ``clear`` only when all answered clear (docs/API.md#blacklist)."""
    if any(source.status == "listed" for source in sources):
        return "listed"
    if sources and all(source.status == "clear" for source in sources):
        return "clear"
    return "unknown"


def is_definitive(result: Mapping[str, Any]) -> bool:
    """A blacklist record may be cached only when no source was unavailable (docs/API.md#caching)."""
    return all(source.get("status") != "unavailable" for source in result.get("sources", ()))
