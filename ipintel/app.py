"""The application factory: ``create_app(settings)`` wires Intel, the REST endpoints and the MCP tools, the
middleware and the OpenAPI document (docs/ARCHITECTURE.md#the-design-in-one-picture); ``python -m ipintel``
serves the result with hypercorn.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.types import ASGIApp

from ipintel.api import page as page_api
from ipintel.api.mcp import transport as mcp_api
from ipintel.api.openapi import build_document
from ipintel.api.rest import asn as asn_api
from ipintel.api.rest import blacklist as blacklist_api
from ipintel.api.rest import cidr as cidr_api
from ipintel.api.rest import dns as dns_api
from ipintel.api.rest import geoip as geoip_api
from ipintel.api.rest import metrics as metrics_api
from ipintel.api.rest import ops
from ipintel.api.rest import profile as profile_api
from ipintel.api.rest import vpn as vpn_api
from ipintel.api.rest import whois as whois_api
from ipintel.api.rest.endpoint import Endpoint
from ipintel.infra.limiter import limiter_from_settings
from ipintel.infra.reload import DatabaseWatcher
from ipintel.infra.shared import SharedRateLimiter
from ipintel.metrics import Metrics
from ipintel.service import Intel
from ipintel.settings import Settings, allowed_hosts
from ipintel.web.api_keys import ApiKeys
from ipintel.web.gate import RateLimitGate
from ipintel.web.hosts import HostCheck
from ipintel.web.middleware import RequestContextMiddleware
from ipintel.web.routing import SegmentRouter

log = logging.getLogger("ipintel")

# Every REST endpoint of the service, in the order the OpenAPI document lists them.
ENDPOINTS: list[Endpoint] = [
    *geoip_api.ENDPOINTS,
    *vpn_api.ENDPOINTS,
    *whois_api.ENDPOINTS,
    *asn_api.ENDPOINTS,
    *dns_api.ENDPOINTS,
    *blacklist_api.ENDPOINTS,
    *cidr_api.ENDPOINTS,
    *profile_api.ENDPOINTS,
]


class _ServiceApp(Starlette):
    """Starlette with one layer around the router: the request middleware.

    Starlette would wrap it in two more (its last-resort 500 and its
    exception handlers, which build a Request for every request); ours
    answers the last-resort 500 and the router's 404 and 405 itself, and on a
    cached answer every layer is a measurable share of the time."""

    def __init__(self, request_context: Callable[[ASGIApp], ASGIApp]) -> None:
        self._request_context = request_context
        super().__init__()

    def build_middleware_stack(self) -> ASGIApp:
        return self._request_context(self.router)


def create_app(
    settings: Settings | None = None, *, intel: Intel | None = None, clock: Callable[[], float] = time.monotonic
) -> Starlette:
    """``clock`` (monotonic seconds) drives cache lifetimes and rate-limit refills; tests pass a fake one."""
    settings = settings or Settings()
    intel = intel or Intel.from_settings(settings, clock=clock)
    limiter = limiter_from_settings(settings.rate_limits, settings.rate_limit_max_clients, clock)
    # With Redis (IPINTEL_REDIS_URL) the buckets are shared by every process; the in-process ones stand in
    # while Redis is unavailable.
    shared_limiter = SharedRateLimiter(limiter, intel.shared) if limiter is not None and intel.shared else None
    # Reloads the .mmdb files replaced on disk (and on SIGHUP, wired by __main__), without a restart.
    db_watcher = DatabaseWatcher(intel.databases, interval=settings.db_check_interval)
    # None without IPINTEL_API_KEYS_FILE; an unusable file is a ConfigError (exit 2). docs/API.md#authentication
    api_keys = ApiKeys.from_settings(settings, limiter=limiter, store=intel.shared, clock=clock)
    metrics = Metrics(intel, limiter=limiter, watcher=db_watcher, api_keys=api_keys)
    # The paths that are rate limited, and that need an API key when IPINTEL_API_KEYS_FILE is set.
    rules = [*((ep.path, ep.quota) for ep in ENDPOINTS), *mcp_api.RULES]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await intel.start()
        if not intel.ready:
            log.warning(
                "no GeoIP database loaded from %s: /ip answers 503 until one is",
                ", ".join(str(p) for p in settings.city_db_paths),
            )
        db_watcher.start()
        if api_keys is not None:
            api_keys.start()  # reloads the key file when it is replaced (and on SIGHUP, wired by __main__)
        # What start-up built lives as long as the process: freezing it keeps the
        # collector's full passes from walking it again and again on the hot path.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await db_watcher.close()
            if api_keys is not None:
                await api_keys.close()
            await intel.close()  # after the server drained its requests: closes the upstream sessions

    routes = [
        *(ep.route() for ep in ENDPOINTS),
        *ops.routes(),
        *page_api.routes(),  # GET / (the page for people, or the JSON index) and its assets
        *metrics_api.routes(),
        *mcp_api.routes(intel, settings),
    ]
    gate = RateLimitGate(
        limiter=limiter, rules=rules, trusted_proxies=settings.trusted_proxies, shared=shared_limiter, keys=api_keys
    )
    # Every response, 429s included, gets a request id, an access line and its metrics.
    hosts = allowed_hosts(settings)
    host_check = HostCheck(hosts) if hosts is not None else None
    app = _ServiceApp(
        lambda router: RequestContextMiddleware(
            router, gate=gate, observe=metrics.observe_request, hosts=host_check, rpc_paths=mcp_api.PATHS
        )
    )
    # Starlette's router, matching a request only against the routes its first path
    # segment can reach. A trailing slash is a 404 with a JSON body, not a bodiless
    # 307: every response is JSON (docs/API.md#conventions), and an API client should not chase redirects.
    app.router = SegmentRouter(routes, redirect_slashes=False, lifespan=lifespan)
    app.state.settings = settings
    app.state.intel = intel
    # None when IPINTEL_RATE_LIMITS=off; for inspection only: requests spend through the Caller the gate resolved.
    app.state.limiter = shared_limiter or limiter
    app.state.metrics = metrics  # its registry is what GET /metrics exposes
    app.state.db_watcher = db_watcher
    app.state.api_keys = api_keys
    app.state.openapi = build_document(ENDPOINTS, settings)
    return app
