"""The MCP tools (docs/MCP.md#tools): listing, calls against local upstreams, errors, rate-limit scopes.

Every success goes through
:func:`tests.support.mcp.call_tool`, which validates ``structuredContent``
against the ``outputSchema`` the server lists; the tests also compare it with
what the REST route answers, since both call the same ``Intel`` method.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ipintel.api.mcp.protocol import _plainly_valid_request
from ipintel.api.mcp.tools import TOOLS, TOOLS_BY_NAME
from ipintel.schema_check import plain_object_check
from ipintel.schema_files import embeddable_schema, load_schema
from ipintel.settings import Settings
from tests.support.app import running_app
from tests.support.dns_server import DnsServer
from tests.support.dnsbl import healthy_list
from tests.support.mcp import TOOL_ORDER, call_tool, error_of, listed_tools, post, rpc
from tests.support.rdap_server import RdapServer, Reply, rdap_fixture
from tests.support.reputation_server import ReputationServer

ORDER = TOOL_ORDER


async def rest_data(client: httpx.AsyncClient, path: str, **params: str) -> Any:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()["data"]


# tools/list ---------------------------------------------------------------------------------------


async def test_tools_are_listed_in_the_fixed_order_when_their_capability_exists(settings: Settings) -> None:
    assert [tool.name for tool in TOOLS] == ORDER
    async with running_app(settings) as client:
        answer = await rpc(client, "tools/list")
    names = [tool["name"] for tool in answer["result"]["tools"]]
    assert names == ORDER
    assert "lookup_ip" in names and "calculate_cidr" in names


async def test_every_listed_tool_is_described_for_a_model(settings: Settings) -> None:
    async with running_app(settings) as client:
        tools = await listed_tools(client)
    for name, tool in tools.items():
        description = tool["description"]
        assert len(description) > 200 and "Example" in description, name
        assert "Returns" in description and "Use it" in description, name
        for argument, schema in tool["inputSchema"]["properties"].items():
            assert argument in description, f"{name}: the description does not explain {argument}"
            assert schema.get("description"), f"{name}.{argument} has no description"
        assert tool["annotations"]["readOnlyHint"] is True
        assert tool["annotations"]["idempotentHint"] is True
        assert tool["annotations"]["openWorldHint"] is (name != "calculate_cidr")


async def test_listed_schemas_are_the_schema_files(settings: Settings) -> None:
    """inputSchema from schemas/mcp/tools, outputSchema from the REST response schema: one source."""

    def strip(schema: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in schema.items() if k not in ("$schema", "$id")}

    async with running_app(settings) as client:
        tools = await listed_tools(client)
    for name, tool in tools.items():
        for key in ("inputSchema", "outputSchema"):
            Draft202012Validator.check_schema(tool[key])
            assert tool[key]["type"] == "object", f"{name}.{key}: MCP wants an object at the root"
            assert "$id" not in json.dumps(tool[key]), f"{name}.{key}: an $id breaks clients that register schemas"
            assert ".json" not in json.dumps(_refs(tool[key])), f"{name}.{key}: a reference to a file no client has"
        assert tool["inputSchema"] == strip(load_schema(f"mcp/tools/{name}.input"))
        outputs = TOOLS_BY_NAME[name].output
        if len(outputs) == 1:
            # the file with its references to other files (a profile's parts) replaced by those files
            assert tool["outputSchema"] == embeddable_schema(outputs[0])
            assert {k: v for k, v in tool["outputSchema"].items() if k != "properties"} == {
                k: v for k, v in strip(load_schema(outputs[0])).items() if k != "properties"
            }
        else:
            assert tool["outputSchema"]["anyOf"] == [strip(load_schema(o)) for o in outputs]


def _refs(node: Any) -> list[str]:
    """Every ``$ref`` in a schema."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


# successes, compared with the REST route ------------------------------------------------------------


