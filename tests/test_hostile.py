"""Hostile input against the real server process: every abuse gets a clear,
documented answer (or the connection is refused at the HTTP layer), the
server stays up, and its memory stays flat."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import httpx
import pytest

from tests.support.app import server_process
from tests.support.fake_internet import FakeInternet


@pytest.fixture(scope="module")
def hostile_server(
    city_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, Popen, int]]:
    with FakeInternet() as net:
        env = {
            **net.env,
            "IPINTEL_GEOIP_CITY_DB": str(city_db),
            "IPINTEL_DATA_DIR": str(tmp_path_factory.mktemp("hostile-data")),
            "IPINTEL_RATE_LIMITS": "off",
            "IPINTEL_FEEDS": "off",
            "IPINTEL_LOG_LEVEL": "WARNING",
        }
        with server_process(env) as (client, proc):
            yield client, proc, client.base_url.port  # type: ignore[misc]


def rss_kib(proc: Popen) -> int:
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def raw(port: int, payload: bytes, *, timeout: float = 5.0) -> bytes:
    """Send bytes as they are and read the answer (what an HTTP client library would refuse to send)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and b"content-length: 0" not in b"".join(chunks).lower():
                    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
                    length = next(
                        (
                            int(line.split(b":")[1])
                            for line in head.split(b"\r\n")
                            if line.lower().startswith(b"content-length:")
                        ),
                        None,
                    )
                    if length is not None and len(body) >= length:
                        break
        except (TimeoutError, ConnectionResetError):
            pass
        return b"".join(chunks)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.parametrize(
    ("path", "statuses"),
    [
        ("/ip/8.8.8.8%2F24", {404}),
        ("/ip/%2e%2e", {400}),
        ("/ip/..%2f..%2fetc%2fpasswd", {404}),
        ("/dns/%2e%2e%2fexample.com", {400, 404}),
        ("/ip/" + "a" * 10_000, {400}),
        ("/dns/" + "a" * 10_000, {400}),
        ("/ip/%00", {400}),
        ("/ip/%0d%0aSet-Cookie:x", {400}),
        ("/dns/%ff%fe.com", {400}),
        ("/cidr?range=" + "1" * 10_000, {400}),
        ("/cidr?range=%00/8", {400}),
    ],
)
def test_hostile_paths_get_clear_errors(
    hostile_server: tuple[httpx.Client, Popen, int], path: str, statuses: set[int]
) -> None:
    client, proc, _port = hostile_server
    response = client.get(path)  # the client's hook validates the JSON error body against schemas/error.json
    assert response.status_code in statuses, (path, response.status_code, response.text[:200])
    assert proc.poll() is None


@pytest.mark.parametrize("target", [b"/ip/\xff\xfe", b"/ip/8.8.8.8\x01", b"/dns/\xc3\x28.com", b"/ip/\x7f"])
def test_raw_bytes_in_the_request_line(hostile_server: tuple[httpx.Client, Popen, int], target: bytes) -> None:
    _client, proc, port = hostile_server
    answer = raw(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    # Either the HTTP layer refuses the request line (400 from hypercorn) or the route answers a JSON error.
    assert status_of(answer) in (400, 404), answer[:300]
    assert proc.poll() is None


def test_whole_ranges(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    client, _proc, _port = hostile_server
    v4 = client.get("/cidr", params={"range": "0.0.0.0/0"}).json()["data"]
    v6 = client.get("/cidr", params={"range": "::/0"}).json()["data"]
    assert v4["totalHosts"] == 2**32 and v6["totalHosts"] == 2**128


def test_idn_homograph_is_looked_up_as_its_punycode(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    """Cyrillic 'а' in 'аpple.com' is a valid IDN: it is answered as its own A-label
    (xn--pple-43d.com), never as apple.com, so the answer cannot be mistaken for the
    real name's (documented in the README)."""
    client, _proc, _port = hostile_server
    response = client.get("/dns/аpple.com")
    assert response.status_code == 404
    assert "xn--pple-43d.com" in response.json()["error"]["message"]
    mixed = client.get("/dns/pаypаl.com")  # mixed scripts in one label: still one valid IDN label
    assert mixed.status_code in (400, 404)


def test_header_floods_are_refused_and_the_server_lives(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    client, proc, port = hostile_server
    many = b"".join(b"X-H%d: %s\r\n" % (i, b"a" * 20) for i in range(3000))
    answer = raw(port, b"GET /ip/8.8.8.8 HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    assert status_of(answer) in (0, 400, 413, 431)  # refused, or the connection closed
    huge = raw(port, b"GET /ip/8.8.8.8 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n")
    assert status_of(huge) in (0, 400, 413, 431)
    assert proc.poll() is None
    assert client.get("/healthz").status_code == 200


def test_hostile_mcp_bodies(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    client, proc, _port = hostile_server
    headers = {"Content-Type": "application/json"}
    too_big = client.post("/mcp", content=b"[" + b"1," * 1_000_000 + b"1]", headers=headers)
    assert too_big.status_code == 413
    nested = client.post("/mcp", content=b"[" * 50_000 + b"]" * 50_000, headers=headers)
    assert nested.status_code == 200 and nested.json()["error"]["code"] in (-32700, -32600)
    ping = {"jsonrpc": "2.0", "method": "ping"}
    batch = client.post("/mcp", content=json.dumps([{**ping, "id": i} for i in range(5000)]), headers=headers)
    assert batch.status_code == 200 and batch.json()["error"]["code"] == -32600
    assert proc.poll() is None


def test_slow_clients_do_not_block_others(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    """Slowloris: many connections that never finish their headers."""
    client, _proc, port = hostile_server
    sockets = []
    try:
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET /ip/8.8.8.8 HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            sockets.append(s)
        started = time.monotonic()
        assert client.get("/cidr", params={"range": "10.0.0.0/8"}).status_code == 200
        assert time.monotonic() - started < 2.0
    finally:
        for s in sockets:
            s.close()


def test_memory_stays_flat_under_a_hostile_burst(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    client, proc, _port = hostile_server
    headers = {"Content-Type": "application/json"}

    def burst(n: int) -> None:
        for i in range(n):
            client.get(f"/ip/{'x' * (i % 200)}{i}")
            client.get(f"/dns/host{i}.{'a' * 50}.invalid-tld-{i}")
            client.get("/cidr", params={"range": f"10.{i % 256}.0.0/{i % 33}"})
            client.post("/mcp", content=b"[" * 5000, headers=headers)

    burst(200)  # warm-up: caches, allocator arenas
    before = rss_kib(proc)
    burst(1000)
    after = rss_kib(proc)
    assert after - before < 30 * 1024, f"RSS grew from {before} KiB to {after} KiB"
