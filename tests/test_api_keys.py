"""API keys (``IPINTEL_API_KEYS_FILE``, docs/API.md#authentication): accepted, refused, rotated, never logged.

Against the app (its middleware, gate and routes) and, for the start, SIGHUP and the logs, the real server
process. The keys are made as ``make api-key`` makes them (scripts/api-key).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ipintel.infra.limiter import Quota
from ipintel.settings import Settings
from ipintel.web.key_file import KeyFileError, parse_key_file
from tests.support.app import ROOT, running_app, server_process, settings_env, wait_for
from tests.support.clock import FakeClock
from tests.support.mcp import JSON_HEADERS, answers_of, error_of
from tests.support.redis import RedisServer, require_redis

ALICE = secrets.token_urlsafe(32)
BOB = secrets.token_urlsafe(32)
CAROL = secrets.token_urlsafe(32)
LIMITED = {Quota.GENERAL: 60, Quota.DNS: 30, Quota.REGISTRY: 10}


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def line(name: str, key: str, limits: str = "") -> str:
    return f"{name} sha256:{digest(key)} {limits}".rstrip()


def write_keys(path: Path, *lines: str) -> Path:
    """Replace the file as an operator (or Kubernetes) does: a new file renamed over the old one."""
    aside = path.with_name(path.name + ".new")
    aside.write_text("# ipintel API keys\n" + "".join(f"{entry}\n" for entry in lines))
    os.replace(aside, path)
    return path


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    return write_keys(tmp_path / "keys.txt", line("alice", ALICE), line("bob", BOB, "general=3,registry=1"))


@pytest.fixture
def keyed(settings: Settings, keys_file: Path) -> Settings:
    return settings.replace(api_keys_file=keys_file)


# The file ---------------------------------------------------------------------------------------------


def test_the_file_format() -> None:
    text = f"""
    # a comment line, and blank lines
    {line("alice", ALICE)}   # a trailing comment
    {line("ci.build-1_x", BOB, "general=600,DNS=120")}
    """
    alice, ci = parse_key_file(text)
    assert (alice.name, alice.digest.hex(), alice.limits, alice.line) == ("alice", digest(ALICE), None, 3)
    assert (ci.name, ci.limits, ci.line) == ("ci.build-1_x", {Quota.GENERAL: 600, Quota.DNS: 120}, 4)
    assert parse_key_file(line("x", ALICE).replace(digest(ALICE), digest(ALICE).upper()))[0].digest.hex() == digest(
        ALICE
    )
    assert parse_key_file("# no key yet\n") == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"bad/name sha256:{digest(ALICE)}", "the name must be"),
        (f"{'n' * 65} sha256:{digest(ALICE)}", "the name must be"),
        ("alice", "a name without a digest"),
        (f"alice {ALICE}", "must be sha256: followed by 64 hexadecimal digits"),  # the key pasted, not its digest
        (f"alice sha256:{digest(ALICE)[:-1]}", "must be sha256: followed by 64"),
        (f"alice md5:{digest(ALICE)}", "must be sha256:"),
        (f"alice sha256:{digest(ALICE)} general=0", "must be 1 to 1000000"),
        (f"alice sha256:{digest(ALICE)} general=x", "must be scope=N items"),
        (f"alice sha256:{digest(ALICE)} other=5", "must be scope=N items"),
        (f"alice sha256:{digest(ALICE)} dns=5,dns=6", "twice"),
        (f"alice sha256:{digest(ALICE)} general=5 extra", "no more fields"),
    ],
    # Named, not shown: the keys are random, and a test's id must be the same in every process that collects it
    # (pytest-xdist's workers each collect the suite and compare).
    ids=[
        "slash-in-name",
        "name-too-long",
        "no-digest",
        "key-not-digest",
        "digest-too-short",
        "md5",
        "zero-limit",
        "limit-not-a-number",
        "unknown-scope",
        "scope-twice",
        "extra-field",
    ],
)
def test_a_malformed_line_names_its_number_never_its_text(text: str, reason: str) -> None:
    with pytest.raises(KeyFileError) as raised:
        parse_key_file(f"# keys\n{line('first', CAROL)}\n{text}\n", "keys.txt")
    message = str(raised.value)
    assert message.startswith("keys.txt line 3: ") and reason in message
    assert digest(ALICE) not in message.lower() and ALICE not in message and digest(ALICE)[:-1] not in message


def test_duplicate_names_and_keys_are_refused() -> None:
    with pytest.raises(KeyFileError, match="line 2: the name is already used on line 1"):
        parse_key_file(f"{line('alice', ALICE)}\n{line('alice', BOB)}")
    with pytest.raises(KeyFileError, match="line 3: the key is the same key as on line 1") as raised:
        parse_key_file(f"{line('alice', ALICE)}\n\n{line('bob', ALICE)}")
    assert digest(ALICE) not in str(raised.value)


def test_make_api_key_prints_a_key_and_its_line() -> None:
    made = subprocess.run(
        ["make", "-s", "api-key", "NAME=ci", "LIMITS=general=600,dns=60"], cwd=ROOT, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    key = made.stderr.split("stored nowhere:\n", 1)[1].split()[0]
    assert len(key) >= 43 and made.stdout == f"{line('ci', key, 'general=600,dns=60')}\n"
    (parsed,) = parse_key_file(made.stdout)  # the line is a valid line of the file
    assert parsed.digest.hex() == digest(key) and key not in made.stdout
    refused = subprocess.run(["make", "-s", "api-key", "NAME=no way"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode != 0 and not refused.stdout


# Accepted and refused ---------------------------------------------------------------------------------


async def test_a_key_is_accepted_as_bearer_or_x_api_key(keyed: Settings) -> None:
    async with running_app(keyed) as client:
        for headers in (bearer(ALICE), {"Authorization": f"bearer  {BOB} "}, {"X-API-Key": ALICE}):
            response = await client.get("/ip/8.8.8.8", headers=headers)
            assert response.status_code == 200, response.text
        assert (await client.get("/cidr?range=10.0.0.0/8", headers={"X-API-Key": BOB})).status_code == 200
        # A Bearer key wins over X-API-Key.
        assert (await client.get("/ip/8.8.8.8", headers={**bearer("wrong"), "X-API-Key": ALICE})).status_code == 401
        # Another Authorization scheme (a proxy's Basic credentials) leaves X-API-Key in charge.
        basic = {"Authorization": "Basic dXNlcjpwYXNz", "X-API-Key": ALICE}
        assert (await client.get("/ip/8.8.8.8", headers=basic)).status_code == 200


@pytest.mark.parametrize(
    ("headers", "challenge", "message"),
    [
        ({}, 'Bearer realm="ipintel"', "requires an API key"),
        (bearer("not-a-key"), 'Bearer realm="ipintel", error="invalid_token"', "not valid"),
        ({"X-API-Key": ALICE + "x"}, 'Bearer realm="ipintel", error="invalid_token"', "not valid"),
        ({"X-API-Key": "x" * 5000}, 'Bearer realm="ipintel", error="invalid_token"', "not valid"),
        ({"Authorization": f"Basic {ALICE}"}, 'Bearer realm="ipintel", error="invalid_request"', "must be 'Bearer"),
        ({"Authorization": "Bearer"}, 'Bearer realm="ipintel", error="invalid_request"', "must be 'Bearer"),
        ({"Authorization": f"Bearer {ALICE} {ALICE}"}, 'Bearer realm="ipintel", error="invalid_request"', "Bearer"),
        ({"X-API-Key": " "}, 'Bearer realm="ipintel", error="invalid_request"', "must be 'Bearer"),
    ],
)
async def test_a_request_without_a_valid_key_is_refused_401(
    keyed: Settings, headers: dict[str, str], challenge: str, message: str
) -> None:
    async with running_app(keyed.replace(rate_limits=LIMITED)) as client:
        for path in ("/ip/8.8.8.8", "/whois/8.8.8.8", "/dns/example.com", "/ip/8.8.8.8/profile", "/ip"):
            response = await client.get(path, headers=headers)
            assert response.status_code == 401, (path, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
            assert message in response.json()["error"]["message"]
            assert response.headers["www-authenticate"] == challenge
            assert "ratelimit-limit" not in response.headers, "a refused request spends no token"
            assert response.headers["x-request-id"]
        head = await client.head("/ip/8.8.8.8", headers=headers)
        assert head.status_code == 401 and head.content == b""
        batch = await client.post("/ip/batch", json={"ips": ["8.8.8.8"]}, headers=headers)
        assert batch.status_code == 401
        # Nothing was spent: the key's bucket is full.
        accepted = await client.get("/whois/8.8.8.8", headers=bearer(ALICE))
        assert accepted.headers["ratelimit-remaining"] == "9"


async def test_mcp_is_refused_with_a_json_rpc_error(keyed: Settings) -> None:
    async with running_app(keyed) as client:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        for headers in ({}, bearer("wrong")):
            for path in ("/mcp", "/mcp/"):
                response = await client.post(path, json=message, headers={**JSON_HEADERS, **headers})
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith('Bearer realm="ipintel"')
                answer = answers_of(response)
                assert answer["id"] is None and answer["error"]["code"] == -32000
                assert answer["error"]["data"] == {"httpStatus": 401, "code": "unauthorized"}
        accepted = await client.post("/mcp", json=message, headers={**JSON_HEADERS, **bearer(ALICE)})
        assert accepted.status_code == 200 and answers_of(accepted)["result"]["tools"]
        # The CORS preflight is not authenticated (browsers send it without credentials).
        preflight = await client.options(
            "/mcp", headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
        )
        assert preflight.status_code == 204
        allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
        assert {"authorization", "x-api-key"} <= allowed


async def test_operations_docs_and_the_page_stay_open(keyed: Settings) -> None:
    async with running_app(keyed) as client:
        transport = httpx.ASGITransport(app=client.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ipintel.test") as plain:
            for path in ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/init.js", "/"):
                response = await plain.get(path)
                assert response.status_code == 200, (path, response.status_code)
            assert (await plain.get("/", headers={"Accept": "text/html"})).status_code == 200
            assert (await plain.get("/page/page.js")).status_code == 200
        assert (await client.get("/no/such/path")).status_code == 404  # not an API route: nothing to protect


async def test_the_openapi_document_states_the_authentication(settings: Settings, keyed: Settings) -> None:
    async with running_app(settings) as client:
        plain = (await client.get("/openapi.json")).json()
    assert "securitySchemes" not in plain["components"]
    assert all("401" not in op["responses"] for item in plain["paths"].values() for op in item.values())
    async with running_app(keyed) as client:
        document = (await client.get("/openapi.json")).json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "apiKey", "in": "header", "name": "X-API-Key"}
    protected = {"/mcp", "/mcp/", *(p for p in document["paths"] if p.startswith(("/ip", "/whois", "/asn", "/dns")))}
    protected |= {"/blacklist/{ip}", "/cidr"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            needs_key = path in protected and method != "options"
            assert ("401" in operation["responses"]) is needs_key, (path, method)
            assert ("security" in operation) is needs_key, (path, method)
            if needs_key:
                response = operation["responses"]["401"]
                assert "WWW-Authenticate" in response["headers"]
                schema = response["content"]["application/json"]["schema"]["$ref"]
                assert schema.endswith("McpResponse" if path.startswith("/mcp") else "Error")
    assert "/healthz" in document["paths"] and "/metrics" in document["paths"]


# Rate limits ------------------------------------------------------------------------------------------


async def test_a_keys_clients_share_its_buckets_and_its_own_limits(keyed: Settings) -> None:
    clock = FakeClock()
    async with running_app(keyed.replace(rate_limits=LIMITED), client=("198.51.100.1", 1), clock=clock) as one:
        app = one.app
        transport = httpx.ASGITransport(app=app, client=("2001:db8:77::1", 2))
        async with httpx.AsyncClient(transport=transport, base_url="http://ipintel.test") as other:
            # bob: general=3 of its own, wherever its requests come from.
            seen = [await c.get("/ip/8.8.8.8", headers=bearer(BOB)) for c in (one, other, one, other)]
            assert [r.status_code for r in seen] == [200, 200, 200, 429]
            assert [r.headers["ratelimit-limit"] for r in seen] == ["3"] * 4
            assert [r.headers["ratelimit-remaining"] for r in seen] == ["2", "1", "0", "0"]
            # alice: the server's limits, her own bucket (not bob's, not an address's).
            for client in (one, other):
                response = await client.get("/ip/8.8.8.8", headers=bearer(ALICE))
                assert response.status_code == 200 and response.headers["ratelimit-limit"] == "60"
            assert (await other.get("/ip/8.8.8.8", headers=bearer(ALICE))).headers["ratelimit-remaining"] == "57"
            # bob's scopes not named keep the server's limits.
            assert (await one.get("/dns/example.com", headers=bearer(BOB))).headers["ratelimit-limit"] == "30"
            clock.advance(20)  # one general token back for bob
            assert (await other.get("/ip/8.8.8.8", headers=bearer(BOB))).status_code == 200
        metrics = (await one.get("/metrics")).text
        assert 'ipintel_rate_limit_rejections_total{scope="general"} 1.0' in metrics


async def test_mcp_tools_and_profile_parts_spend_the_keys_own_limits(keyed: Settings) -> None:
    async with running_app(keyed.replace(rate_limits=LIMITED)) as client:
        client.headers.update(bearer(BOB))  # general=3, registry=1
        call = {"name": "calculate_cidr", "arguments": {"range": "10.0.0.0/30"}}
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        first = answers_of(await client.post("/mcp", json=message, headers=JSON_HEADERS))
        assert first["result"]["isError"] is False  # two general tokens: the POST's and the tool's
        spent = answers_of(await client.post("/mcp", json=message, headers=JSON_HEADERS))  # the POST takes the last
        assert error_of(spent["result"])["code"] == "rate_limited"
        assert (await client.get("/ip/8.8.8.8")).status_code == 429  # the MCP calls emptied bob's general bucket
    # The profile's registry parts spend bob's one registry token: the second part finds none.
    async with running_app(keyed.replace(rate_limits=LIMITED)) as client:
        profile = await client.get("/ip/8.8.8.8/profile?include=whois,blacklist", headers=bearer(BOB))
        assert profile.status_code == 200, profile.text
        data = profile.json()["data"]
        codes = [(data[part].get("error") or {}).get("code") for part in ("whois", "blacklist")]
        assert "rate_limited" in codes, data


async def test_a_keys_bucket_is_shared_by_every_process_through_redis(keyed: Settings) -> None:
    require_redis()
    with RedisServer() as redis:
        shared = keyed.replace(rate_limits=LIMITED, redis_url=redis.url)
        async with (
            running_app(shared, client=("198.51.100.1", 1)) as a,
            running_app(shared, client=("192.0.2.9", 2)) as b,
        ):
            seen = [await c.get("/ip/8.8.8.8", headers=bearer(BOB)) for c in (a, b, a, b)]
            assert [r.status_code for r in seen] == [200, 200, 200, 429]
            assert [r.headers["ratelimit-limit"] for r in seen] == ["3"] * 4
            assert (await b.get("/ip/8.8.8.8", headers=bearer(ALICE))).headers["ratelimit-remaining"] == "59"
            assert (await a.get("/ip/8.8.8.8", headers=bearer(ALICE))).headers["ratelimit-remaining"] == "58"


# Rotation -------------------------------------------------------------------------------------------


async def test_a_replaced_file_is_reloaded_and_a_broken_one_refused(
    keyed: Settings, keys_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def status(client: httpx.AsyncClient, key: str) -> int:
        return (await client.get("/ip/8.8.8.8", headers=bearer(key))).status_code

    async def until(predicate: Callable[[], object], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await predicate():  # type: ignore[misc]
                return True
            await asyncio.sleep(0.05)
        return False

    caplog.set_level(logging.INFO, logger="ipintel.api_keys")
    async with running_app(keyed.replace(db_check_interval=0.05)) as client:
        assert await status(client, ALICE) == 200 and await status(client, CAROL) == 401
        write_keys(keys_file, line("carol", CAROL), line("bob", BOB))  # alice revoked, carol added

        async def rotated() -> bool:
            return await status(client, CAROL) == 200 and await status(client, ALICE) == 401

        assert await until(rotated)
        assert "added: carol; removed: alice" in caplog.text
        # A broken file is refused: the keys in force stay, and the log never shows the file's text.
        write_keys(keys_file, line("dave", ALICE), f"erin {ALICE}")  # a key pasted where its digest belongs

        async def refused() -> bool:
            return "refused the new API key file" in caplog.text

        assert await until(refused)
        assert await status(client, CAROL) == 200 and await status(client, BOB) == 200
        assert await status(client, ALICE) == 401
        assert ALICE not in caplog.text and digest(ALICE) not in caplog.text and "line 3" in caplog.text
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1, "a refused file is logged once, not at every poll"
        metrics = (await client.get("/metrics")).text
        assert 'ipintel_api_key_file_reloads_total{outcome="error"} 1.0' in metrics
        assert 'ipintel_api_key_file_reloads_total{outcome="ok"} 1.0' in metrics
        # A file removed revokes every key, loudly (issue 23, point 10: they stayed in force in silence); its
        # return is loaded.
        caplog.clear()
        await asyncio.to_thread(keys_file.unlink)

        async def revoked() -> bool:
            return await status(client, CAROL) == 401

        assert await until(revoked)
        assert "is gone" in caplog.text and "revoked" in caplog.text
        assert 'ipintel_api_key_file_reloads_total{outcome="removed"} 1.0' in (await client.get("/metrics")).text
        assert "ipintel_api_keys 0.0" in (await client.get("/metrics")).text
        write_keys(keys_file, line("alice", ALICE))

        async def back() -> bool:
            return await status(client, ALICE) == 200 and await status(client, CAROL) == 401

        assert await until(back)


def _env(keys: Path, city: Path, **extra: str) -> dict[str, str]:
    return {
        "IPINTEL_GEOIP_CITY_DB": str(city),
        "IPINTEL_API_KEYS_FILE": str(keys),
        "IPINTEL_RATE_LIMITS": "general=100",
        "IPINTEL_FEEDS": "off",
        "IPINTEL_DNS_SERVERS": "127.0.0.1:9",
        "IPINTEL_DNS_TIMEOUT": "0.5",
        "IPINTEL_DNSBL_ZONES": "bl.invalid",
        "IPINTEL_LOG_FORMAT": "json",
        **extra,
    }


def test_sighup_reloads_the_key_file(keys_file: Path, city_db: Path) -> None:
    # The poll is slowed right down: only the signal can explain the reload.
    with server_process(_env(keys_file, city_db, IPINTEL_DB_CHECK_INTERVAL="600")) as (client, proc):
        assert client.get("/ip/8.8.8.8", headers=bearer(ALICE)).status_code == 200
        write_keys(keys_file, line("carol", CAROL))
        time.sleep(0.3)
        assert client.get("/ip/8.8.8.8", headers=bearer(ALICE)).status_code == 200, "no reload without the signal"
        proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: client.get("/ip/8.8.8.8", headers=bearer(CAROL)).status_code == 200, timeout=5)
        assert client.get("/ip/8.8.8.8", headers=bearer(ALICE)).status_code == 401
        assert proc.poll() is None, "SIGHUP does not stop the server"


def test_a_malformed_file_at_start_is_a_configuration_error(tmp_path: Path, city_db: Path) -> None:
    keys = write_keys(tmp_path / "keys.txt", line("alice", ALICE), f"bob sha256:{digest(BOB)} general=0")
    for path, reason in (
        (keys, "line 3: the general limit must be 1 to 1000000"),
        (tmp_path / "missing", "cannot be read: No such file or directory"),
    ):
        env = settings_env({**_env(path, city_db), "IPINTEL_PORT": "0"})
        done = subprocess.run([sys.executable, "-m", "ipintel"], cwd=ROOT, env=env, capture_output=True, timeout=30)
        output = (done.stdout + done.stderr).decode()
        assert done.returncode == 2, output
        assert f"ipintel: configuration error: IPINTEL_API_KEYS_FILE {path}" in output and reason in output
        assert digest(BOB) not in output and digest(ALICE) not in output


# Never logged -----------------------------------------------------------------------------------------


def test_keys_never_reach_the_logs_or_the_metrics(keys_file: Path, city_db: Path) -> None:
    with server_process(_env(keys_file, city_db, IPINTEL_LOG_LEVEL="INFO")) as (client, proc):
        headers = {"X-Request-Id": "with-bearer", **bearer(ALICE)}
        assert client.get("/ip/8.8.8.8", headers=headers).status_code == 200
        assert (
            client.get("/cidr?range=10.0.0.0/8", headers={"X-Request-Id": "with-header", "X-API-Key": BOB}).status_code
            == 200
        )
        assert client.get("/ip/8.8.8.8", headers={"X-Request-Id": "wrong", **bearer(CAROL)}).status_code == 401
        assert client.get("/ip/8.8.8.8", headers={"X-Request-Id": "none"}).status_code == 401
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "lookup_ip", "arguments": {"ip": "8.8.8.8"}},
        }
        mcp = client.post("/mcp", json=message, headers={**JSON_HEADERS, **bearer(ALICE), "X-Request-Id": "mcp"})
        assert mcp.status_code == 200
        # A file with a key pasted where its digest belongs is refused on SIGHUP, without quoting it.
        write_keys(keys_file, line("alice", ALICE), f"carol {CAROL}")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert client.get("/ip/8.8.8.8", headers=bearer(ALICE)).status_code == 200
        metrics = client.get("/metrics").text
    output = proc.stdout.read().decode() if proc.stdout else ""
    for secret in (ALICE, BOB, CAROL, digest(ALICE), digest(BOB), digest(CAROL)):
        assert secret not in output and secret not in metrics
    lines = [json.loads(text) for text in output.splitlines() if text.startswith("{")]
    access = {entry["request_id"]: entry for entry in lines if entry["logger"] == "ipintel.access"}
    assert access["with-bearer"]["key"] == "alice" and access["with-header"]["key"] == "bob"
    assert access["mcp"]["key"] == "alice" and access["mcp"]["status"] == 200
    assert "key" not in access["wrong"] and access["wrong"]["status"] == 401 and "key" not in access["none"]
    refusal = [entry for entry in lines if entry["level"] == "error" and entry["logger"] == "ipintel.api_keys"]
    assert refusal and "line 3" in refusal[0]["message"]
    assert 'ipintel_api_key_requests_total{key="alice"} 3.0' in metrics
    assert 'ipintel_api_key_requests_total{key="bob"} 1.0' in metrics
    assert 'ipintel_api_key_refusals_total{reason="invalid"} 1.0' in metrics
    assert 'ipintel_api_key_refusals_total{reason="missing"} 1.0' in metrics
    assert "ipintel_api_keys 2.0" in metrics


def test_the_python_sdk_connects_with_a_bearer_key(keys_file: Path, city_db: Path) -> None:
    """docs/MCP.md, "Clients": the SDK's HTTP client carries the header."""
    httpx2 = pytest.importorskip("httpx2")
    mcp = pytest.importorskip("mcp")
    from mcp.client.streamable_http import streamable_http_client

    with server_process(_env(keys_file, city_db, IPINTEL_LOG_LEVEL="WARNING")) as (client, _proc):
        url = f"{client.base_url}/mcp"

        async def session() -> tuple[int, bool]:
            # Closed here: the SDK leaves a client it is given open (an unclosed socket is a warning, an error here).
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}) as http:
                async with mcp.Client(streamable_http_client(url, http_client=http)) as sdk:
                    tools = await sdk.list_tools()
                    result = await sdk.call_tool("calculate_cidr", {"range": "10.0.0.0/30"})
                    return len(tools.tools), result.is_error

        assert asyncio.run(session()) == (9, False)

        async def without_a_key() -> None:
            async with mcp.Client(url) as sdk:
                await sdk.list_tools()

        with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 401 in an exception group
            asyncio.run(without_a_key())


