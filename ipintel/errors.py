"""The error model (docs/API.md#errors): one exception type, one table of codes.

Capabilities raise :class:`ApiError` with a code from :data:`STATUS_BY_CODE`;
the REST adapter turns it into ``{"error": {code, message}}`` with the mapped
HTTP status, and the MCP adapter into an ``isError`` tool result. Nothing else
needs to know HTTP statuses.
"""

from __future__ import annotations

STATUS_BY_CODE: dict[str, int] = {
    "invalid_ip": 400,
    "invalid_domain": 400,
    "invalid_record_type": 400,
    "invalid_range": 400,
    "ipv6_not_supported": 400,
    "invalid_request": 400,
    "invalid_asn": 400,
    "unauthorized": 401,
    "origin_not_allowed": 403,
    "not_found": 404,
    "address_not_found": 404,
    "domain_not_found": 404,
    "registration_not_found": 404,
    "method_not_allowed": 405,
    "payload_too_large": 413,
    "misdirected_request": 421,
    "unsupported_media_type": 415,
    "reserved_address": 422,
    "rate_limited": 429,
    "internal_error": 500,
    "upstream_error": 502,
    "geoip_unavailable": 503,
    "upstream_timeout": 504,
}


class ApiError(Exception):
    """A failure a client can be told about: an error code (docs/API.md#errors) and a readable message."""

    def __init__(self, code: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        if code not in STATUS_BY_CODE:  # a typo here would otherwise surface as a 500
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = headers or {}

    @property
    def status(self) -> int:
        return STATUS_BY_CODE[self.code]

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}

    def __repr__(self) -> str:
        return f"ApiError({self.code!r}, {self.message!r})"


class UpstreamError(ApiError):
    """An upstream answered with an error or an answer we cannot use (502)."""

    def __init__(self, message: str) -> None:
        super().__init__("upstream_error", message)


class UpstreamTimeout(ApiError):
    """An upstream did not answer within its timeout (504)."""

    def __init__(self, message: str) -> None:
        super().__init__("upstream_timeout", message)