@pytest.mark.parametrize("ip", ["8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.4.4", "81.2.69.142"])
async def test_lookup_ip(settings: Settings, ip: str) -> None:
    async with running_app(settings) as client:
        result = await call_tool(client, "lookup_ip", {"ip": ip})
        rest = await rest_data(client, f"/ip/{ip}")
    assert result["isError"] is False
    assert result["structuredContent"] == rest
    assert result["structuredContent"]["ip"] == str(ipaddress.ip_address(rest["ip"]))


async def test_lookup_ip_without_an_address_uses_the_caller(settings: Settings) -> None:
    async with running_app(settings, client=("8.8.8.8", 50000)) as client:
        result = await call_tool(client, "lookup_ip", {})
        no_arguments = await call_tool(client, "lookup_ip")
        rest = await rest_data(client, "/ip")
    assert result["structuredContent"]["ip"] == "8.8.8.8"
    assert result["structuredContent"] == no_arguments["structuredContent"] == rest


async def test_lookup_ip_without_an_address_believes_only_trusted_proxies(settings: Settings) -> None:
    settings = settings.replace(trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),))
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup_ip", "arguments": {}}}
    async with running_app(settings, client=("10.1.2.3", 40000)) as proxied:
        behind_proxy = await post(proxied, message, **{"X-Forwarded-For": "12.0.1.1"})
    async with running_app(settings, client=("8.8.8.8", 40000)) as direct:
        spoofed = await post(direct, message, **{"X-Forwarded-For": "12.0.1.1"})
    assert behind_proxy.json()["result"]["structuredContent"]["city"] == "Chicago"
    assert spoofed.json()["result"]["structuredContent"]["ip"] == "8.8.8.8"


async def test_lookup_ip_of_the_caller_at_a_reserved_address_is_an_error_result(settings: Settings) -> None:
    async with running_app(settings, client=("192.168.1.20", 40000)) as client:
        result = await call_tool(client, "lookup_ip", {})
    assert error_of(result)["code"] == "reserved_address"
    assert "192.168.1.20" in error_of(result)["message"]


@pytest.mark.parametrize(
    "range_", ["192.168.1.77/24", "10.0.0.0/31", "8.8.8.8/32", "0.0.0.0/0", "2001:db8::/48", "::/0"]
)
async def test_calculate_cidr(settings: Settings, range_: str) -> None:
    async with running_app(settings) as client:
        result = await call_tool(client, "calculate_cidr", {"range": range_})
        rest = await rest_data(client, "/cidr", range=range_)
    assert result["structuredContent"] == rest


async def test_whois_ip(whois_settings: Settings, rdap: RdapServer) -> None:
    rdap.set(rdap.ip_path("arin", "3.3.3.3"), Reply.json(rdap_fixture("arin_3_0_0_0")))  # ARIN's real answer
    async with running_app(whois_settings) as client:
        result = await call_tool(client, "whois_ip", {"ip": "3.3.3.3"})
        rest = await rest_data(client, "/whois/3.3.3.3")
    data = result["structuredContent"]
    assert data == rest
    assert data["ip"] == "3.3.3.3" and data["name"] == "AT-88-Z" and data["startAddress"] == "3.0.0.0"


async def test_lookup_dns_records_and_reverse(dns_settings: Settings, dns: DnsServer) -> None:
    dns.add("example.com", "A", "93.184.215.14", ttl=60)
    dns.add("example.com", "MX", "10 mail.example.com", ttl=60)
    dns.add_ptr("8.8.8.8", "dns.google", ttl=60)
    async with running_app(dns_settings) as client:
        a = await call_tool(client, "lookup_dns", {"domain": "example.com"})
        mx = await call_tool(client, "lookup_dns", {"domain": "Example.COM.", "type": "mx"})
        ptr = await call_tool(client, "lookup_dns", {"ip": "8.8.8.8"})
        rest_a = await rest_data(client, "/dns/example.com")
        rest_mx = await rest_data(client, "/dns/example.com", type="MX")
        rest_ptr = await rest_data(client, "/dns/8.8.8.8/reverse")
    assert [r["data"] for r in a["structuredContent"]["records"]] == ["93.184.215.14"]
    assert [r["data"] for r in mx["structuredContent"]["records"]] == ["10 mail.example.com"]
    assert ptr["structuredContent"]["ip"] == "8.8.8.8"
    assert [r["data"] for r in ptr["structuredContent"]["records"]] == ["dns.google"]
    for result, rest in ((a, rest_a), (mx, rest_mx), (ptr, rest_ptr)):
        # TTLs count down between the two calls; everything else is the same answer.
        assert _without_ttl(result["structuredContent"]) == _without_ttl(rest)


