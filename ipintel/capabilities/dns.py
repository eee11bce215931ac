"""DNS lookups (docs/API.md#dns): records of a name, and the PTR records of an address.

They receive the shared :class:`~ipintel.infra.resolver.Resolver` and canonical input (an A-label domain, a
parsed address), and turn the resolver's outcomes into the answers and errors docs/API.md#dns lists.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ipintel.addresses import IPAddress
from ipintel.errors import ApiError, UpstreamError, UpstreamTimeout
from ipintel.infra.resolver import DnsRecord, NxDomain, QueryTimeout, Resolver, ResolverError, ServerFailure

# The record types /dns answers; any other is invalid_record_type (docs/API.md#errors).
RECORD_TYPES: tuple[str, ...] = ("A", "AAAA", "MX", "TXT", "NS", "CNAME")
DEFAULT_TYPE = "A"


def parse_record_type(text: object) -> str:
    """``type`` as a client wrote it (any case; absent or empty means A)."""
    if text is None or text == "":
        return DEFAULT_TYPE
    if isinstance(text, str) and text.upper() in RECORD_TYPES:
        return text.upper()
    shown = repr(text[:20]) if isinstance(text, str) else type(text).__name__
    raise ApiError("invalid_record_type", f"type {shown} is not one of {', '.join(RECORD_TYPES)}")


async def lookup(domain: str, rdtype: str, *, resolver: Resolver) -> dict[str, Any]:
    """``{"records": [...]}`` for a canonical domain and a valid type.

    The answer holds the CNAMEs met on the way, each as its own record,
    then the records of the type asked, in the order the server gave them.
    Other record types a server may add (DNAME, signatures) are left out."""
    try:
        records = await resolver.query(domain, rdtype)
    except NxDomain:
        raise ApiError("domain_not_found", f"{domain} does not exist (NXDOMAIN)") from None
    except ResolverError as exc:
        raise _upstream_failure(exc, f"{domain} {rdtype}") from None
    wanted = {rdtype, "CNAME"}
    return {"records": [_record(r) for r in records if r.type in wanted]}


async def reverse(ip: IPAddress, *, resolver: Resolver) -> dict[str, Any]:
    """``{"ip", "records"}``: the PTR records of any address (no reserved check:
    private and loopback addresses have PTRs on local resolvers)."""
    owner = ip.reverse_pointer
    try:
        records = await resolver.query(owner, "PTR")
    except NxDomain:
        # An address without a PTR record usually has no name at all under in-addr.arpa/ip6.arpa, so its
        # NXDOMAIN means "no PTR", not "no such address".
        records = []
    except ResolverError as exc:
        raise _upstream_failure(exc, f"{owner} PTR") from None
    return {"ip": str(ip), "records": [_record(r) for r in records if r.type == "PTR"]}


def _record(record: DnsRecord) -> dict[str, Any]:
    return asdict(record)


def _upstream_failure(exc: ResolverError, question: str) -> ApiError:
    if isinstance(exc, QueryTimeout):
        return UpstreamTimeout(f"the DNS server did not answer {question} in time")
    if isinstance(exc, ServerFailure):
        if exc.rcode in ("SERVFAIL", "REFUSED", "NOTIMP", "FORMERR"):
            return UpstreamError(f"the DNS server answered {exc.rcode} for {question}")
        if exc.rcode == "CONNREFUSED":
            return UpstreamError(f"the DNS server could not be reached for {question} (connection refused)")
        return UpstreamError(f"the DNS server sent an unusable answer for {question}")
    return UpstreamError(f"the DNS lookup of {question} failed")
