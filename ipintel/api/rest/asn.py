"""REST adapter for AS records: ``GET /asn/{asn}`` (docs/API.md#as-record)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


async def asn(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.lookup_asn(request.path_params["asn"])


ENDPOINTS = [
    Endpoint(
        "/asn/{asn}",
        asn,
        operation_id="lookupAsn",
        summary="Registry (RDAP) record and networks of an autonomous system",
        description=(
            "The AS record's name, registrant organisation, country, the RIR that answered, its handle, events "
            "and abuse contact, from the RDAP server IANA's asn.json bootstrap names (redirects followed), and "
            "the IPv4 and IPv6 networks the configured ASN database lists for the AS (null without one). "
            "Cached 7 days."
        ),
        schema="asn",
        errors=("invalid_asn", "registration_not_found", "upstream_error", "upstream_timeout"),
        quota=Quota.REGISTRY,
        parameters=(path_param("asn", "An AS number, AS13335 or 13335", "AS15169"),),
        tags=("asn",),
    ),
]
