"""The range matcher behind every feed: exact against a brute-force reference."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipintel.infra.ranges import AddressRanges, PrefixError, RangeIndex, parse_prefix


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3.2.34.0/26", (4, int(ipaddress.ip_address("3.2.34.0")), int(ipaddress.ip_address("3.2.34.63")), 26)),
        ("192.168.1.77/24", (4, 3232235776, 3232236031, 24)),  # host bits cleared
        ("185.220.101.1", (4, 3118228737, 3118228737, 32)),  # a bare address is a /32
        (" 10.0.0.0/8 ", (4, 167772160, 184549375, 8)),
        (
            "2600:1f14::/35",
            (
                6,
                int(ipaddress.ip_address("2600:1f14::")),
                int(ipaddress.ip_address("2600:1f14:1fff:ffff:ffff:ffff:ffff:ffff")),
                35,
            ),
        ),
        ("::/0", (6, 0, 2**128 - 1, 0)),
    ],
)
def test_parse_prefix(text: str, expected: tuple[int, int, int, int]) -> None:
    assert parse_prefix(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.2.3",
        "1.2.3.4/33",
        "1.2.3.4/",
        "1.2.3.4/-1",
        "1.2.3.4/ 8",
        "2001:db8::/129",
        "::g",
        "<html>",
        "01.2.3.4",
        "1.2.3.4/0008",
        "example.com",
    ],
)
def test_parse_prefix_refuses_junk(text: str) -> None:
    with pytest.raises(PrefixError):
        parse_prefix(text)


def test_overlapping_ranges_with_different_tags_are_split() -> None:
    index = RangeIndex.build([(0, 100, "net"), (50, 50, "host"), (100, 200, "net"), (300, 300, "host")])
    assert index.lookup(0) == {"net"}
    assert index.lookup(49) == {"net"}
    assert index.lookup(50) == {"net", "host"}
    assert index.lookup(51) == {"net"}
    assert index.lookup(200) == {"net"}
    assert index.lookup(201) == frozenset()
    assert index.lookup(300) == {"host"}
    assert index.lookup(301) == frozenset()
    assert len(index) == 4  # [0,49] [50,50] [51,200] [300,300]


def test_adjacent_ranges_of_one_tag_merge() -> None:
    index = RangeIndex.build([(10, 19, "a"), (20, 29, "a"), (25, 40, "a"), (42, 42, "a")])
    assert len(index) == 2
    assert index.lookup(40) == {"a"}
    assert index.lookup(41) == frozenset()


def test_empty_index() -> None:
    index: RangeIndex[str] = RangeIndex.build([])
    assert len(index) == 0
    assert index.lookup(0) == frozenset()


def test_address_ranges_keep_versions_apart() -> None:
    # 0.0.0.0/8 as IPv4 and ::/104 as IPv6 have the same integers; they must not meet.
    ranges = AddressRanges.build([(*parse_prefix("1.0.0.0/8")[:3], "v4"), (*parse_prefix("2001:db8::/32")[:3], "v6")])
    assert ranges.lookup(ipaddress.ip_address("1.2.3.4")) == {"v4"}
    assert ranges.lookup(ipaddress.ip_address("::102:304")) == frozenset()
    assert ranges.lookup(ipaddress.ip_address("2001:db8::1")) == {"v6"}
    assert ranges.prefixes == 2


TAGS = st.sampled_from(["host", "net", "x"])


def _ranges(bits: int) -> st.SearchStrategy[list[tuple[int, int, str]]]:
    def to_range(value: int, length: int, tag: str) -> tuple[int, int, str]:
        host = (1 << (bits - length)) - 1
        first = value & ~host
        return first, first | host, tag

    prefix = st.builds(to_range, st.integers(0, 2**bits - 1), st.integers(0, bits), TAGS)
    # Prefixes clustered in a small space overlap often, which is where splitting can go wrong.
    small = st.builds(to_range, st.integers(0, 255), st.integers(bits - 8, bits), TAGS)
    return st.lists(st.one_of(prefix, small), max_size=40)


def _reference(ranges: list[tuple[int, int, str]], value: int) -> frozenset[str]:
    return frozenset(tag for first, last, tag in ranges if first <= value <= last)


@settings(max_examples=300, deadline=None)
@given(ranges=_ranges(32), probes=st.lists(st.integers(0, 2**32 - 1), max_size=20))
def test_index_matches_brute_force_ipv4(ranges: list[tuple[int, int, str]], probes: list[int]) -> None:
    index = RangeIndex.build(ranges)
    # Probe every boundary and its neighbours, plus random points.
    edges = {v + d for first, last, _ in ranges for v in (first, last) for d in (-1, 0, 1)}
    for value in sorted(edges | set(probes) | set(range(0, 260))):
        if 0 <= value < 2**32:
            assert index.lookup(value) == _reference(ranges, value), value


@settings(max_examples=150, deadline=None)
@given(ranges=_ranges(128), probes=st.lists(st.integers(0, 2**128 - 1), max_size=20))
def test_index_matches_brute_force_ipv6(ranges: list[tuple[int, int, str]], probes: list[int]) -> None:
    index = RangeIndex.build(ranges)
    edges = {v + d for first, last, _ in ranges for v in (first, last) for d in (-1, 0, 1)}
    for value in sorted(edges | set(probes)):
        if 0 <= value < 2**128:
            assert index.lookup(value) == _reference(ranges, value), value


@settings(max_examples=100, deadline=None)
@given(
    prefixes=st.lists(
        st.builds(
            lambda v, n: str(ipaddress.ip_network((v, n), strict=False)), st.integers(0, 2**32 - 1), st.integers(8, 32)
        ),
        max_size=30,
    ),
    probe=st.integers(0, 2**32 - 1),
)
def test_address_ranges_agree_with_ipaddress(prefixes: list[str], probe: int) -> None:
    ranges = AddressRanges.build((*parse_prefix(p)[:3], "t") for p in prefixes)
    address = ipaddress.IPv4Address(probe)
    expected = any(address in ipaddress.ip_network(p) for p in prefixes)
    assert bool(ranges.lookup(address)) == expected
