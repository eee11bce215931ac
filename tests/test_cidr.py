"""CIDR arithmetic (docs/API.md#cidr): properties over generated ranges, and the edge cases."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipintel.capabilities.cidr import _parse_range_cached, calculate
from ipintel.errors import ApiError
from ipintel.settings import Settings
from tests.support.app import running_app, validator

CIDR_SCHEMA = validator("cidr")


@st.composite
def ranges(draw: st.DrawFn) -> str:
    version = draw(st.sampled_from([4, 6]))
    bits = 32 if version == 4 else 128
    value = draw(st.integers(min_value=0, max_value=2**bits - 1))
    prefix = draw(st.integers(min_value=0, max_value=bits))
    return f"{ipaddress.ip_address(value) if version == 4 else ipaddress.IPv6Address(value)}/{prefix}"


@given(ranges())
def test_invariants(text: str) -> None:
    result = calculate(text)
    CIDR_SCHEMA.validate(result)
    ip = ipaddress.ip_address
    network, first, last = ip(result["network"]), ip(result["firstHost"]), ip(result["lastHost"])
    top = ip(result["broadcast"]) if result["broadcast"] else network + (result["totalHosts"] - 1)
    assert network.version == first.version == last.version == top.version
    assert int(network) <= int(first) <= int(last) <= int(top)
    assert result["totalHosts"] == 2 ** ((32 if network.version == 4 else 128) - result["prefixLength"])
    assert 1 <= result["usableHosts"] <= result["totalHosts"]
    assert int(last) - int(first) + 1 == result["usableHosts"]
    net = ipaddress.ip_network(text, strict=False)
    assert ip(text.split("/")[0]) in net and network == net.network_address
    if network.version == 4:
        mask, wildcard = int(ip(result["subnetMask"])), int(ip(result["wildcardMask"]))
        assert mask ^ wildcard == 0xFFFFFFFF
        assert int(network) | wildcard == int(top)
    else:
        assert result["broadcast"] is None and result["wildcardMask"] is None
        assert result["usableHosts"] == result["totalHosts"]


def test_host_bits_set() -> None:
    assert calculate("192.168.1.77/24") == {
        "network": "192.168.1.0",
        "broadcast": "192.168.1.255",
        "subnetMask": "255.255.255.0",
        "wildcardMask": "0.0.0.255",
        "prefixLength": 24,
        "totalHosts": 256,
        "usableHosts": 254,
        "firstHost": "192.168.1.1",
        "lastHost": "192.168.1.254",
    }


def test_slash_0() -> None:
    result = calculate("0.0.0.0/0")
    assert (result["totalHosts"], result["usableHosts"]) == (2**32, 2**32 - 2)
    assert (result["firstHost"], result["lastHost"]) == ("0.0.0.1", "255.255.255.254")
    assert result["subnetMask"] == "0.0.0.0"


def test_slash_31_point_to_point() -> None:
    result = calculate("10.0.0.1/31")
    assert (result["network"], result["broadcast"]) == ("10.0.0.0", "10.0.0.1")
    assert (result["totalHosts"], result["usableHosts"]) == (2, 2)
    assert (result["firstHost"], result["lastHost"]) == ("10.0.0.0", "10.0.0.1")


def test_slash_32_single_host() -> None:
    result = calculate("8.8.8.8/32")
    assert (result["totalHosts"], result["usableHosts"]) == (1, 1)
    assert result["firstHost"] == result["lastHost"] == result["network"] == "8.8.8.8"


def test_slash_30() -> None:
    result = calculate("10.0.0.0/30")
    assert (result["usableHosts"], result["firstHost"], result["lastHost"]) == (2, "10.0.0.1", "10.0.0.2")


def test_ipv6() -> None:
    result = calculate("2001:DB8:0:0:1::/64")
    assert result["network"] == "2001:db8::"
    assert result["subnetMask"] == "ffff:ffff:ffff:ffff:0000:0000:0000:0000"
    assert result["broadcast"] is None and result["wildcardMask"] is None
    assert result["totalHosts"] == result["usableHosts"] == 2**64
    assert result["lastHost"] == "2001:db8::ffff:ffff:ffff:ffff"
    everything = calculate("::/0")
    assert everything["totalHosts"] == 2**128


@pytest.mark.parametrize(
    "text",
    [
        "",
        "10.0.0.0",
        "10.0.0.0/33",
        "10.0.0.0/-1",
        "10.0.0.0/ 8",
        "10.0.0.0/8/8",
        "2001:db8::/129",
        "300.0.0.0/8",
        "fe80::1%eth0/64",
        "abc/8",
        "10.0.0.0/0008",
        "/24",
        "10.0.0.0/",
        "x" * 5000,
    ],
)
def test_garbage_is_invalid_range(text: str) -> None:
    with pytest.raises(ApiError) as info:
        calculate(text)
    assert info.value.code == "invalid_range"


async def test_route(settings: Settings) -> None:
    async with running_app(settings) as client:
        ok = await client.get("/cidr", params={"range": "192.168.1.77/24"})
        v6 = await client.get("/cidr", params={"range": "2001:db8::/127"})
        missing = await client.get("/cidr")
        bad = await client.get("/cidr", params={"range": "10.0.0.0/40"})
    assert ok.status_code == 200 and ok.json()["data"]["network"] == "192.168.1.0"
    assert v6.status_code == 200 and v6.json()["data"]["usableHosts"] == 2
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "invalid_range"
    assert bad.status_code == 400 and "out of bounds" in bad.json()["error"]["message"]


@pytest.mark.parametrize("text", ["10.0.0.0/24", "2001:db8::/48"])
def test_a_trailing_newline_is_refused_like_a_trailing_space(text: str) -> None:
    # Python's "$" also matches before a final "\n": "10.0.0.0/24\n" once passed as "10.0.0.0/24".
    for suffix in (" ", "\n"):
        with pytest.raises(ApiError) as info:
            calculate(text + suffix)
        assert info.value.code == "invalid_range", repr(suffix)


def test_parsing_is_remembered_but_never_an_answer_or_a_failure() -> None:
    first, again = calculate("10.0.0.0/8"), calculate("10.0.0.0/8")
    assert first == again and first is not again  # computed afresh: /cidr has no cache (docs/API.md#caching)
    kept = _parse_range_cached.cache_info().currsize
    for _ in range(3):
        with pytest.raises(ApiError):
            calculate("10.0.0.0/33")
    assert _parse_range_cached.cache_info().currsize == kept
    with pytest.raises(ApiError):
        calculate("1" * 200)  # too long to be a range: refused without being remembered
    assert _parse_range_cached.cache_info().maxsize == 1024
