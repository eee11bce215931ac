"""``POST /mcp``, the MCP endpoint's transport (docs/MCP.md#transport-both-eras): origins and CORS, methods, the
body, and the HTTP status of each era's answers. Streamable HTTP without sessions: no state is kept between
requests, so any worker answers any request. The JSON-RPC rules are :mod:`ipintel.api.mcp.protocol`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ipintel.api.mcp.envelope import HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION, RoutingHeaders, is_modern
from ipintel.api.mcp.protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Answer,
    McpProtocol,
)
from ipintel.api.mcp.tools import TOOLS, CallContext, ToolSet
from ipintel.encoding import dumps
from ipintel.errors import ApiError
from ipintel.infra.limiter import Quota
from ipintel.web.body import NotJson, read_json
from ipintel.web.client import caller_of
from ipintel.web.responses import RawResponse, rpc_error

if TYPE_CHECKING:
    from ipintel.service import Intel
    from ipintel.settings import Settings

log = logging.getLogger("ipintel.mcp")

# Both spellings answer, without a redirect (docs/MCP.md); the request middleware answers their failures as
# JSON-RPC errors.
PATHS = frozenset({"/mcp", "/mcp/"})
# Every request to them spends a general token (and needs an API key when keys are on); a tools/call spends its
# tool's quota besides.
RULES = tuple((path, Quota.GENERAL) for path in sorted(PATHS))

# Headers a browser client may send (preflight) and read (CORS). Mcp-Session-Id is
# allowed although this server never issues one: clients that echo it must not fail.
# Mcp-Method and Mcp-Name are the 2026-07-28 routing headers; the Mcp-Param-* headers a
# client asks for are allowed too (that revision lets a tool mirror arguments into them).
_ALLOW_HEADERS = (
    "Content-Type, Accept, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Session-Id, Last-Event-ID, "
    "Authorization, X-API-Key, X-Request-Id"
)
_PARAM_HEADER = re.compile(r"mcp-param-[!#$%&'*+.^_`|~0-9a-z-]{1,64}")
_EXPOSE_HEADERS = (
    "Mcp-Session-Id, MCP-Protocol-Version, X-Request-Id, Retry-After, WWW-Authenticate, "
    "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy"
)


class OriginPolicy:
    """``IPINTEL_MCP_ALLOWED_ORIGINS``: exact origins, ``scheme://host:*`` (any port, or none), or ``*``.

    Browsers send ``Origin``; a page on another site must not be able to drive
    a server on localhost (DNS rebinding), so an unknown origin is refused.
    Requests without ``Origin`` (every non-browser client) are allowed."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.any = False
        self.exact: set[str] = set()
        self.any_port: set[str] = set()
        for pattern in (p.strip().lower().rstrip("/") for p in patterns):
            if pattern == "*":
                self.any = True
            elif pattern.endswith(":*"):
                self.any_port.add(pattern[:-2])
            elif pattern:
                self.exact.add(pattern)

    _PORT = re.compile(r"(.*):([0-9]{1,5})")

    def allows(self, origin: str) -> bool:
        if self.any:
            return True
        origin = origin.strip().lower()
        if origin in self.exact:
            return True
        match = self._PORT.fullmatch(origin)
        base = match.group(1) if match and "//" in match.group(1) else origin
        return base in self.any_port


@functools.lru_cache(maxsize=256)
def _sse_only(accept: str) -> bool:
    """Whether the client accepts ``text/event-stream`` but not JSON (lenient: anything else gets JSON)."""
    accepted = set()
    for part in accept.split(","):
        media, _, parameters = part.partition(";")
        if re.search(r"(?:^|;)\s*q\s*=\s*0(?:\.0*)?\s*(?:;|\Z)", parameters):
            continue  # q=0: explicitly not acceptable
        accepted.add(media.strip().lower())
    if accepted & {"application/json", "application/*", "*/*"}:
        return False
    return "text/event-stream" in accepted


def _allowed_headers(headers: Any) -> str:
    """The preflight's allowed headers: the fixed list, plus the ``Mcp-Param-*`` ones the browser asks for."""
    asked = headers.get("access-control-request-headers", "")
    params = [
        name for name in (part.strip().lower() for part in asked.split(",")[:32]) if _PARAM_HEADER.fullmatch(name)
    ]
    return ", ".join([_ALLOW_HEADERS, *params])


