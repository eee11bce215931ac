"""REST adapter for registry records: ``GET /whois/{ip}`` (docs/API.md#registry-rdap)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


async def whois(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.whois_ip(request.path_params["ip"])


ENDPOINTS = [
    Endpoint(
        "/whois/{ip}",
        whois,
        operation_id="whoisIp",
        summary="Registry (RDAP) record of an address",
        description=(
            "Network name, handle, registered range, country, registrant organisation, the RIR that answered "
            "and the registry's events, from the RDAP server the IANA bootstrap names (redirects to the RIR "
            "holding transferred space are followed). Non-global addresses answer 422 reserved_address. "
            "Cached 7 days."
        ),
        schema="whois",
        errors=("invalid_ip", "reserved_address", "registration_not_found", "upstream_error", "upstream_timeout"),
        quota=Quota.REGISTRY,
        parameters=(path_param("ip", "A public IPv4 or IPv6 address", "8.8.8.8"),),
        tags=("whois",),
    ),
]
