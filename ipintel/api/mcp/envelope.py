"""Which MCP revision a POST speaks (docs/MCP.md#versions), and the checks a 2026-07-28 request passes before it
is answered, in the revision's order ("Server Validation"): its ``_meta`` keys, its routing headers against its
body, its version. Nothing of HTTP statuses or tools: the transport maps codes to statuses, the protocol
answers methods.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Newest first. The legacy versions are those an ``initialize`` can agree on.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SUPPORTED_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + LEGACY_VERSIONS

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

# Error codes the revision defines in its reserved range (basic/index, "Error Codes").
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
INVALID_PARAMS = -32602

VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
_ROUTING_HEADERS = (VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
_RAW_NAMES = {name.encode("ascii"): name for name in _ROUTING_HEADERS}

# The param a method's ``Mcp-Name`` header mirrors. Only tools/call reaches us, but a client
# that sends prompts/get or resources/read still has its header checked before the -32601.
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

# A header value as the revision allows it: visible ASCII and space (RFC 9110 field values), else
# the client must send ``=?base64?…?=``.
_PLAIN_VALUE = re.compile(r"[\x20-\x7e]*")
_BASE64_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)


@dataclass(frozen=True)
class Rejection:
    """The first check a request failed, as the fields of a JSON-RPC error."""

    code: int
    message: str
    data: dict[str, Any] | None = None


def meta_version(message: Any) -> Any:
    """``params._meta[protocolVersion]`` of a message, or ``None`` where there is none."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None


def is_modern(payload: Any, header_version: str | None) -> bool:
    """Whether a parsed body (or an unparsable one, ``payload`` None) is to be answered as 2026-07-28."""
    if header_version is not None and header_version not in LEGACY_VERSIONS:
        return True
    if isinstance(payload, list):
        return any(meta_version(entry) is not None for entry in payload)
    return meta_version(payload) is not None


def unsupported(requested: Any) -> Rejection:
    """-32022 with every version we speak, so that a client can retry with one of them."""
    shown = requested if isinstance(requested, str) else repr(requested)
    return Rejection(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"protocol version {shown[:40]!r} is not supported; this server speaks {', '.join(SUPPORTED_VERSIONS)}",
        {"supported": list(SUPPORTED_VERSIONS), "requested": shown[:64]},
    )


def decode_header_value(value: str) -> str | None:
    """A header value as the client meant it: plain, or decoded from ``=?base64?…?=`` (UTF-8).

    ``None`` when the value is not a valid header value: characters outside
    visible ASCII, or a sentinel that is not canonical base64 of UTF-8 (so that
    a corrupt header can never equal a body value by accident)."""
    sentinel = _BASE64_SENTINEL.fullmatch(value)
    if sentinel is None:
        return value if _PLAIN_VALUE.fullmatch(value) else None
    payload = sentinel.group(1)
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


