"""The middleware around every request: its id, the Host check, the gate, the access log, and the answer to
every failure (the one place a refusal or an error is sent).

Pure ASGI rather than ``BaseHTTPMiddleware``: it adds no task or memory stream per request, which keeps the
hot path close to a bare handler.
"""

from __future__ import annotations

import logging
import random
import re
import secrets
import time
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ipintel.errors import ApiError
from ipintel.logs import access_log
from ipintel.web.gate import RateLimitGate, rate_limit_headers, rate_limited
from ipintel.web.hosts import HostCheck
from ipintel.web.responses import send_failure

errors_log = logging.getLogger("ipintel.error")

RequestObserver = Callable[[str, str, int, float], None]

_SANE_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")  # fullmatch: "$" would let "abc\n" pass
_INTERNAL = ApiError("internal_error", "an internal error occurred; quote the request id when reporting it")
_MISDIRECTED = ApiError(
    "misdirected_request", "this server does not answer for the host named in the request (IPINTEL_ALLOWED_HOSTS)"
)
# Every answer: a browser must not guess another type than the one sent (docs/API.md#conventions).
_NOSNIFF = (b"x-content-type-options", b"nosniff")
# An answer that depends on who asks (GET /ip, anything under an API key): no shared cache may keep it, and
# one that keeps it privately keys it by the credentials.
_PRIVATE = ((b"cache-control", b"private, no-store"), (b"vary", b"Authorization, X-API-Key"))


# Request ids must be unique, not secret: a PRNG seeded from the OS is enough,
# and it spares a getrandom() system call per request.
_ids = random.Random(secrets.randbits(128))


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            if _SANE_ID.fullmatch(value):
                text: str = value.decode("ascii")
                return text
            break
    return f"{_ids.getrandbits(64):016x}"


class RequestContextMiddleware:
    """Gives every response an ``X-Request-Id``, checks the ``Host``, runs the gate, logs one access line per
    request, and answers every failure: a refusal, a handler's :class:`~ipintel.errors.ApiError`, the router's
    404 and 405, and as a JSON 500 without its trace any other exception.

    One middleware and one ``send`` wrapper rather than a layer per concern: on a cached answer each layer is a
    measurable share of the time. A refused request still gets its id, access line and metrics."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        gate: RateLimitGate | None = None,
        observe: RequestObserver | None = None,
        hosts: HostCheck | None = None,
        rpc_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.gate = gate
        # The paths of the JSON-RPC endpoint (/mcp), whose failures are JSON-RPC errors (docs/MCP.md#transport-both-eras).
        self.rpc_paths = rpc_paths
        # IPINTEL_ALLOWED_HOSTS (None: any Host): checked before anything else, DNS rebinding.
        self.hosts = hosts
        # Called once per request with (method, route template, status, seconds): the /metrics hook.
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        header = (b"x-request-id", request_id.encode("ascii"))
        started = time.perf_counter()
        status = 0
        extra: list[tuple[bytes, bytes]] = []  # the RateLimit-* headers, when the route is limited

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.get("headers", ())
                if any(name == b"x-content-type-options" for name, _ in headers):
                    message["headers"] = [*headers, header, *extra]  # the page's own security headers
                else:
                    message["headers"] = [*headers, header, _NOSNIFF, *extra]
            await send(message)

        try:
            hosts = self.hosts
            if hosts is not None and not hosts.allows(scope):
                raise _MISDIRECTED
            gate = self.gate
            if gate is None:
                decision = None
            elif gate.shared is None:
                decision = gate.admit(scope)  # in process: synchronous, the hot path
            else:
                decision = await gate.admit_shared(scope)  # the buckets in Redis (IPINTEL_REDIS_URL)
            caller = state.get("caller")
            if scope["path"] == "/ip" or (caller is not None and caller.api_key is not None):
                extra = [*_PRIVATE]
            if decision is not None:
                extra = [*extra, *rate_limit_headers(decision)]
                if not decision.allowed:
                    raise rate_limited(decision)  # send_with_id adds `extra`
            await self.app(scope, receive, send_with_id)
        except Exception as exc:
            failure = _failure(exc, scope)
            if failure is _INTERNAL:
                errors_log.exception("unhandled error", extra={"request_id": request_id, "path": scope.get("path")})
            if status == 0:
                rpc = scope["path"] in self.rpc_paths
                await send_failure(send_with_id, failure, rpc=rpc, head=scope.get("method") == "HEAD")
        finally:
            observe = self.observe
            if access_log.enabled or observe is not None:
                seconds = time.perf_counter() - started
                route = route_template(scope)
                if observe is not None:
                    observe(scope.get("method", ""), route, status, seconds)
                if access_log.enabled:
                    client = scope.get("client")
                    access_log.write_request(
                        request_id,
                        scope.get("method", ""),
                        route,
                        status,
                        seconds,
                        caller.ip if (caller := state.get("caller")) is not None else (client[0] if client else None),
                        caller.api_key if caller is not None else None,  # the key's name, never the key
                    )


def _failure(exc: Exception, scope: Scope) -> ApiError:
    """What a request that raised ``exc`` is answered: an :class:`ApiError` as it is (a refusal, a handler's
    error), a refusal of the router (or of the static files of /docs) as its REST error, anything else a 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, HTTPException):
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            return ApiError("not_found", f"no route {scope.get('path', '')}", headers=headers)
        if exc.status_code == 405:
            return ApiError("method_not_allowed", f"{scope.get('method', '')} is not allowed here", headers=headers)
        return ApiError("invalid_request", str(exc.detail), headers=headers)
    return _INTERNAL


def route_template(scope: Scope) -> str:
    """The path template of the route that answered (``/ip/{ip}``), never the raw
    path: access logs must not record other people's lookups, and metric labels
    must stay bounded.

    A request answered before routing (a 429 from the rate limiter) gets the
    template it would have matched; a path no route matches is ``unmatched``."""
    path = getattr(scope.get("route"), "path", None)
    if path:
        return str(path)
    router = getattr(scope.get("app"), "router", None)
    for route in getattr(router, "routes", ()):
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            return str(getattr(route, "path", None) or "unmatched")
    return "unmatched"
