"""IP reputation databases over HTTP: the non-DNS source of a blacklist check (docs/API.md#blacklist).

Each function asks one database (StopForumSpam, or AbuseIPDB when keyed) about one address over the shared
:class:`~ipintel.infra.upstream.HttpClient`; like a DNSBL answer, an answer that is not a success carrying the
expected fields is ``unavailable``, never ``clear``.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from ipintel.errors import UpstreamError, UpstreamTimeout
from ipintel.infra.upstream import HttpClient

Status = Literal["listed", "clear", "unavailable"]

STOPFORUMSPAM_NAME = "stopforumspam.com"
ABUSEIPDB_NAME = "abuseipdb.com"
# The score (AbuseIPDB's confidence, in percent, that the address is abusive) from which its answer counts as a
# listing: "more likely than not". The detail always carries the score, so a client can apply its own threshold.
ABUSEIPDB_LISTED_AT = 50
# Reports older than this are ignored by AbuseIPDB when it computes the score.
ABUSEIPDB_MAX_AGE_DAYS = 90
# Both APIs answer a few hundred bytes for one address; anything bigger is not their answer.
_MAX_BODY = 64 * 1024
_MAX_ERROR_TEXT = 160


@dataclass(frozen=True)
class SourceResult:
    """One source's verdict in a blacklist check: an entry of ``sources`` (docs/API.md#blacklist)."""

    name: str
    status: Status
    detail: str | None = None

    @property
    def listed(self) -> bool | None:
        return {"listed": True, "clear": False}.get(self.status)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "status": self.status, "listed": self.listed}
        if self.detail:
            data["detail"] = self.detail
        return data


Reputation = Callable[[ipaddress.IPv4Address, float], Awaitable[SourceResult]]
"""A reputation source bound to its client: ``(ip, timeout) -> SourceResult``."""


@dataclass(frozen=True)
class ReputationClient:
    """The one reputation source of a blacklist check, bound to the shared HTTP client:
    AbuseIPDB when a key is configured, StopForumSpam otherwise. Called with
    the time left of the check's deadline; never waits longer than
    ``max_timeout`` (the upstream timeout) either."""

    http: HttpClient
    stopforumspam_url: str
    abuseipdb_url: str
    abuseipdb_key: str | None
    max_timeout: float

    @property
    def name(self) -> str:
        return ABUSEIPDB_NAME if self.abuseipdb_key else STOPFORUMSPAM_NAME

    async def __call__(self, ip: ipaddress.IPv4Address, timeout: float) -> SourceResult:
        limit = min(timeout, self.max_timeout)
        if self.abuseipdb_key:
            return await abuseipdb(ip, http=self.http, url=self.abuseipdb_url, key=self.abuseipdb_key, timeout=limit)
        return await stopforumspam(ip, http=self.http, url=self.stopforumspam_url, timeout=limit)


async def stopforumspam(ip: ipaddress.IPv4Address, *, http: HttpClient, url: str, timeout: float) -> SourceResult:
    """Ask a StopForumSpam-compatible API (``IPINTEL_REPUTATION_URL``) about ``ip``: it answers
    ``{"success": 1, "ip": {"appears": 0|1, "frequency": n, "lastseen": "...", "confidence": x}}``."""
    name = STOPFORUMSPAM_NAME
    # ``json`` is a bare flag in StopForumSpam's API; ``ip`` is a canonical IPv4 address and needs no quoting.
    query_url = f"{url}{'&' if '?' in url else '?'}ip={ip}&json"
    fetched = await _fetch(name, http, query_url, headers={"Accept": "application/json"}, timeout=timeout)
    if isinstance(fetched, SourceResult):
        return fetched
    status, body = fetched
    if status != 200:
        return _unavailable(name, f"answered HTTP {status}{_error_text(body)}")
    if not isinstance(body, dict):
        return _unavailable(name, "answered with a body that is not a JSON object")
    if body.get("success") != 1:
        return _unavailable(name, f"answered without success{_error_text(body)}")
    entry = body.get("ip")
    if not isinstance(entry, dict):
        return _unavailable(name, "answered success without the 'ip' object")
    appears = entry.get("appears")
    if not _is_int(appears) or appears not in (0, 1):
        return _unavailable(name, "answered without a valid 'appears' field")
    if appears == 0:
        return SourceResult(name, "clear")
    frequency = entry.get("frequency")
    parts = [f"reported {frequency} times" if _is_int(frequency) else "reported"]
    last_seen = entry.get("lastseen")
    if isinstance(last_seen, str) and last_seen:
        parts.append(f"last seen {last_seen[:40]}")
    confidence = entry.get("confidence")  # StopForumSpam's own, which decays with age
    if isinstance(confidence, int | float) and not isinstance(confidence, bool):
        parts.append(f"confidence {confidence:g} %")
    return SourceResult(name, "listed", ", ".join(parts))


