"""The access log (README "Privacy"): one line per request with the route template, never the
looked-up address, domain or query string."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from ipintel import logs
from ipintel.settings import Settings
from tests.support.app import running_app


@pytest.fixture
def access_lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The access log switched on, as ``logs.configure("json")`` does in the server, into a buffer."""
    stream = io.StringIO()
    monkeypatch.setattr(logs.access_log, "stream", stream)
    monkeypatch.setattr(logs.access_log, "fmt", "json")
    monkeypatch.setattr(logs.access_log, "enabled", True)
    yield stream
    logs.access_log.flush()


async def test_access_lines_carry_the_route_template_not_the_lookup(
    settings: Settings, access_lines: io.StringIO
) -> None:
    limited = settings.replace(rate_limits={"general": 1, "dns": 30, "registry": 10})
    async with running_app(limited, client=("198.51.100.23", 5555)) as client:
        await client.get("/ip/8.8.8.8", headers={"X-Request-Id": "req-1"})
        await client.get("/ip/81.2.69.142", headers={"X-Request-Id": "req-2"})  # over the limit: 429
        await client.get("/cidr?range=203.0.113.77/24", headers={"X-Request-Id": "req-3"})
        await client.get("/no/such/8.8.4.4", headers={"X-Request-Id": "req-4"})
    logs.access_log.flush()
    lines = {entry["request_id"]: entry for entry in map(json.loads, access_lines.getvalue().splitlines())}
    assert set(lines) == {"req-1", "req-2", "req-3", "req-4"}
    assert (lines["req-1"]["route"], lines["req-1"]["status"]) == ("/ip/{ip}", 200)
    assert (lines["req-2"]["route"], lines["req-2"]["status"]) == ("/ip/{ip}", 429)
    assert lines["req-3"]["route"] == "/cidr"
    assert (lines["req-4"]["route"], lines["req-4"]["status"]) == ("unmatched", 404)
    for entry in lines.values():
        assert set(entry) == {
            "time",
            "level",
            "logger",
            "message",
            "request_id",
            "method",
            "route",
            "status",
            "duration_ms",
            "client",
        }
        assert entry["client"] == "198.51.100.23" and entry["level"] == "info"
        text = json.dumps(entry)
        for looked_up in ("8.8.8.8", "81.2.69.142", "203.0.113.77", "8.8.4.4", "range="):
            assert looked_up not in text