def _without_ttl(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "records": [{k: v for k, v in r.items() if k != "ttl"} for r in data["records"]]}


async def test_check_blacklist(dns_settings: Settings, dns: DnsServer, api: ReputationServer) -> None:
    healthy_list(dns, "one.test", listed={"45.33.32.156": "127.0.0.2"})
    changed = dns_settings.replace(dnsbl_zones=("one.test",), reputation_url=api.url("/api"))
    async with running_app(changed) as client:
        listed = await call_tool(client, "check_blacklist", {"ip": "45.33.32.156"})
        rest = await rest_data(client, "/blacklist/45.33.32.156")
    data = listed["structuredContent"]
    assert data["ip"] == "45.33.32.156" and data["status"] == "listed" and data["listed"] is True
    assert any(s["name"] == "one.test" and s["listed"] is True for s in data["sources"])
    assert data["status"] == rest["status"] and data["sources"] == rest["sources"]


async def test_detect_vpn(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = await call_tool(client, "detect_vpn", {"ip": "8.8.8.8"})
        rest = await rest_data(client, "/ip/8.8.8.8/vpn")
    assert result["structuredContent"]["ip"] == "8.8.8.8"
    assert result["structuredContent"] == rest


async def test_profile_ip_and_lookup_ips_answer_what_their_routes_answer(
    whois_settings: Settings, rdap: RdapServer
) -> None:
    rdap.set(rdap.ip_path("arin", "3.3.3.3"), Reply.json(rdap_fixture("arin_3_0_0_0")))
    ips = ["8.8.8.8", "::ffff:8.8.8.8", "bad", "10.0.0.1", "3.3.3.3", "2001:4860:4860::8888"]
    async with running_app(whois_settings) as client:
        profile = await call_tool(client, "profile_ip", {"ip": "3.3.3.3", "include": ["whois", "geo"]})
        rest_profile = await rest_data(client, "/ip/3.3.3.3/profile", include="whois,geo")
        batch = await call_tool(client, "lookup_ips", {"ips": ips, "include": ["geo", "whois"]})
        rest_batch = (await client.post("/ip/batch", json={"ips": ips, "include": ["geo", "whois"]})).json()["data"]
        default = await call_tool(client, "lookup_ips", {"ips": ["8.8.8.8"]})
    assert profile["structuredContent"] == rest_profile
    assert list(rest_profile) == ["ip", "geo", "whois"] and rest_profile["whois"]["name"] == "AT-88-Z"
    assert batch["structuredContent"] == rest_batch
    results = rest_batch["results"]
    assert [entry["ip"] for entry in results] == ips
    assert results[0]["data"] == results[1]["data"]
    assert [results[2]["error"]["code"], results[3]["error"]["code"]] == ["invalid_ip", "reserved_address"]
    assert results[4]["data"]["whois"] == rest_profile["whois"]
    assert rdap.hits[rdap.ip_path("arin", "3.3.3.3")] == 1  # one lookup, from the same cache every time
    assert list(default["structuredContent"]["results"][0]["data"]) == ["ip", "geo", "vpn", "notConsulted"]


async def test_profile_and_batch_tools_spend_a_token_per_part_like_their_routes(settings: Settings) -> None:
    settings = settings.replace(rate_limits={"general": 100, "dns": 30, "registry": 2})
    arguments = {"ips": ["8.8.8.8", "8.8.4.4", "81.2.69.142", "8.8.8.8"], "include": ["geo", "whois"]}
    async with running_app(settings) as client:
        batch = (await post(client, _call("lookup_ips", arguments))).json()["result"]
        profile = (await post(client, _call("profile_ip", {"ip": "8.8.8.8", "include": ["geo", "blacklist"]}))).json()
        whois = (await post(client, _call("whois_ip", {"ip": "8.8.8.8"}))).json()["result"]
    assert batch["isError"] is False
    codes = [entry["data"]["whois"]["error"]["code"] for entry in batch["structuredContent"]["results"]]
    assert codes[2] == "rate_limited" and "rate_limited" not in codes[:2] + codes[3:]  # the bootstrap is a closed port
    assert all("error" not in entry["data"]["geo"] for entry in batch["structuredContent"]["results"])
    result = profile["result"]
    assert result["isError"] is False and result["structuredContent"]["blacklist"]["error"]["code"] == "rate_limited"
    assert error_of(whois)["code"] == "rate_limited"


# failures as isError results ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("lookup_ip", {"ip": "not-an-ip"}, "invalid_ip"),
        ("lookup_ip", {"ip": "fe80::1%eth0"}, "invalid_ip"),
        ("lookup_ip", {"ip": "10.0.0.1"}, "reserved_address"),
        ("lookup_ip", {"ip": 8}, "invalid_ip"),
        ("lookup_ip", {"address": "8.8.8.8"}, "invalid_request"),
        ("lookup_ip", {"ip": "x" * 100_000}, "invalid_ip"),
        ("whois_ip", {}, "invalid_ip"),
        ("whois_ip", {"ip": "999.1.1.1"}, "invalid_ip"),
        ("whois_ip", {"ip": "192.168.0.1"}, "reserved_address"),
        ("lookup_dns", {}, "invalid_request"),
        ("lookup_dns", {"domain": "example.com", "ip": "8.8.8.8"}, "invalid_request"),
        ("lookup_dns", {"ip": "8.8.8.8", "type": "MX"}, "invalid_request"),
        ("lookup_dns", {"domain": "bad..name"}, "invalid_domain"),
        ("lookup_dns", {"domain": "a" * 300 + ".com"}, "invalid_domain"),
        ("lookup_dns", {"domain": "example.com", "type": "SOA"}, "invalid_record_type"),
        ("lookup_dns", {"domain": "example.com", "type": 1}, "invalid_record_type"),
        ("lookup_dns", {"ip": "not-an-ip"}, "invalid_ip"),
        ("check_blacklist", {"ip": "2001:4860:4860::8888"}, "ipv6_not_supported"),
        ("check_blacklist", {"ip": "nope"}, "invalid_ip"),
        ("check_blacklist", {"ip": "127.0.0.1"}, "reserved_address"),
        ("detect_vpn", {"ip": "nope"}, "invalid_ip"),
        ("detect_vpn", {"ip": "100.64.0.1"}, "reserved_address"),
        ("calculate_cidr", {}, "invalid_range"),
        ("calculate_cidr", {"range": "10.0.0.0/33"}, "invalid_range"),
        ("calculate_cidr", {"range": ["10.0.0.0/8"]}, "invalid_range"),
        ("calculate_cidr", {"range": "10.0.0.0/8", "extra": True}, "invalid_request"),
        ("profile_ip", {}, "invalid_ip"),
        ("profile_ip", {"ip": "not-an-ip"}, "invalid_ip"),
        ("profile_ip", {"ip": "10.0.0.1"}, "reserved_address"),
        ("profile_ip", {"ip": "8.8.8.8", "include": "geo"}, "invalid_request"),
        ("profile_ip", {"ip": "8.8.8.8", "include": ["geo", "nope"]}, "invalid_request"),
        ("profile_ip", {"ip": "8.8.8.8", "include": []}, "invalid_request"),
        ("lookup_ips", {}, "invalid_request"),
        ("lookup_ips", {"ips": []}, "invalid_request"),
        ("lookup_ips", {"ips": "8.8.8.8"}, "invalid_request"),
        ("lookup_ips", {"ips": [8]}, "invalid_request"),
        ("lookup_ips", {"ips": ["8.8.8.8"] * 101}, "invalid_request"),
        ("lookup_ips", {"ips": ["8.8.8.8"], "include": ["nope"]}, "invalid_request"),
        ("lookup_ips", {"ips": ["8.8.8.8"], "ip": "8.8.8.8"}, "invalid_request"),
    ],
)
async def test_bad_arguments_are_error_results_the_model_can_read(
    settings: Settings, tool: str, arguments: dict[str, Any], code: str
) -> None:
    async with running_app(settings) as client:
        result = await call_tool(client, tool, arguments)
    error = error_of(result)
    assert error["code"] == code, error
    assert len(error["message"]) < 300, "an error message never echoes kilobytes of input"
    assert "structuredContent" not in result


