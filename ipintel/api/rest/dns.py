"""REST adapter for DNS: ``GET /dns/{domain}?type=`` and ``GET /dns/{ip}/reverse`` (docs/API.md#dns)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param, query_param, query_params
from ipintel.capabilities.dns import RECORD_TYPES
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


def _any_case(word: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" for c in word)


# The record types in any case, or nothing: ^(|[Aa]|[Aa][Aa][Aa][Aa]|[Mm][Xx]|...)$ (ECMA-262 has no (?i)).
TYPE_PATTERN = "^(|" + "|".join(_any_case(t) for t in RECORD_TYPES) + ")$"


async def records(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.lookup_dns(request.path_params["domain"], query_params(request).get("type") or "A")


async def reverse(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.reverse_dns(request.path_params["ip"])


ENDPOINTS = [
    Endpoint(
        "/dns/{domain}",
        records,
        operation_id="lookupDns",
        summary="DNS records of a domain",
        description=(
            "A, AAAA, MX, TXT, NS or CNAME records from the configured resolver, each with its owner name, "
            "type, remaining TTL and data. A CNAME met on the way is returned as its own record before the "
            "records of its target. TXT data joins the character strings of one record; MX data is "
            "'<preference> <exchange>'. IDN names are looked up (and answered) in their A-label form. "
            "NXDOMAIN answers 404 domain_not_found; a name without records of the type answers an empty list. "
            "Cached up to 5 minutes, never past the records' TTL."
        ),
        schema="dns",
        errors=("invalid_domain", "invalid_record_type", "domain_not_found", "upstream_error", "upstream_timeout"),
        quota=Quota.DNS,
        parameters=(
            path_param("domain", "A domain name (IDN accepted, one trailing dot allowed)", "example.com"),
            query_param(
                "type",
                "Record type, case-insensitive: " + ", ".join(RECORD_TYPES) + " (default A; an empty type=, "
                "as absent, means A)",
                "MX",
                # A pattern, not an enum, because the route accepts any case ("mx", "Aaaa"); "" is
                # allowed because it is answered (as A), not refused: the document says what the route does.
                schema={"type": "string", "pattern": TYPE_PATTERN, "default": "A", "examples": list(RECORD_TYPES)},
            ),
        ),
        tags=("dns",),
    ),
    Endpoint(
        "/dns/{ip}/reverse",
        reverse,
        operation_id="reverseDns",
        summary="Reverse DNS (PTR records) of an address",
        description=(
            "The PTR records of any IPv4 or IPv6 address (private and loopback included), looked up under "
            "in-addr.arpa / ip6.arpa. An address without a PTR record answers an empty list, also when its "
            "reverse name does not exist. Cached up to 5 minutes, never past the records' TTL."
        ),
        schema="reverse",
        errors=("invalid_ip", "upstream_error", "upstream_timeout"),
        quota=Quota.DNS,
        parameters=(path_param("ip", "An IPv4 or IPv6 address", "8.8.8.8"),),
        tags=("dns",),
    ),
]
