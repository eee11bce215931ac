"""REST adapter for profiles: ``GET /ip/{ip}/profile`` and ``POST /ip/batch`` (docs/API.md#profile-and-batch)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param, query_param, query_params
from ipintel.errors import ApiError
from ipintel.infra.limiter import Quota, Spend
from ipintel.schema_check import file_check
from ipintel.service import Intel
from ipintel.web.body import read_json
from ipintel.web.client import caller_of

_PARTS = "geo, vpn, whois, blacklist, ptr"


def _spender(request: Request) -> Spend:
    """Each part that asks an upstream spends a token of its own quota, per address (docs/API.md#rate-limits)."""
    return caller_of(request.scope).spend


async def profile(request: Request, intel: Intel) -> dict[str, Any]:
    include = query_params(request).get("include")
    parts = include.split(",") if include is not None else None
    return await intel.profile_ip(request.path_params["ip"], parts, spend=_spender(request))


async def batch(request: Request, intel: Intel) -> dict[str, Any]:
    ips, include = _batch_request(await read_json(request, intel.settings.max_body_bytes))
    return await intel.lookup_ips(ips, include, spend=_spender(request))


def _batch_request(document: Any) -> tuple[list[str], list[object] | None]:
    """``ips`` and ``include`` of a parsed batch body (``schemas/ip_batch.request.json``); ``invalid_request``
    saying what is wrong with any other shape. How many addresses a batch may hold is the service's to say:
    the limit is per server (IPINTEL_BATCH_MAX)."""
    failure = file_check("ip_batch.request", what="a batch").failure(document)
    if failure is None:
        return document["ips"], document.get("include")
    if not failure.path and failure.keyword == "type":
        message = 'the body must be an object: {"ips": [...], "include": [...]}'
    elif failure.member == "ips":  # missing, not a list, or an item not a string: one sentence shows the shape
        message = 'ips must be a list of addresses as strings, e.g. {"ips": ["8.8.8.8"]}'
    elif failure.path == ("include",):  # not a list (null too), or an empty one; a bad item is named as such
        message = f"include must be a list of one or more parts ({_PARTS})"
    else:
        message = failure.message
    raise ApiError("invalid_request", message)


_ERRORS = ("invalid_ip", "reserved_address", "invalid_request")

ENDPOINTS = [
    Endpoint(
        "/ip/{ip}/profile",
        profile,
        operation_id="profileIp",
        summary="Everything about an address in one call",
        description=(
            "The GeoIP record, VPN verdict, registry record, blacklist check and reverse-DNS names of a public "
            "address, each exactly the data of its own route (same schema, same caches), fetched concurrently. A "
            'part that fails is {"error": {"code", "message"}} in its place and does not fail the profile. '
            "include selects parts. Besides the request's general token, whois and blacklist spend a registry "
            "token and ptr a dns token; a part whose token is spent is rate_limited in its place. Non-global "
            "addresses answer 422 reserved_address."
        ),
        schema="profile",
        errors=_ERRORS,
        quota=Quota.GENERAL,
        parameters=(
            path_param("ip", "A public IPv4 or IPv6 address", "8.8.8.8"),
            query_param(
                "include",
                f"The parts, comma-separated (default all): {_PARTS}",
                "geo,vpn,whois",
                schema={
                    "type": "string",
                    "pattern": "^(geo|vpn|whois|blacklist|ptr)(,(geo|vpn|whois|blacklist|ptr))*$",
                },
            ),
        ),
        tags=("profile",),
    ),
    Endpoint(
        "/ip/batch",
        batch,
        operation_id="lookupIps",
        summary="Profiles of many addresses in one request",
        description=(
            'Body {"ips": [...], "include": [...]} (include default geo, vpn). One entry per address, in order: '
            '{"ip", "data"} with the profile of the included parts, or {"ip", "error"} for a malformed or '
            "non-public address, never the whole request's error. At most IPINTEL_BATCH_MAX addresses (1,000 "
            "by default); duplicates are looked up once. The request spends one general token; each address's "
            "whois and blacklist part a registry token, its ptr part a dns token. Upstreams are not flooded: at "
            "most 16 addresses in flight, 2 RDAP lookups per registry, and a registry that answers 429 is not "
            "asked again in the batch."
        ),
        schema="ip_batch",
        errors=("invalid_request", "payload_too_large", "unsupported_media_type"),
        quota=Quota.GENERAL,
        tags=("profile",),
        method="POST",
        body_schema="ip_batch.request",
    ),
]
