"""A JSON request body, read within a limit and parsed: the intake of the two routes that take one
(``POST /mcp``, ``POST /ip/batch``); 415, 413 and a parse failure are :class:`~ipintel.errors.ApiError`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request

from ipintel.errors import ApiError

# After deciding to refuse a body over the limit, up to this much more (within DRAIN_SECONDS) is read and
# thrown away before the 413 goes out: the server closes a connection whose body was left unread, and a client
# that writes its whole body before reading (httpx, the SDKs) would otherwise see a reset instead of the answer.
DRAIN_BYTES = 4 * 1024 * 1024
DRAIN_SECONDS = 2.0


class NotJson(ApiError):
    """400 ``invalid_request``: the body is not one JSON document (the MCP endpoint answers it -32700)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("invalid_request", f"the body is not valid JSON{detail}")


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, parsed: 415 ``unsupported_media_type`` unless it is ``application/json``, 413
    ``payload_too_large`` past ``limit`` bytes (``IPINTEL_MAX_BODY_BYTES``), :class:`NotJson` when it does not
    parse."""
    content_type = request.headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "application/json":
        raise ApiError(
            "unsupported_media_type",
            f"the body must be application/json (Content-Type was {content_type[:60] or 'none'})",
        )
    body = await read_body(request, limit)
    if body is None:
        raise ApiError("payload_too_large", f"the body is over the limit of {limit} bytes (IPINTEL_MAX_BODY_BYTES)")
    return parse_json(body)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    """``body`` as JSON, else :class:`NotJson`. orjson reads the usual UTF-8 document; the json module what
    orjson refuses, so that an integer past 64 bits, a lone surrogate escape or UTF-16 still parse, and a
    broken document is reported with its line and column. NaN and Infinity are refused by both."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        raise NotJson(": it is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise NotJson(f" at line {exc.lineno} column {exc.colno}") from None
    except ValueError:  # UnicodeDecodeError, an integer of too many digits, NaN
        raise NotJson() from None


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` once it would exceed ``limit``: never more than ``limit`` bytes are kept (a declared
    ``Content-Length`` over it is refused before reading)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        if int(declared) <= limit + DRAIN_BYTES:
            await _discard(request.stream(), DRAIN_BYTES)
        return None
    body = bytearray()
    receive = request.receive
    while True:  # the ASGI messages themselves: Request.stream() costs a measurable share of a tools/call
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        if len(body) + len(chunk) > limit:
            if message.get("more_body", False):
                await _discard(request.stream(), DRAIN_BYTES)
            return None
        body += chunk
        if not message.get("more_body", False):
            return bytes(body)


async def _discard(chunks: AsyncIterator[bytes], budget: int) -> None:
    """Read and drop what is left of a refused body, up to ``budget`` bytes and :data:`DRAIN_SECONDS`."""
    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in chunks:
                budget -= len(chunk)
                if budget < 0:
                    return