class McpEndpoint:
    """The ``/mcp`` handler of one app: the live tools, the origin policy, the body limit."""

    def __init__(self, intel: Intel, settings: Settings) -> None:
        self.protocol = McpProtocol(intel, ToolSet(TOOLS))
        self.settings = settings
        self.origins = OriginPolicy(settings.mcp_allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ASGI app rather than a request function, so that Starlette routes every method here
        (the 405 must carry a JSON-RPC body)."""
        response = await self.handle(Request(scope, receive))
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response | RawResponse:
        cors: dict[str, str] = {"Vary": "Origin"}
        origin = request.headers.get("origin")
        if origin is not None:
            if not self.origins.allows(origin):
                message = f"the origin {origin[:100]!r} is not allowed to use this server"
                raise ApiError("origin_not_allowed", message, headers=cors)
            cors.update({"Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": _EXPOSE_HEADERS})
        if request.method == "OPTIONS":
            return Response(
                status_code=204,
                headers={
                    **cors,
                    "Access-Control-Allow-Methods": "POST, OPTIONS",
                    "Access-Control-Allow-Headers": _allowed_headers(request.headers),
                    "Access-Control-Max-Age": "600",
                    "Allow": "POST, OPTIONS",
                },
            )
        if request.method != "POST":
            message = f"{request.method} is not supported: this server is stateless and answers POST only"
            raise ApiError("method_not_allowed", message, headers={**cors, "Allow": "POST"})
        sse = _sse_only(request.headers.get("accept", ""))
        headers = RoutingHeaders(request.scope["headers"])
        try:
            payload = await read_json(request, self.settings.max_body_bytes)
        except NotJson as exc:
            failure = rpc_error(None, PARSE_ERROR, exc.message)
            return self._reply(failure, sse, cors, _status(failure, is_modern(None, headers.version)))
        except ApiError as exc:  # 413, 415: answered by the middleware, with this endpoint's CORS headers
            exc.headers = {**exc.headers, **cors}
            raise
        modern = is_modern(payload, headers.version)
        context = self._context(request)
        answer: Answer | list[Answer] | None
        if modern:
            answer = await self.protocol.answer_modern(payload, headers, context)
        else:
            rejection = headers.check_legacy(payload)
            if rejection is not None:  # before any tool runs or spends (a gateway routed on the header)
                return self._reply(rpc_error(None, rejection.code, rejection.message), sse, cors, 400)
            answer = await self.protocol.answer(payload, context)
        if answer is None:
            return Response(status_code=202, headers=cors)
        return self._reply(answer, sse, cors, _status(answer, modern))

    def _context(self, request: Request) -> CallContext:
        caller = caller_of(request.scope)
        return CallContext(caller_ip=caller.ip, spend=caller.spend, request_id=request.scope["state"].get("request_id"))

    @staticmethod
    def _reply(answer: Any, sse: bool, headers: dict[str, str], status: int = 200) -> RawResponse:
        if sse and status == 200:
            event = b"event: message\ndata: " + dumps(answer) + b"\n\n"
            return RawResponse(status, event, {**headers, "Cache-Control": "no-cache"}, b"text/event-stream")
        return RawResponse(status, dumps(answer), headers)


# The HTTP status of a 2026-07-28 error answer, as that revision's transport gives it: a request the
# server will not process is 400, a method it does not offer 404 (so that a client can tell a modern
# server's refusal from a legacy server's). The handshake era sends every JSON-RPC error with 200:
# clients of those revisions read the body, and older SDKs drop the connection on other statuses.
_MODERN_ERROR_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def _status(answer: Any, modern: bool) -> int:
    if not modern or not isinstance(answer, dict) or "error" not in answer:
        return 200
    return _MODERN_ERROR_STATUS.get(answer["error"]["code"], 200)


def routes(intel: Intel, settings: Settings) -> list[BaseRoute]:
    """``/mcp`` and ``/mcp/``, both answering (no redirect)."""
    endpoint = McpEndpoint(intel, settings)
    return [Route(path, endpoint, name=f"mcp{i}") for i, path in enumerate(sorted(PATHS))]