# Issue 23 ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        ALICE,  # a key pasted alone on a line: it is the "name", and had "no digest"
        f"{ALICE} sha256:{digest(BOB)}",  # a key where the name goes
        f"{line('alice', ALICE)}\nsome-key-{ALICE[:20]} sha256:{digest(f'some-key-{ALICE[:20]}')}",
    ],
    ids=["key-alone", "key-as-name", "own-key-as-name"],
)
def test_a_key_in_the_file_is_refused_and_never_repeated(text: str) -> None:
    """Point 4: the error echoed the key (``the key '<key>' has no digest``), and a key in the name field was
    accepted as a name, to reach logs and metrics labels."""
    with pytest.raises(KeyFileError) as raised:
        parse_key_file(text, "keys.txt")
    message = str(raised.value)
    assert ALICE not in message and ALICE[:20] not in message, message


async def test_requests_without_a_valid_key_are_rate_limited(settings: Settings, keys_file: Path) -> None:
    """Point 5: a 401 spent nothing, so guessing keys was unthrottled; now each spends a general token of the
    address, and past them the answer is 429. A key shorter than 32 characters is never valid."""
    limited = settings.replace(api_keys_file=keys_file, rate_limits={Quota.GENERAL: 5, Quota.DNS: 5, Quota.REGISTRY: 5})
    async with running_app(limited) as client:
        guesses = [
            await client.get("/cidr?range=10.0.0.0/8", headers=bearer(f"guess-{n}-" + "x" * 32)) for n in range(7)
        ]
        assert [r.status_code for r in guesses] == [401] * 5 + [429] * 2
        assert guesses[-1].headers["retry-after"]
        short = await client.get("/cidr?range=10.0.0.0/8", headers=bearer("short"))
        assert short.status_code == 429  # still limited; from another address it is a 401 saying why
    async with running_app(limited, client=("203.0.113.8", 1)) as client:
        short = await client.get("/cidr?range=10.0.0.0/8", headers=bearer("tooshort"))
        assert short.status_code == 401 and "at least 32 characters" in short.json()["error"]["message"]
        assert (await client.get("/cidr?range=10.0.0.0/8", headers=bearer(ALICE))).status_code == 200
