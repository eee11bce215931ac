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
    net: FakeInternet, city_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, Popen, int]]:
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


@pytest.fixture(scope="module")
def documented(hostile_server: tuple[httpx.Client, Popen, int]) -> dict[str, set[int]]:
    """Operation path -> the statuses /openapi.json documents for its GET."""
    client, _proc, _port = hostile_server
    paths = client.get("/openapi.json").json()["paths"]
    return {path: {int(status) for status in item["get"]["responses"]} for path, item in paths.items() if "get" in item}


@pytest.mark.parametrize(
    ("operation", "path", "statuses"),
    [
        ("/ip/{ip}", "/ip/8.8.8.8%2F24", {404}),
        ("/ip/{ip}", "/ip/%2e%2e", {400}),
        ("/ip/{ip}", "/ip/..%2f..%2fetc%2fpasswd", {404}),
        ("/ip/{ip}/vpn", "/ip/8.8.8.8%2F24/vpn", {404}),
        ("/ip/{ip}/vpn", "/ip/%2e%2e/vpn", {400}),
        ("/blacklist/{ip}", "/blacklist/8.8.8.8%2F32", {404}),
        ("/whois/{ip}", "/whois/8.8.8.8%2F..%2F..", {404}),
        ("/dns/{ip}/reverse", "/dns/8.8.8.8%2Fx/reverse", {404}),
        ("/dns/{domain}", "/dns/%2e%2e%2fexample.com", {400, 404}),
        ("/dns/{domain}", "/dns/example.com%2e%2e", {400}),
        ("/ip/{ip}", "/ip/" + "a" * 10_000, {400}),
        ("/dns/{domain}", "/dns/" + "a" * 10_000, {400}),
        ("/dns/{domain}", "/dns/" + "a." * 5_000 + "com", {400}),
        ("/ip/{ip}", "/ip/%00", {400}),
        ("/ip/{ip}", "/ip/%0d%0aSet-Cookie:x", {400}),
        ("/dns/{domain}", "/dns/%ff%fe.com", {400}),
        ("/dns/{domain}", "/dns/%ED%A0%80.com", {400}),  # an encoded UTF-16 surrogate
        ("/dns/{domain}", "/dns/%E2%80%AE.com", {400}),  # right-to-left override
        ("/dns/{domain}", "/dns/example.com?type=" + "A" * 10_000, {400}),
        ("/cidr", "/cidr?range=" + "1" * 10_000, {400}),
        ("/cidr", "/cidr?range=%00/8", {400}),
        ("/cidr", "/cidr?range=1.2.3.4/" + "9" * 5_000, {400}),
        ("/cidr", "/cidr?range=::/129", {400}),
        ("/cidr", "/cidr?" + "&".join(f"range=10.0.0.{i}/32" for i in range(2_000)), {200, 400}),
        ("/ip/{ip}/profile", "/ip/8.8.8.8%2F24/profile", {404}),
        ("/ip/{ip}/profile", "/ip/%2e%2e/profile", {400}),
        ("/ip/{ip}/profile", "/ip/" + "a" * 10_000 + "/profile", {400}),
        ("/ip/{ip}/profile", "/ip/%00/profile", {400}),
        ("/ip/{ip}/profile", "/ip/%ED%A0%80/profile", {400}),
        ("/ip/{ip}/profile", "/ip/8.8.8.8/profile?include=" + "geo," * 3_000 + "x", {400}),
        ("/ip/{ip}/profile", "/ip/8.8.8.8/profile?include=%00", {400}),
        ("/ip/{ip}/profile", "/ip/8.8.8.8/profile?" + "&".join(["include=nope"] * 2_000), {400}),
    ],
)
def test_hostile_paths_get_clear_documented_errors(
    hostile_server: tuple[httpx.Client, Popen, int],
    documented: dict[str, set[int]],
    operation: str,
    path: str,
    statuses: set[int],
) -> None:
    """A clear error, and one /openapi.json documents for the route the path was aimed at
    (an encoded slash makes it another route: 404 ``not_found``, documented on every route
    with a path parameter)."""
    client, proc, _port = hostile_server
    response = client.get(path)  # the client's hook validates the JSON error body against schemas/error.json
    assert response.status_code in statuses, (path[:80], response.status_code, response.text[:200])
    assert response.status_code in documented[operation], (operation, response.status_code)
    assert len(response.content) < 4096, "an error echoes at most a bounded part of the input"
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
    # Mixed scripts in one label (Cyrillic а in Latin "paypal") are allowed by IDNA 2008 (UTS 39's
    # confusable checks are a display policy for browsers): looked up as its own A-label, and the
    # answer names it, so it can never pass for paypal.com.
    mixed = client.get("/dns/pаypаl.com")
    assert mixed.status_code == 404
    assert "xn--pypl-53dc.com" in mixed.json()["error"]["message"]
    assert "paypal.com" not in mixed.text
    # What IDNA 2008 forbids is invalid_domain: a zero-width joiner between Latin letters,
    # symbols (emoji), a leading hyphen.
    for forbidden in ("a\u200db.com", "😀.com", "-apple.com"):
        response = client.get(f"/dns/{forbidden}")
        assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_domain"), forbidden


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


