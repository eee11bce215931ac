"""The access log (docs/DEPLOYMENT.md#privacy-what-is-logged): one line per request with the route template, never the
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


def test_lines_are_formatted_when_written_out_not_when_recorded() -> None:
    """A request records its fields; the line is formatted at flush, with the time of the request."""
    stream = io.StringIO()
    log = logs.AccessLog(fmt="json", stream=stream)
    log.enabled = True
    log.write_request("abc", "GET", "/ip/{ip}", 200, 0.0012345, "192.0.2.1")
    log.write_request("def", "M-SEARCH", "unmatched", 405, 0.5, None)  # not letters: encoded in full
    log.write_request("ghi", "GET", 'odd "route"', 200, 0.001, 'a "unix" path')  # quoted as JSON
    log.flush()
    first, second, third = map(json.loads, stream.getvalue().splitlines())
    assert first["request_id"] == "abc" and first["duration_ms"] == 1.234 and first["client"] == "192.0.2.1"
    assert first["time"].endswith("Z") and len(first["time"]) == len("2026-01-01T00:00:00.000Z")
    assert (second["method"], second["status"], second["client"]) == ("M-SEARCH", 405, None)
    assert (third["route"], third["client"]) == ('odd "route"', 'a "unix" path')


def test_text_format() -> None:
    stream = io.StringIO()
    log = logs.AccessLog(fmt="text", stream=stream)
    log.enabled = True
    log.write_request("abc", "GET", "/cidr", 200, 0.002, "192.0.2.1")
    log.flush()
    line = stream.getvalue().strip()
    assert "INFO    ipintel.access: request_id=abc method=GET route=/cidr status=200 duration_ms=2.0" in line
    assert line.endswith("client=192.0.2.1")


async def test_the_buffer_is_bounded_a_full_one_is_written_at_once() -> None:
    stream = io.StringIO()
    log = logs.AccessLog(fmt="json", stream=stream, interval=60, max_pending=100)
    log.enabled = True
    for _ in range(99):
        log.write_request("abc", "GET", "/cidr", 200, 0.001, "192.0.2.1")
    assert stream.getvalue() == ""  # waiting for the timer, 60 s away
    log.write_request("abc", "GET", "/cidr", 200, 0.001, "192.0.2.1")
    assert len(stream.getvalue().splitlines()) == 100
    log.write_request("abc", "GET", "/cidr", 200, 0.001, "192.0.2.1")
    log.flush()
    assert len(stream.getvalue().splitlines()) == 101


def test_a_large_batch_is_written_in_whole_lines_each_write_small_enough_to_be_atomic() -> None:
    """Several workers share one pipe: a write over PIPE_BUF could interleave with another's."""
    from ipintel.logs import _whole_lines

    lines = [f"line {i} " + "x" * (i % 300) for i in range(500)]
    chunks = list(_whole_lines(lines))
    assert len(chunks) > 1
    assert all(chunk.endswith("\n") and len(chunk.encode()) <= 4096 for chunk in chunks)
    assert "".join(chunks) == "".join(line + "\n" for line in lines)