async def abuseipdb(ip: ipaddress.IPv4Address, *, http: HttpClient, url: str, key: str, timeout: float) -> SourceResult:
    """Ask AbuseIPDB's v2 ``check`` endpoint (``IPINTEL_ABUSEIPDB_URL``) about ``ip``."""
    name = ABUSEIPDB_NAME
    fetched = await _fetch(
        name,
        http,
        url,
        # The key travels in a header, never in the URL, so it cannot leak into logs or error messages.
        headers={"Key": key, "Accept": "application/json"},
        params={"ipAddress": str(ip), "maxAgeInDays": str(ABUSEIPDB_MAX_AGE_DAYS)},
        timeout=timeout,
    )
    if isinstance(fetched, SourceResult):
        return fetched
    status, body = fetched
    if status in (401, 403):
        return _unavailable(name, f"rejected the API key (HTTP {status})")
    if status == 429:
        return _unavailable(name, "the API key's daily quota is spent (HTTP 429)")
    if status != 200:
        return _unavailable(name, f"answered HTTP {status}{_error_text(body)}")
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict):
        return _unavailable(name, f"answered without a 'data' object{_error_text(body)}")
    answered_for = data.get("ipAddress")
    if answered_for is not None and answered_for != str(ip):
        return _unavailable(name, "answered about another address")
    score = data.get("abuseConfidenceScore")
    if not _is_int(score) or not 0 <= score <= 100:
        return _unavailable(name, "answered without a valid abuseConfidenceScore")
    detail = f"abuse confidence score {score}/100 (listed from {ABUSEIPDB_LISTED_AT})"
    reports = data.get("totalReports")
    if _is_int(reports):
        detail += f", {reports} reports in {ABUSEIPDB_MAX_AGE_DAYS} days"
    return SourceResult(name, "listed" if score >= ABUSEIPDB_LISTED_AT else "clear", detail)


async def _fetch(
    name: str,
    http: HttpClient,
    url: str,
    *,
    headers: dict[str, str],
    timeout: float,
    params: dict[str, str] | None = None,
) -> tuple[int, Any] | SourceResult:
    """GET and parse JSON; a transport failure is already an ``unavailable`` result.

    The body is ``None`` when it is not JSON: callers decide what a non-JSON
    body means for their status code."""
    try:
        response = await http.get(
            url,
            headers=headers,
            params=params,
            timeout=timeout,
            max_bytes=_MAX_BODY,
            what=name,
            source="reputation",
        )
    except UpstreamTimeout:
        return _unavailable(name, f"no answer within {round(timeout, 3):g} s")
    except UpstreamError as error:
        return _unavailable(name, error.message)
    try:
        body = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        body = None
    return response.status, body


def _unavailable(name: str, detail: str) -> SourceResult:
    return SourceResult(name, "unavailable", detail)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _error_text(body: Any) -> str:
    """The error a reputation API put in its JSON (StopForumSpam's ``error``,
    AbuseIPDB's ``errors[0].detail``), shortened; empty when there is none."""
    text = None
    if isinstance(body, dict):
        if isinstance(body.get("error"), str):
            text = body["error"]
        elif isinstance(body.get("errors"), list) and body["errors"] and isinstance(body["errors"][0], dict):
            detail = body["errors"][0].get("detail")
            text = detail if isinstance(detail, str) else None
    if not text:
        return ""
    text = " ".join(text.split())
    if len(text) > _MAX_ERROR_TEXT:
        text = text[: _MAX_ERROR_TEXT - 1] + "…"
    return f": {text}"
