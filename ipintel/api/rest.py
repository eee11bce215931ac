"""How a REST route is declared: one :class:`Endpoint` carries the handler and
everything the OpenAPI document and the rate limiter need to know about it.

Handlers are thin: they read path and query parameters, call one
:class:`~ipintel.service.Intel` method and return its ``data`` object. Errors
are raised as :class:`~ipintel.errors.ApiError` and rendered here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ipintel.errors import ApiError

if TYPE_CHECKING:
    from ipintel.service import Intel

Handler = Callable[[Request, "Intel"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Endpoint:
    path: str  # Starlette path, e.g. "/ip/{ip}"
    handler: Handler
    operation_id: str
    summary: str
    schema: str  # file in schemas/ describing the `data` object, without ".json"
    errors: tuple[str, ...]  # SPEC 2 codes this route can answer besides the common ones
    scope: str | None  # rate-limit scope (SPEC 5), None when not limited
    description: str = ""
    parameters: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    tags: tuple[str, ...] = ()

    def route(self) -> Route:
        handler = self.handler

        async def endpoint(request: Request) -> Response:
            try:
                data = await handler(request, request.app.state.intel)
            except ApiError as error:
                return error_response(error)
            return Response(render_data(data), media_type="application/json")

        return Route(self.path, endpoint, methods=["GET"], name=self.operation_id)


# Rendered bodies of recent data objects, by identity. A cached answer is the
# same (never mutated) object every time it is served, so its JSON is encoded
# once; the entry holds the object itself, so its id cannot be reused while
# the entry lives. Bounded: emptied when full.
_RENDERED: dict[int, tuple[object, bytes]] = {}
_RENDERED_MAX = 4096
_RENDERED_MAX_BODY = 4096


def render_data(data: dict[str, Any]) -> bytes:
    """``{"data": data}`` as JSON bytes (Starlette's JSONResponse encoding)."""
    known = _RENDERED.get(id(data))
    if known is not None and known[0] is data:
        return known[1]
    body = json.dumps({"data": data}, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode(
        "utf-8"
    )
    if len(body) <= _RENDERED_MAX_BODY:  # big answers (long DNS lists) are not worth holding
        if len(_RENDERED) >= _RENDERED_MAX:
            _RENDERED.clear()
        _RENDERED[id(data)] = (data, body)
    return body


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.to_dict(), status_code=error.status, headers=error.headers or None)


def path_param(name: str, description: str, example: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
        "example": example,
    }


def query_param(
    name: str, description: str, example: str, *, required: bool = False, schema: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "description": description,
        "schema": schema or {"type": "string"},
        "example": example,
    }
