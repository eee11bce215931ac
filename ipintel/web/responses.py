"""The bodies of every JSON answer (docs/API.md#conventions) and the raw ASGI messages that send them.

A success is ``{"data": ...}``; a failure is rendered by :func:`send_failure`, the one place an
:class:`~ipintel.errors.ApiError` becomes bytes. All are encoded by :func:`ipintel.encoding.dumps`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ipintel.encoding import dumps
from ipintel.errors import ApiError
from ipintel.infra.memo import BoundedMemo

JSON = b"application/json"

# JSON-RPC's codes of a failure on the JSON-RPC endpoint's paths: "server error" for a refusal by the transport
# (the id is unknown: the request was not read), "internal error" for a bug.
RPC_SERVER_ERROR = -32000
RPC_INTERNAL_ERROR = -32603

Headers = Iterable[tuple[bytes, bytes]]

# Rendered bodies of recent data objects, by identity. A cached answer is the
# same (never mutated) object every time it is served, so its JSON is encoded
# once; the entry holds the object itself, so its id cannot be reused while
# the entry lives.
_RENDERED: BoundedMemo[int, tuple[object, bytes]] = BoundedMemo(4096)
_RENDERED_MAX_BODY = 4096  # big answers (long DNS lists) are not worth holding


def data_body(data: Mapping[str, Any]) -> bytes:
    """``{"data": data}``, the body of every success."""
    known = _RENDERED.get(id(data))
    if known is not None and known[0] is data:
        return known[1]
    body = dumps({"data": data})
    if len(body) <= _RENDERED_MAX_BODY:
        _RENDERED[id(data)] = (data, body)
    return body


def fresh_data_body(data: Mapping[str, Any]) -> bytes:
    """``{"data": data}`` for an answer computed afresh every time, which is never worth remembering."""
    return dumps({"data": data})


def error_body(error: ApiError) -> bytes:
    """``{"error": {"code", "message"}}``, the body of every REST failure (docs/API.md#errors)."""
    return dumps(error.to_dict())


def rpc_error(id_: str | int | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC 2.0 error response (``data`` only when there is some), the body of every MCP failure."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": body}


def rpc_failure_body(error: ApiError) -> bytes:
    """``error`` as the JSON-RPC endpoint answers a request it refused before reading it (docs/MCP.md): id
    ``null``, code -32000 (-32603 for a bug), ``data`` with the HTTP status and the REST error code."""
    code = RPC_INTERNAL_ERROR if error.code == "internal_error" else RPC_SERVER_ERROR
    return dumps(rpc_error(None, code, error.message, {"httpStatus": error.status, "code": error.code}))


def raw_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``{"Name": "value"}`` as ASGI headers (lower-case names, latin-1)."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


async def send_body(
    send: Send, status: int, body: bytes, headers: Headers = (), *, content_type: bytes = JSON, head: bool = False
) -> None:
    """Send a whole answer: its ``content-type`` and ``content-length``, then ``headers``, then the body
    (none for ``HEAD``, whose length is still the body's)."""
    start = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def send_failure(
    send: Send, error: ApiError, headers: Headers = (), *, rpc: bool = False, head: bool = False
) -> None:
    """Send ``error``: its status, its own headers and then ``headers``, and its body, a JSON-RPC error when
    ``rpc`` (a path of the JSON-RPC endpoint) else the REST error body (none for ``HEAD``). The one place a
    failure becomes bytes: everything else raises :class:`~ipintel.errors.ApiError` to the request middleware."""
    body = rpc_failure_body(error) if rpc else error_body(error)
    await send_body(send, error.status, body, [*raw_headers(error.headers), *headers], head=head)


def json_response(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``body`` as a Starlette ``Response``, for what must return one (function routes, exception handlers)."""
    return Response(body, status_code=status, headers=headers, media_type="application/json")


class RawResponse:
    """A finished answer as an ASGI app: what Starlette's ``Response`` would send, without building one."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str], content_type: bytes = JSON) -> None:
        self.status, self.body, self.headers, self.content_type = status, body, headers, content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_body(send, self.status, self.body, raw_headers(self.headers), content_type=self.content_type)
