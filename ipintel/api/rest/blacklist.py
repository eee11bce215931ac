"""REST adapter for the blacklist check: ``GET /blacklist/{ip}`` (docs/API.md#blacklist)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


async def check(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.check_blacklist(request.path_params["ip"])


ENDPOINTS = [
    Endpoint(
        "/blacklist/{ip}",
        check,
        operation_id="checkBlacklist",
        summary="DNS blacklist and reputation check of an IPv4 address",
        description=(
            "Asks every configured DNSBL zone (IPINTEL_DNSBL_ZONES) and one reputation database (StopForumSpam, "
            "or AbuseIPDB with IPINTEL_ABUSEIPDB_KEY) concurrently, under one deadline (IPINTEL_BLACKLIST_DEADLINE, "
            "3 s). A DNSBL answer counts as listed only when it is a documented 127.0.0.0/8 return code; error codes "
            "(Spamhaus 127.255.255.x), 127.0.0.1, answers outside 127/8, SERVFAIL, REFUSED, timeouts and zones that "
            "fail their RFC 5782 self-test make the source 'unavailable', never 'clear'. status is 'listed' when any "
            "source lists the address, 'clear' only when every source answered and none does, else 'unknown'. "
            "IPv4 only: IPv6 answers 400 ipv6_not_supported; non-global addresses 422 reserved_address."
        ),
        schema="blacklist",
        errors=("invalid_ip", "ipv6_not_supported", "reserved_address"),
        quota=Quota.REGISTRY,
        parameters=(path_param("ip", "A public IPv4 address", "8.8.8.8"),),
        tags=("blacklist",),
    ),
]