class RoutingHeaders:
    """The three routing headers of one request, each with every value it was sent with."""

    __slots__ = ("values",)

    def __init__(self, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.values: dict[str, list[str]] = {name: [] for name in _ROUTING_HEADERS}
        for key, value in raw_headers:  # ASGI header names are lower case
            name = _RAW_NAMES.get(key)
            if name is not None:
                self.values[name].append(value.decode("latin-1"))

    @property
    def version(self) -> str | None:
        found = self.values[VERSION_HEADER]
        return found[0] if found else None

    def check(self, message: dict[str, Any], version: Any) -> Rejection | None:
        """-32020 when a routing header is missing, repeated, malformed, or disagrees with the body."""
        for name in _ROUTING_HEADERS:
            if len(self.values[name]) > 1:
                return Rejection(HEADER_MISMATCH, f"the {_title(name)} header is sent more than once")
        method = message["method"]
        expected: list[tuple[str, Any]] = [(VERSION_HEADER, version), (METHOD_HEADER, method)]
        name_param = _NAME_PARAM.get(method)
        params = message.get("params")
        if name_param is not None and isinstance(params, dict) and params.get(name_param) is not None:
            expected.append((NAME_HEADER, params[name_param]))
        for header, body_value in expected:
            sent = self.values[header]
            if not sent:
                return Rejection(HEADER_MISMATCH, f"the {_title(header)} header is required on a 2026-07-28 request")
            value = decode_header_value(sent[0]) if header == NAME_HEADER else sent[0]
            if value is None:
                return Rejection(HEADER_MISMATCH, f"the {_title(header)} header is not a valid header value")
            if value != body_value:
                where = {VERSION_HEADER: f"params._meta[{PROTOCOL_VERSION_KEY!r}]", METHOD_HEADER: "method"}
                field = where.get(header, f"params.{name_param}")
                return Rejection(
                    HEADER_MISMATCH, f"header mismatch: the {_title(header)} header does not match the body's {field}"
                )
        return None

    def check_legacy(self, payload: Any) -> Rejection | None:
        """-32020 when a handshake-era body is sent with an ``Mcp-Method`` or ``Mcp-Name`` header that is
        repeated, malformed, or disagrees with a message of the body (issue 23, point 7).

        Those revisions define no routing headers, so they are optional; but a gateway that routes or limits
        on them (they are the 2026-07-28 way) must not be fooled by an older version header: when sent, they
        must name what every request of the body (each message of a batch) does."""
        sent = [name for name in (METHOD_HEADER, NAME_HEADER) if self.values[name]]
        if not sent:
            return None
        for name in sent:
            if len(self.values[name]) > 1:
                return Rejection(HEADER_MISMATCH, f"the {_title(name)} header is sent more than once")
        messages = payload if isinstance(payload, list) else [payload]
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                continue  # a response, or not a message: answered as such
            method = message["method"]
            if self.values[METHOD_HEADER] and self.values[METHOD_HEADER][0] != method:
                return Rejection(
                    HEADER_MISMATCH, "header mismatch: the Mcp-Method header does not match the body's method"
                )
            if self.values[NAME_HEADER]:
                param = _NAME_PARAM.get(method)
                params = message.get("params")
                value = params.get(param) if param is not None and isinstance(params, dict) else None
                if decode_header_value(self.values[NAME_HEADER][0]) != value or value is None:
                    return Rejection(
                        HEADER_MISMATCH, "header mismatch: the Mcp-Name header does not match the body's name"
                    )
        return None


def _title(header: str) -> str:
    return {VERSION_HEADER: "MCP-Protocol-Version", METHOD_HEADER: "Mcp-Method", NAME_HEADER: "Mcp-Name"}[header]


def check_request(message: dict[str, Any], headers: RoutingHeaders) -> Rejection | None:
    """The checks of a 2026-07-28 request, in the revision's order; ``None`` when it may be answered.

    ``message`` is a well-formed JSON-RPC request (its envelope already checked)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, Mapping) or PROTOCOL_VERSION_KEY not in meta:
        if headers.version is not None and headers.version not in SUPPORTED_VERSIONS:
            # No version in the body, and one in the header we do not speak: say so, rather than ask
            # for _meta keys that a client of an older revision never sends.
            return unsupported(headers.version)
    if not isinstance(meta, Mapping):
        return Rejection(
            INVALID_PARAMS,
            f"a 2026-07-28 request needs params._meta with {PROTOCOL_VERSION_KEY!r} and {CLIENT_CAPABILITIES_KEY!r}",
        )
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        return Rejection(INVALID_PARAMS, f"params._meta is missing {', '.join(repr(key) for key in missing)}")
    version = meta[PROTOCOL_VERSION_KEY]
    mismatch = headers.check(message, version)
    if mismatch is not None:
        return mismatch
    if not isinstance(version, str):
        return Rejection(INVALID_PARAMS, f"params._meta[{PROTOCOL_VERSION_KEY!r}] must be a string")
    if version not in MODERN_VERSIONS:
        return unsupported(version)
    return None


def check_notification(message: dict[str, Any], headers: RoutingHeaders) -> Rejection | None:
    """A 2026-07-28 notification is accepted (and dropped) unless it names a version we do not speak.

    The revision defines no client notification over HTTP and no header rules
    for one, so only the version is checked."""
    for version in (meta_version(message), headers.version):
        if version is not None and version not in SUPPORTED_VERSIONS:
            return unsupported(version)
    return None