async def test_a_missing_argument_is_named_with_an_example(settings: Settings) -> None:
    async with running_app(settings) as client:
        result = await call_tool(client, "calculate_cidr", {})
    message = error_of(result)["message"]
    assert "'range'" in message and "192.168.1.0/24" in message


async def test_whois_upstream_failure_is_an_error_result(settings: Settings) -> None:
    async with running_app(settings) as client:  # the bootstrap URL is a closed local port
        result = await call_tool(client, "whois_ip", {"ip": "8.8.8.8"})
    assert error_of(result)["code"] in ("upstream_error", "upstream_timeout")


async def test_dns_upstream_failure_is_an_error_result(dns_settings: Settings, dns: DnsServer) -> None:
    dns.servfail("broken.test")
    async with running_app(dns_settings) as client:
        servfail = await call_tool(client, "lookup_dns", {"domain": "www.broken.test"})
        missing = await call_tool(client, "lookup_dns", {"domain": "nothing-here.test"})
    assert error_of(servfail)["code"] == "upstream_error"
    assert error_of(missing)["code"] == "domain_not_found"


async def test_geoip_unavailable_is_an_error_result(settings: Settings, tmp_path: Any) -> None:
    async with running_app(settings.replace(geoip_city_db=tmp_path / "missing.mmdb")) as client:
        result = await call_tool(client, "lookup_ip", {"ip": "8.8.8.8"})
    assert error_of(result)["code"] == "geoip_unavailable"


