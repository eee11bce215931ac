"""Issue 23, point 2: DNS rebinding against a server on the caller's machine (docs/CONFIGURATION.md,
``IPINTEL_ALLOWED_HOSTS``).

A page of evil.example rebinds its name to 127.0.0.1: the victim's browser then sends
``GET /dns/intranet.corp`` to the local server with ``Host: evil.example:8080``, and the page reads the answer.
On a loopback bind only the loopback names are answered; any other name is 421, before any lookup.
"""

from __future__ import annotations

import pytest

from ipintel.settings import ConfigError, Settings, allowed_hosts, parse_allowed_hosts
from tests.support.app import running_app, server_process
from tests.support.dns_server import DnsServer


async def test_a_rebound_name_reads_nothing_from_a_loopback_server(settings: Settings, dns: DnsServer) -> None:
    dns.add("intranet.corp", "A", "10.1.2.3")
    default = settings.replace(allowed_hosts=None, dns_servers=dns.servers)  # bound to 127.0.0.1, the default
    assert default.host == "127.0.0.1" and allowed_hosts(default) == ("localhost", "127.0.0.1", "::1")
    async with running_app(default) as client:
        for path in ("/dns/intranet.corp", "/dns/10.1.2.3/reverse", "/ip/8.8.8.8", "/", "/healthz"):
            refused = await client.get(path, headers={"Host": "evil.example:8080"})
            assert refused.status_code == 421, (path, refused.text)
            assert refused.json()["error"]["code"] == "misdirected_request"
        mcp = await client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Host": "evil.example"}
        )
        assert mcp.status_code == 421 and mcp.json()["error"]["data"]["code"] == "misdirected_request"
        assert len(dns.queries) == 0  # nothing was looked up for the page
        for host in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST.", "localhost"):
            answer = await client.get("/dns/intranet.corp", headers={"Host": host})
            assert answer.status_code == 200, (host, answer.text)


async def test_the_allowed_hosts_setting(settings: Settings) -> None:
    assert parse_allowed_hosts("api.example.com, *.internal.example, 10.0.0.5, [::1]") == (
        "api.example.com",
        "*.internal.example",
        "10.0.0.5",
        "::1",
    )
    with pytest.raises(ConfigError):
        parse_allowed_hosts("api.example.com:8080")
    # Bound to every address (a container, Kubernetes), the names are the operator's: any, unless told.
    assert allowed_hosts(settings.replace(allowed_hosts=None, host="0.0.0.0")) is None
    assert allowed_hosts(settings.replace(allowed_hosts=("*",))) is None
    chosen = settings.replace(allowed_hosts=("api.example.com", "*.internal.example"))
    async with running_app(chosen) as client:
        for host, status in [
            ("api.example.com", 200),
            ("API.example.com:443", 200),
            ("x.internal.example", 200),
            ("internal.example", 421),
            ("evil.example", 421),
            ("api.example.com.evil.example", 421),
        ]:
            assert (await client.get("/cidr?range=10.0.0.0/8", headers={"Host": host})).status_code == status, host


def test_a_server_process_bound_to_loopback_refuses_other_names(city_db: object, tmp_path: object) -> None:
    env = {"IPINTEL_GEOIP_CITY_DB": str(city_db), "IPINTEL_DATA_DIR": str(tmp_path), "IPINTEL_FEEDS": "off"}
    with server_process(env) as (client, _):
        assert client.get("/cidr?range=10.0.0.0/8").status_code == 200  # Host: 127.0.0.1:<port>
        answer = client.get("/cidr?range=10.0.0.0/8", headers={"Host": "rebound.example"})
        assert answer.status_code == 421
