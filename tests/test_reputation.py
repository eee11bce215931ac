"""Reputation sources of the blacklist check (docs/API.md#blacklist): StopForumSpam and AbuseIPDB,
asked over the service's HttpClient of a local aiohttp server that answers like them."""

from __future__ import annotations

import ipaddress
import time
from typing import Any

import pytest

from ipintel.capabilities import reputation
from ipintel.capabilities.reputation import SourceResult
from ipintel.infra.upstream import HttpClient
from tests.support.reputation_server import ReputationServer

IP = ipaddress.IPv4Address("45.33.32.156")


async def sfs(api: ReputationServer, http: HttpClient, timeout: float = 1.0) -> SourceResult:
    return await reputation.stopforumspam(IP, http=http, url=api.url("/api"), timeout=timeout)


async def abuse(api: ReputationServer, http: HttpClient, timeout: float = 1.0) -> SourceResult:
    return await reputation.abuseipdb(IP, http=http, url=api.url("/api/v2/check"), key="k3y", timeout=timeout)


# StopForumSpam --------------------------------------------------------------------------


async def test_stopforumspam_listed(api: ReputationServer, http: HttpClient) -> None:
    api.respond(
        body={
            "success": 1,
            "ip": {
                "value": str(IP),
                "appears": 1,
                "frequency": 42,
                "lastseen": "2024-05-01 10:00:00",
                "confidence": 87.5,
            },
        }
    )
    result = await sfs(api, http)
    assert result == SourceResult(
        "stopforumspam.com", "listed", "reported 42 times, last seen 2024-05-01 10:00:00, confidence 87.5 %"
    )
    (request,) = api.requests
    assert request.path == "/api"
    assert request.query["ip"] == str(IP) and "json" in request.query
    assert http.stats.calls[("reputation", "ok")] == 1


async def test_stopforumspam_clean(api: ReputationServer, http: HttpClient) -> None:
    api.respond(body={"success": 1, "ip": {"appears": 0, "frequency": 0}})
    assert await sfs(api, http) == SourceResult("stopforumspam.com", "clear")


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (200, {"success": 0, "error": "rate limit exceeded"}, "without success: rate limit exceeded"),
        (503, "Service Unavailable", "HTTP 503"),
        (500, {"success": 0, "error": "database down"}, "HTTP 500: database down"),
        (200, "<html>maintenance</html>", "not a JSON object"),
        (200, {"success": 1}, "without the 'ip' object"),
        (200, {"success": 1, "ip": {"frequency": 3}}, "'appears'"),
        (200, {"success": 1, "ip": {"appears": "yes"}}, "'appears'"),
        (200, {"success": 1, "ip": {"appears": 2}}, "'appears'"),
        (200, [1, 2], "not a JSON object"),
        (429, {"success": 0, "error": "x" * 1000}, "HTTP 429"),
    ],
    ids=[
        "error-json",
        "http-503",
        "http-500",
        "html",
        "no-ip",
        "no-appears",
        "text-appears",
        "bad-appears",
        "array",
        "long-error",
    ],
)
async def test_stopforumspam_failures_are_unavailable(
    api: ReputationServer, http: HttpClient, status: int, body: Any, words: str
) -> None:
    api.respond(status=status, body=body)
    result = await sfs(api, http)
    assert result.status == "unavailable" and result.listed is None
    assert words in (result.detail or "")
    assert len(result.detail or "") < 250  # an upstream's error text is shortened


async def test_stopforumspam_timeout(api: ReputationServer, http: HttpClient) -> None:
    api.respond(body={"success": 1, "ip": {"appears": 0}}, delay=5.0)
    started = time.perf_counter()
    result = await sfs(api, http, timeout=0.2)
    assert time.perf_counter() - started < 5.0  # before the source's answer could have come
    assert result == SourceResult("stopforumspam.com", "unavailable", "no answer within 0.2 s")
    assert http.stats.calls[("reputation", "timeout")] == 1


async def test_stopforumspam_unreachable(http: HttpClient) -> None:
    result = await reputation.stopforumspam(IP, http=http, url="http://127.0.0.1:9/api", timeout=0.5)
    assert result.status == "unavailable"
    assert "could not be reached" in (result.detail or "")


async def test_stopforumspam_oversized_body(api: ReputationServer, http: HttpClient) -> None:
    api.respond(body={"success": 1, "ip": {"appears": 0}, "padding": "x" * 200_000})
    result = await sfs(api, http)
    assert result.status == "unavailable" and "bytes" in (result.detail or "")


# AbuseIPDB ----------------------------------------------------------------------------------


def abuse_body(score: int, reports: int = 7) -> dict[str, Any]:
    return {
        "data": {
            "ipAddress": str(IP),
            "isPublic": True,
            "abuseConfidenceScore": score,
            "totalReports": reports,
            "lastReportedAt": "2024-05-01T10:00:00+00:00",
        }
    }


async def test_abuseipdb_listed_and_request_shape(api: ReputationServer, http: HttpClient) -> None:
    api.respond(body=abuse_body(100, 812))
    result = await abuse(api, http)
    assert result == SourceResult(
        "abuseipdb.com", "listed", "abuse confidence score 100/100 (listed from 50), 812 reports in 90 days"
    )
    (request,) = api.requests
    assert request.path == "/api/v2/check"
    assert request.query == {"ipAddress": str(IP), "maxAgeInDays": "90"}
    assert request.headers["Key"] == "k3y" and request.headers["Accept"] == "application/json"
    assert "k3y" not in request.raw_query  # the key travels in the header only


@pytest.mark.parametrize(("score", "status"), [(0, "clear"), (49, "clear"), (50, "listed"), (75, "listed")])
async def test_abuseipdb_threshold(api: ReputationServer, http: HttpClient, score: int, status: str) -> None:
    api.respond(body=abuse_body(score))
    result = await abuse(api, http)
    assert result.status == status
    assert f"score {score}/100" in (result.detail or "")


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (401, {"errors": [{"detail": "Authentication failed.", "status": 401}]}, "rejected the API key"),
        (429, {"errors": [{"detail": "Daily rate limit of 1000 requests exceeded.", "status": 429}]}, "quota"),
        (
            422,
            {"errors": [{"detail": "The ip address must be a valid IP address.", "status": 422}]},
            "HTTP 422: The ip",
        ),
        (502, "Bad Gateway", "HTTP 502"),
        (200, {"data": {"ipAddress": str(IP)}}, "abuseConfidenceScore"),
        (200, {"data": {"ipAddress": str(IP), "abuseConfidenceScore": 101}}, "abuseConfidenceScore"),
        (200, {"data": {"ipAddress": str(IP), "abuseConfidenceScore": True}}, "abuseConfidenceScore"),
        (200, {"data": {"ipAddress": "1.1.1.1", "abuseConfidenceScore": 0}}, "another address"),
        (200, {"errors": []}, "without a 'data' object"),
    ],
)
async def test_abuseipdb_failures_are_unavailable(
    api: ReputationServer, http: HttpClient, status: int, body: Any, words: str
) -> None:
    api.respond(status=status, body=body)
    result = await abuse(api, http)
    assert result.status == "unavailable"
    assert words in (result.detail or "")


async def test_abuseipdb_timeout(api: ReputationServer, http: HttpClient) -> None:
    api.respond(body=abuse_body(0), delay=2.0)
    result = await abuse(api, http, timeout=0.2)
    assert result == SourceResult("abuseipdb.com", "unavailable", "no answer within 0.2 s")
