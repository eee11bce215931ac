"""REST adapter for VPN detection: ``GET /ip/{ip}/vpn`` (docs/API.md#vpn-detection)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ipintel.api.rest.endpoint import Endpoint, path_param
from ipintel.infra.limiter import Quota
from ipintel.service import Intel


async def detect(request: Request, intel: Intel) -> dict[str, Any]:
    return await intel.detect_vpn(request.path_params["ip"])


ENDPOINTS = [
    Endpoint(
        "/ip/{ip}/vpn",
        detect,
        operation_id="detectVpn",
        summary="VPN, proxy, Tor, hosting and mobile detection for an address",
        description=(
            "Flags, each on its own evidence, with the reasons that fired: the MaxMind Anonymous-IP and "
            "Connection-Type databases when configured, the Tor exit list, the published ranges of AWS, Google "
            "Cloud, Azure, Oracle, Cloudflare and DigitalOcean, VPN and datacenter range lists, curated hosting, "
            "VPN and mobile-carrier ASNs, and reverse-DNS keywords. confidence is about isVpn. A feed that is "
            "down never fails the request: confidence drops instead. Non-global addresses answer 422 "
            "reserved_address. Cached 24 h."
        ),
        schema="vpn",
        errors=("invalid_ip", "reserved_address"),
        quota=Quota.GENERAL,
        parameters=(path_param("ip", "An IPv4 or IPv6 address", "185.220.101.1"),),
        tags=("vpn",),
    ),
]