def _ips(*texts: bytes) -> bytes:
    return b'{"ips": [' + b",".join(texts) + b"]}"


# (body, the statuses it may get): every one must be an answer /openapi.json documents for POST /ip/batch.
HOSTILE_BATCHES = {
    "an array over the body limit": (b'{"ips": [' + b'"8.8.8.8",' * 200_000 + b'"1"]}', {413}),
    "a hundred thousand addresses": (_ips(*[b'"1.2.3.4"'] * 100_000), {400}),
    "1,001 addresses": (_ips(*[b'"8.8.8.8"'] * 1_001), {400}),
    "deeply nested ips": (b'{"ips": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", {400}),
    "nested just under the parser's limit": (b'{"ips": ' + b"[" * 500 + b"]" * 500 + b"}", {400}),
    "deeply nested include": (b'{"ips": ["8.8.8.8"], "include": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", {400}),
    "nested objects": (b'{"ips": ["8.8.8.8"], "x": ' + b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"}", {400}),
    "10 kB strings as addresses": (_ips(*[b'"' + b"1" * 10_000 + b'"'] * 50), {200}),
    "duplicate keys, the last a string": (b'{"ips": ["8.8.8.8"], "ips": "8.8.8.8"}', {400}),
    "duplicate keys, the last a list": (b'{"ips": "8.8.8.8", "ips": ["8.8.8.8"]}', {200}),
    "non-UTF-8 bytes": (b'{"ips": ["\xff\xfe8.8.8.8"]}', {400}),
    "a lone surrogate": (b'{"ips": ["\\ud800"]}', {200, 400}),
    "NUL and control characters": (_ips(b'"8.8.8.8\\u0000"', b'"\\r\\nSet-Cookie: x"'), {200}),
    "a byte-order mark": (b'\xef\xbb\xbf{"ips": ["8.8.8.8"]}', {200, 400}),
    "a huge number": (_ips(b"1e999999"), {400}),
    "a thousand include entries": (b'{"ips": ["8.8.8.8"], "include": [' + b'"geo",' * 1_000 + b'"vpn"]}', {200}),
    "a member name of 100 kB": (b'{"' + b"i" * 100_000 + b'": 1}', {400}),
}


@pytest.mark.parametrize("body", HOSTILE_BATCHES.values(), ids=HOSTILE_BATCHES.keys())
def test_hostile_batch_bodies(hostile_server: tuple[httpx.Client, Popen, int], body: tuple[bytes, set[int]]) -> None:
    """A clear, documented answer for every batch body a hostile client can send; no error message echoes
    kilobytes of it (an entry's "ip" is the address as given: that one is echoed, by contract)."""
    client, proc, _port = hostile_server
    content, statuses = body
    documented = {int(s) for s in client.get("/openapi.json").json()["paths"]["/ip/batch"]["post"]["responses"]}
    response = client.post("/ip/batch", content=content, headers={"Content-Type": "application/json"})
    # The client's hook has validated the answer against schemas/ip_batch.json or schemas/error.json.
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    assert response.status_code in documented
    answer = response.json()
    if "error" in answer:
        assert len(response.content) < 1024, "an error echoes at most a bounded part of the input"
    else:
        for entry in answer["data"]["results"]:
            assert len(entry.get("error", {}).get("message", "")) < 300, entry["error"]["message"][:300]
    assert proc.poll() is None
    assert client.get("/healthz").status_code == 200


def mcp_post(client: httpx.Client, body: bytes, **headers: str) -> httpx.Response:
    return client.post("/mcp", content=body, headers={"Content-Type": "application/json", **headers})


def tool_call(name: str, arguments: object) -> bytes:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    return json.dumps(body).encode()


def test_deep_nesting_inside_a_valid_envelope(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    """Nesting that the JSON parser still accepts reaches argument validation and is refused there;
    nesting beyond it is a parse error, never a crash (RecursionError) of the schema validation."""
    client, proc, _port = hostile_server
    for depth in (500, 900):
        nested = b"[" * depth + b"]" * depth
        prefix = (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate_cidr","arguments":{"range":'
        )
        answer = mcp_post(client, prefix + nested + b"}}}").json()
        assert answer["result"]["isError"] is True, answer
        assert json.loads(answer["result"]["content"][0]["text"])["error"]["code"] == "invalid_range"
        deep_params = (
            b'{"jsonrpc":"2.0","id":2,"method":"ping","params":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"
        )
        answer = mcp_post(client, deep_params).json()
        assert "result" in answer or answer["error"]["code"] in (-32700, -32600), answer
        assert answer.get("error", {}).get("code") != -32603
    too_deep = b'{"jsonrpc":"2.0","id":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b',"method":"ping"}'
    assert mcp_post(client, too_deep).json()["error"]["code"] == -32700
    assert proc.poll() is None


def test_huge_tool_arguments_are_refused_briefly(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    client, _proc, _port = hostile_server
    cases = [
        ("lookup_dns", {"domain": "a" * 10_000}, "invalid_domain"),
        ("lookup_dns", {"domain": "example.com", "type": "A" * 10_000}, "invalid_record_type"),
        ("lookup_ip", {"ip": "1" * 100_000}, "invalid_ip"),
        ("calculate_cidr", {"range": "10.0.0.0/" + "8" * 10_000}, "invalid_range"),
        ("check_blacklist", {"ip": "8.8.8.8", "extra": "x" * 100_000}, None),
    ]
    for tool, arguments, code in cases:
        response = mcp_post(client, tool_call(tool, arguments))
        answer = response.json()
        assert answer["result"]["isError"] is True, (tool, answer)
        error = json.loads(answer["result"]["content"][0]["text"])["error"]
        assert code is None or error["code"] == code, (tool, error)
        assert len(response.content) < 4096, (tool, len(response.content))


@pytest.mark.parametrize("sse", [False, True])
def test_lone_surrogates_are_echoed_escaped(hostile_server: tuple[httpx.Client, Popen, int], sse: bool) -> None:
    """A JSON string may hold an escaped lone surrogate ("\\ud800"), which UTF-8 cannot encode.
    Echoed back (as an id, or a method name in an error), it stays an escape: the answer is
    valid UTF-8 JSON, never -32603."""
    client, proc, _port = hostile_server
    headers = {"Accept": "text/event-stream"} if sse else {}
    bodies = [
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\\udfff/x"}',
        b'[{"jsonrpc":"2.0","id":"\\ud83d","method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]',
    ]
    for body in bodies:
        response = mcp_post(client, body, **headers)
        assert response.status_code == 200
        text = response.content.decode("utf-8")  # valid UTF-8
        payload = json.loads(text.removeprefix("event: message\ndata: ").strip()) if sse else json.loads(text)
        for answer in payload if isinstance(payload, list) else [payload]:
            assert answer.get("error", {}).get("code") != -32603, answer
    ping = json.loads(mcp_post(client, bodies[0]).content)
    assert ping == {"jsonrpc": "2.0", "id": "\ud800", "result": {}}
    unknown = json.loads(mcp_post(client, bodies[1]).content)
    assert unknown["error"]["code"] == -32601
    assert proc.poll() is None


def test_hostile_request_headers(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    """An insane X-Request-Id is replaced, a forwarding-header flood from an untrusted peer is ignored."""
    client, _proc, _port = hostile_server
    for hostile in ("a" * 10_000, "<script>alert(1)</script>", "id with spaces", "é"):
        response = client.get("/healthz", headers={b"X-Request-Id": hostile.encode("utf-8")})
        request_id = response.headers["x-request-id"]
        assert request_id != hostile and len(request_id) <= 128 and request_id.isascii()
    flood = {"X-Forwarded-For": ", ".join(["1.2.3.4"] * 5_000), "Forwarded": "for=" + "x" * 10_000}
    response = client.get("/ip", headers=flood)
    assert response.status_code == 422  # the caller is the socket peer, 127.0.0.1, not a forged 1.2.3.4


def test_a_body_that_never_arrives_does_not_block_others(hostile_server: tuple[httpx.Client, Popen, int]) -> None:
    """Slow bodies: requests that announce more bytes than they send hold only their own connection."""
    client, _proc, port = hostile_server
    sockets = []
    try:
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            sockets.append(s)
        started = time.monotonic()
        answer = mcp_post(client, tool_call("calculate_cidr", {"range": "10.0.0.0/8"})).json()
        assert answer["result"]["isError"] is False
        assert time.monotonic() - started < 2.0
    finally:
        for s in sockets:
            s.close()


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


def test_silent_connections_are_closed_in_bounded_time() -> None:
    """Measured on the real server (each takes 75 s, too long for `make test`): an idle
    connection, headers that never end, headers dripped a line a second, and a body announced
    but never sent are all closed after 75 s. The last one only because of read_timeout: the
    keep-alive timer does not run while a request is in progress, so without it that
    connection was held for ever (found by the slowloris probes of issue 9)."""
    from ipintel.__main__ import hypercorn_config

    config = hypercorn_config("127.0.0.1", 0)
    assert 0 < config.keep_alive_timeout <= 120
    assert config.read_timeout is not None and 0 < config.read_timeout <= 120
    assert config.h11_max_incomplete_size <= 64 * 1024  # what one connection's headers may hold