# rate limits: the tool's own scope (docs/API.md#rate-limits) ----------------------------------------------------------------


def _call(name: str, arguments: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


async def test_a_tool_call_spends_a_general_token_besides_the_request(settings: Settings) -> None:
    """general=3: the first POST spends 2 (request + tool), the second's tool finds the bucket empty."""
    settings = settings.replace(rate_limits={"general": 3, "dns": 30, "registry": 10})
    async with running_app(settings) as client:
        first = await post(client, _call("calculate_cidr", {"range": "10.0.0.0/8"}))
        second = await post(client, _call("calculate_cidr", {"range": "10.0.0.0/8"}))
        third = await post(client, _call("calculate_cidr", {"range": "10.0.0.0/8"}))
    assert first.json()["result"]["isError"] is False
    error = error_of(second.json()["result"])
    assert error["code"] == "rate_limited" and "general" in error["message"]
    assert third.status_code == 429  # the request's own token: the middleware refuses, JSON-RPC body
    assert third.json()["error"]["code"] == -32000 and third.headers["retry-after"]


async def test_registry_tools_spend_the_registry_scope(settings: Settings) -> None:
    settings = settings.replace(rate_limits={"general": 100, "dns": 30, "registry": 2})
    async with running_app(settings) as client:
        results = [(await post(client, _call("whois_ip", {"ip": "not-an-ip"}, i))).json()["result"] for i in range(3)]
        cidr = (await post(client, _call("calculate_cidr", {"range": "10.0.0.0/8"}))).json()["result"]
    codes = [error_of(r)["code"] for r in results]
    assert codes == ["invalid_ip", "invalid_ip", "rate_limited"]
    assert "registry" in error_of(results[2])["message"]
    assert cidr["isError"] is False  # other scopes are untouched


async def test_lookup_dns_spends_the_dns_scope(settings: Settings) -> None:
    settings = settings.replace(rate_limits={"general": 100, "dns": 1, "registry": 10})
    async with running_app(settings) as client:
        first = (await post(client, _call("lookup_dns", {"domain": "bad..name"}))).json()["result"]
        second = (await post(client, _call("lookup_dns", {"domain": "bad..name"}))).json()["result"]
    assert error_of(first)["code"] == "invalid_domain"
    assert error_of(second)["code"] == "rate_limited" and "dns" in error_of(second)["message"]


async def test_schema_invalid_arguments_spend_no_tool_token(settings: Settings) -> None:
    settings = settings.replace(rate_limits={"general": 100, "dns": 30, "registry": 1})
    async with running_app(settings) as client:
        bad = [(await post(client, _call("whois_ip", {"ip": 1}, i))).json()["result"] for i in range(3)]
        real = (await post(client, _call("whois_ip", {"ip": "nope"}))).json()["result"]
    assert [error_of(r)["code"] for r in bad] == ["invalid_ip"] * 3
    assert "must be a string" in error_of(bad[0])["message"]
    assert error_of(real)["code"] == "invalid_ip" and "is not an IPv4" in error_of(real)["message"]


async def test_a_batch_cannot_bypass_the_tool_scope(settings: Settings) -> None:
    settings = settings.replace(rate_limits={"general": 100, "dns": 30, "registry": 3})
    batch = [_call("whois_ip", {"ip": "nope"}, i) for i in range(10)]
    async with running_app(settings) as client:
        answers = (await post(client, batch)).json()
    codes = [error_of(a["result"])["code"] for a in answers]
    assert codes.count("invalid_ip") == 3 and codes.count("rate_limited") == 7


# The quick checks agree with the schemas ---------------------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def test_every_tool_has_the_quick_argument_check() -> None:
    """Every tool's arguments are strings or lists of strings (profile_ip's and lookup_ips' include, lookup_ips'
    ips), the shapes the quick check knows: a valid call never walks the validator."""
    quick = [tool.name for tool in TOOLS if plain_object_check(load_schema(tool.input_schema_name)) is not None]
    assert quick == ORDER


_PARTS = ["geo", "vpn", "whois", "blacklist", "ptr", "GEO", ""]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
@examples(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_quick_argument_check_never_passes_what_the_schema_refuses(tool: Any, data: st.DataObject) -> None:
    schema = load_schema(tool.input_schema_name)
    check = plain_object_check(schema)
    assert check is not None, f"{tool.name} has plain arguments: it has the quick check"
    names = st.sampled_from([*schema["properties"], "other"])
    strings = st.one_of(
        st.sampled_from(["A", "mx", "MX", "8.8.8.8", "", *_PARTS]), st.text(alphabet="AMXNSTC", max_size=5)
    )
    values = st.one_of(
        _JSON_VALUES,
        strings,
        st.lists(st.sampled_from(_PARTS), max_size=3),
        st.lists(strings | _JSON_VALUES, max_size=3),
        st.lists(st.just("8.8.8.8"), min_size=99, max_size=102),  # lookup_ips takes at most 100
    )
    arguments = data.draw(st.dictionaries(names, values, max_size=4))
    valid = Draft202012Validator(schema).is_valid(arguments)
    assert check(arguments) == valid, arguments


@examples(max_examples=500, deadline=None)
@given(
    message=st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "extra"]),
        st.one_of(_JSON_VALUES, st.just("2.0"), st.text(min_size=250, max_size=260), st.just(1.0)),
        max_size=5,
    )
)
def test_the_quick_envelope_check_never_passes_what_the_schema_refuses(message: dict[str, Any]) -> None:
    if _plainly_valid_request(message):
        assert Draft202012Validator(load_schema("mcp/request")).is_valid(message), message
