"""One DNSBL query and what its answer says about the address.

An answer is ``listed`` only when every A record is in 127.0.0.0/8, is not
127.0.0.1 nor in 127.255.255.0/24, and, when the list documents its return
codes, is one of them (:mod:`.codes`); NXDOMAIN is ``clear``; anything else
(a timeout, SERVFAIL, NODATA, an error code, an answer outside 127/8) is
``unavailable``, with words saying why.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from ipintel.capabilities.blacklist.codes import ERROR_RANGE, LISTING_RANGE, NEVER_LISTED, SPAMHAUS_ERRORS
from ipintel.capabilities.blacklist.zones import Zone
from ipintel.capabilities.reputation import SourceResult
from ipintel.infra.resolver import DnsRecord, NxDomain, QueryTimeout, Resolver, ResolverError, ServerFailure


@dataclass(frozen=True)
class Answer:
    """What one DNS query gave: records, NXDOMAIN, or a failure (``error`` says which)."""

    records: tuple[DnsRecord, ...] = ()
    nxdomain: bool = False
    error: str | None = None


async def ask(resolver: Resolver, name: str, timeout: float) -> Answer:
    """One A query, with every resolver failure turned into words.

    The words never quote the query name or the resolver's message: for DQS
    the name holds the key."""
    try:
        records = await resolver.query(name, "A", timeout=timeout, source="dnsbl")
    except NxDomain:
        return Answer(nxdomain=True)
    except QueryTimeout:
        return Answer(error=f"no answer within {seconds(timeout)}")
    except ServerFailure as failure:
        rcode = getattr(failure, "rcode", None) or "an error"
        return Answer(error=f"the DNS server answered {rcode}")
    except ResolverError as failure:
        return Answer(error=f"the DNS query failed ({type(failure).__name__})")
    return Answer(records=tuple(records))


def answer_problem(zone: Zone, address: str, *, check_codes: bool) -> str | None:
    """Why one A record is not a valid listing, or ``None`` when it is one."""
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        return f"answered {address[:45]!r}, which is not an IPv4 address"
    if ip not in LISTING_RANGE:
        return (
            f"answered {ip}, outside 127.0.0.0/8: the resolver rewrites NXDOMAIN "
            "(advertising or captive portal), so listed and clear cannot be told apart"
        )
    if ip == NEVER_LISTED:
        return "answered 127.0.0.1, which RFC 5782 reserves as never listed: the list is shut down or refuses this resolver"
    if ip in ERROR_RANGE:
        if zone.spamhaus:
            meaning = SPAMHAUS_ERRORS.get(str(ip), "an error code about the query, not the address")
            return f"answered Spamhaus error code {ip}: {meaning}"
        return f"answered {ip}, in 127.255.255.0/24, which lists use for errors about the query"
    if check_codes and zone.codes is not None and str(ip) not in zone.codes:
        return f"answered {ip}, which is not one of the return codes the list documents"
    return None


def classify_answer(zone: Zone, records: Sequence[DnsRecord]) -> SourceResult:
    """The verdict of a zone's records for an address (NXDOMAIN is handled by the caller)."""
    addresses = [record.data for record in records if record.type == "A"]
    if not addresses:
        return SourceResult(zone.name, "unavailable", "answered without an A record (NODATA): neither listed nor clear")
    meanings: list[str] = []
    for address in addresses:
        problem = answer_problem(zone, address, check_codes=True)
        if problem is not None:
            return SourceResult(zone.name, "unavailable", problem)
        meaning = (zone.codes or {}).get(address)
        text = f"{meaning} ({address})" if meaning else f"return code {address}"
        if text not in meanings:
            meanings.append(text)
    return SourceResult(zone.name, "listed", "; ".join(meanings))


def interpret(zone: Zone, answer: Answer) -> SourceResult:
    """The zone's verdict on the address from one :class:`Answer`."""
    if answer.error is not None:
        return SourceResult(zone.name, "unavailable", answer.error)
    if answer.nxdomain:
        return SourceResult(zone.name, "clear")
    return classify_answer(zone, answer.records)


def seconds(value: float) -> str:
    """A duration as the details word it (``2 s``, ``0.25 s``)."""
    return f"{round(value, 3):g} s"
