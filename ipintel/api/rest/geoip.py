"""REST adapter for GeoIP: ``GET /ip`` and ``GET /ip/{ip}`` (docs/API.md#geoip)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param
from ipintel.errors import ApiError
from ipintel.infra.limiter import Quota
from ipintel.service import Intel
from ipintel.web.client import caller_of


async def own_address(request: Request, intel: Intel) -> dict[str, Any]:
    # The request middleware resolved the caller once (docs/API.md#client-address) and keyed its
    # rate-limit bucket by it: the same address is looked up.
    ip = caller_of(request.scope).ip
    if ip is None:
        raise ApiError("invalid_ip", "the caller's address is unknown")
    return await intel.lookup_own_ip(ip)


async def given_address(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.lookup_ip(request.path_params["ip"])


_ERRORS = ("invalid_ip", "reserved_address", "address_not_found", "geoip_unavailable")

ENDPOINTS = [
    Endpoint(
        "/ip",
        own_address,
        operation_id="lookupOwnIp",
        summary="GeoIP record of the caller's address",
        description="The caller is the socket peer, or the client named by a trusted proxy (IPINTEL_TRUSTED_PROXIES).",
        schema="geoip",
        errors=_ERRORS,
        quota=Quota.GENERAL,
        tags=("geoip",),
    ),
    Endpoint(
        "/ip/{ip}",
        given_address,
        operation_id="lookupIp",
        summary="GeoIP record of an address",
        description=(
            "Country, region, city, coordinates, time zone and the announcing AS of a public IPv4 or IPv6 "
            "address. Non-global addresses answer 422 reserved_address. Cached 24 h."
        ),
        schema="geoip",
        errors=_ERRORS,
        quota=Quota.GENERAL,
        parameters=(path_param("ip", "An IPv4 or IPv6 address", "8.8.8.8"),),
        tags=("geoip",),
    ),
]
