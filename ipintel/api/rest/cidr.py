"""REST adapter for CIDR arithmetic: ``GET /cidr?range=`` (docs/API.md#cidr)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, query_param, query_params
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


async def calculate(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.calculate_cidr(query_params(request).get("range", ""))


ENDPOINTS = [
    Endpoint(
        "/cidr",
        calculate,
        operation_id="calculateCidr",
        summary="CIDR arithmetic for an IPv4 or IPv6 range",
        description=(
            "Network, broadcast, masks, host counts and the usable host range. Host bits may be set. "
            "/31 has 2 usable hosts (RFC 3021), /32 one. IPv6 has no broadcast: broadcast and wildcardMask "
            "are null and every address is usable. Counts are exact integers (up to 2^128)."
        ),
        schema="cidr",
        errors=("invalid_range",),
        quota=Quota.GENERAL,
        cached_answers=False,  # computed on every request (docs/API.md#caching)
        parameters=(query_param("range", "A range in CIDR notation", "192.168.1.0/24", required=True),),
        tags=("cidr",),
    ),
]
