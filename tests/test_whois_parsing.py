"""RDAP answers to registry records: per-RIR parsing, dates, registry names, bootstrap tables.

These exercise the pure functions with answers written for the tests
(``tests/fixtures/rdap/``), modelled on what each RIR sends today and before.
"""

from __future__ import annotations

import ipaddress
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipintel.capabilities.whois import (
    RdapAnswer,
    normalise_date,
    parse_network,
    registry_of,
    rir_of_host,
    select_registrant,
)
from ipintel.errors import UpstreamError
from ipintel.infra.rdap_bootstrap import choose_base_url, parse_bootstrap
from tests.support.app import validator
from tests.support.rdap_server import bootstrap_document, rdap_fixture

WHOIS_SCHEMA = validator("whois")


def parse(name: str, ip: str, registry: str | None = None) -> dict[str, Any]:
    record = parse_network(ipaddress.ip_address(ip), rdap_fixture(name), registry=registry)
    WHOIS_SCHEMA.validate(record)
    return record


def test_arin_2024_registrant_org_with_nested_contacts_no_country_and_eastern_offsets() -> None:
    record = parse("arin_v4_2024", "23.45.67.89", "ARIN")
    assert record == {
        "ip": "23.45.67.89",
        "name": "EXCL-NET-1",
        "handle": "NET-23-45-0-0-1",
        "startAddress": "23.45.0.0",
        "endAddress": "23.45.255.255",
        "country": None,  # ARIN gives none on networks: not guessed from the postal address
        "registrant": "Example Cloud Networks, Inc.",
        "registry": "ARIN",
        "events": [
            {"action": "last changed", "date": "2023-01-17T18:07:51-05:00"},
            {"action": "registration", "date": "2012-06-01T15:59:58-04:00"},
        ],
        "abuse": {"email": "abuse@cloud.example", "phone": "+1-206-555-0140", "name": "Example Abuse"},
    }


def test_arin_ipv6_addresses_are_canonical() -> None:
    record = parse("arin_v6", "2604:a880:400::1", "ARIN")
    assert record["startAddress"] == "2604:a880::"
    assert record["endAddress"] == "2604:a880:ffff:ffff:ffff:ffff:ffff:ffff"
    assert record["registrant"] == "Example Cloud Networks, Inc."


def test_ripe_skips_maintainers_that_carry_the_registrant_role() -> None:
    record = parse("ripe_2024", "185.12.64.10", "RIPE NCC")
    assert record["registrant"] == "Example Netz GmbH"
    assert record["country"] == "DE"
    assert record["events"] == [
        {"action": "registration", "date": "2016-02-11T09:15:03+00:00"},
        {"action": "last changed", "date": "2022-11-30T16:42:31+00:00"},
    ]


def test_ripe_v6_prefers_the_org_even_when_a_maintainer_comes_later() -> None:
    record = parse("ripe_v6", "2a01:4f8:1:2::3", "RIPE NCC")
    assert record["registrant"] == "Example Hosting AG"
    assert record["startAddress"] == "2a01:4f8::"


def test_ripe_flat_model_without_vcards_has_no_registrant() -> None:
    """Old RIPE answers name the org only by handle and put descr in untitled
    remarks; only remarks titled "description" are read (docs/API.md#registry-rdap), so nothing is guessed."""
    record = parse("ripe_legacy", "91.198.174.2", "RIPE NCC")
    assert record["registrant"] is None
    assert record["name"] == "EXAMPLE-LEGACY"


def test_apnic_2024_names_a_registrant_org() -> None:
    record = parse("apnic_2024", "101.45.3.4", "APNIC")
    assert record["registrant"] == "Example Pacific Pty Ltd"
    assert record["country"] == "AU"


def test_apnic_legacy_falls_back_to_the_description_remark() -> None:
    record = parse("apnic_legacy", "14.1.100.1", "APNIC")
    assert record["registrant"] == "Example Broadband Co., Ltd."
    assert record["events"] == [{"action": "last changed", "date": "2017-06-30T01:51:28+00:00"}]


def test_lacnic_has_no_name_and_an_individual_registrant() -> None:
    record = parse("lacnic", "200.7.85.1", "LACNIC")
    assert record["name"] is None
    assert record["registrant"] == "EJEMPLO SOCIEDAD ANONIMA"
    assert record["handle"] == "200.7.84.0/22"


def test_nicbr_registrant_org() -> None:
    record = parse("nicbr", "177.33.1.1", "LACNIC")
    assert record["registrant"] == "Exemplo Telecom S.A."
    assert record["country"] == "BR"


def test_afrinic_without_registrant_and_dates_without_offset_as_utc() -> None:
    record = parse("afrinic", "41.203.70.1", "AFRINIC")
    assert record["registrant"] is None  # a "Remark" is not a description
    assert record["country"] == "NG"
    assert record["events"] == [
        {"action": "registration", "date": "2009-03-11T10:00:00+00:00"},
        {"action": "last changed", "date": "2019-07-01T08:30:00+00:00"},
    ]


def _entity(roles: list[str], *props: list[Any], handle: str = "H") -> dict[str, Any]:
    return {"handle": handle, "roles": roles, "vcardArray": ["vcard", [["version", {}, "text", "4.0"], *props]]}


def test_vcard_is_read_by_property_name_not_position() -> None:
    shuffled = _entity(
        ["registrant"],
        ["email", {}, "text", "x@example.net"],
        ["kind", {}, "text", "org"],
        ["adr", {"label": "Somewhere"}, "text", ["", "", "", "", "", "", ""]],
        ["fn", {}, "text", "Shuffled Org"],
    )
    assert select_registrant({"entities": [shuffled]}) == "Shuffled Org"


def test_org_property_when_no_fn_and_structured_org_value() -> None:
    entity = _entity(["registrant"], ["kind", {}, "text", "org"], ["org", {}, "text", ["", "Structured Org", "Unit"]])
    assert select_registrant({"entities": [entity]}) == "Structured Org"


def test_an_org_wins_over_an_earlier_individual_and_other_roles_never_count() -> None:
    document = {
        "entities": [
            _entity(["technical"], ["fn", {}, "text", "Tech Person"], ["kind", {}, "text", "org"]),
            _entity(["registrant"], ["fn", {}, "text", "Some Person"], ["kind", {}, "text", "individual"]),
            _entity(["Registrant"], ["fn", {}, "text", "The Company"], ["kind", {}, "text", "org"]),
        ]
    }
    assert select_registrant(document) == "The Company"


def test_nested_registrants_are_not_the_networks() -> None:
    """RIPE nests the maintainer of a contact object under it with role registrant."""
    contact = _entity(["abuse"], ["fn", {}, "text", "Abuse Desk"], ["kind", {}, "text", "group"])
    contact["entities"] = [_entity(["registrant"], ["fn", {}, "text", "Nested Org"], ["kind", {}, "text", "org"])]
    assert select_registrant({"entities": [contact]}) is None


@pytest.mark.parametrize(
    ("given_date", "expected"),
    [
        ("2014-03-14T16:52:05-04:00", "2014-03-14T16:52:05-04:00"),
        ("2011-08-10T23:12:35Z", "2011-08-10T23:12:35+00:00"),
        ("2011-08-10T23:12:35.250Z", "2011-08-10T23:12:35.250000+00:00"),
        ("2020-01-02T03:04:05+05:30", "2020-01-02T03:04:05+05:30"),
        ("2020-01-02T03:04:05", "2020-01-02T03:04:05+00:00"),
        ("not a date", None),
        ("2020-13-45T00:00:00Z", None),
        ("", None),
        (None, None),
        (1_600_000_000, None),
    ],
)
def test_dates_keep_the_registrys_offset(given_date: object, expected: str | None) -> None:
    assert normalise_date(given_date) == expected


@settings(deadline=None)
@given(
    st.datetimes(min_value=datetime(1980, 1, 1), max_value=datetime(2100, 1, 1)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)
def test_any_dated_moment_keeps_its_instant_and_offset(moment: datetime, offset_minutes: int) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    written = normalise_date(aware.isoformat())
    assert written is not None
    parsed = datetime.fromisoformat(written)
    assert parsed == aware and parsed.utcoffset() == aware.utcoffset()


def test_events_without_action_or_date_are_dropped() -> None:
    document = rdap_fixture("apnic_2024")
    document["events"] = [
        {"eventAction": "registration", "eventDate": "garbage"},
        {"eventDate": "2020-01-01T00:00:00Z"},
        "not an event",
        {"eventAction": "last changed", "eventDate": "2021-01-01T00:00:00Z"},
    ]
    record = parse_network(ipaddress.ip_address("101.45.3.4"), document, registry="APNIC")
    assert record["events"] == [{"action": "last changed", "date": "2021-01-01T00:00:00+00:00"}]


def test_fields_of_the_wrong_type_become_null_not_errors() -> None:
    document = {
        "objectClassName": "ip network",
        "name": 42,
        "handle": ["x"],
        "startAddress": "not-an-ip",
        "endAddress": None,
        "country": "Netherlands",
        "entities": "nope",
        "remarks": {"title": "description"},
        "events": {"eventAction": "x"},
    }
    record = parse_network(ipaddress.ip_address("8.8.8.8"), document, registry=None)
    WHOIS_SCHEMA.validate(record)
    assert record == {
        "ip": "8.8.8.8",
        "name": None,
        "handle": None,
        "startAddress": None,
        "endAddress": None,
        "country": None,
        "registrant": None,
        "registry": None,
        "events": [],
        "abuse": None,
    }


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)
_fields = st.sampled_from(
    ["name", "handle", "startAddress", "endAddress", "country", "entities", "remarks", "events", "port43"]
)


# No deadline and no too_slow check: the suite shares two cores with other work.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_fields, _json, max_size=9))
def test_any_shape_of_ip_network_object_gives_a_valid_record(fields: dict[str, Any]) -> None:
    document = {**fields, "objectClassName": "ip network"}
    record = parse_network(ipaddress.ip_address("2001:4860::1"), document, registry=None)
    WHOIS_SCHEMA.validate(record)


# Registry names ---------------------------------------------------------------------


def test_rir_by_host_or_whois_server() -> None:
    assert rir_of_host("rdap.arin.net") == "ARIN"
    assert rir_of_host("RDAP.DB.RIPE.NET.") == "RIPE NCC"
    assert rir_of_host("whois.apnic.net") == "APNIC"
    assert rir_of_host("rdap.lacnic.net") == "LACNIC"
    assert rir_of_host("whois.afrinic.net") == "AFRINIC"
    assert rir_of_host("rdap.registro.br") is None
    assert rir_of_host("notarin.net") is None
    assert rir_of_host(None) is None


def test_registry_is_the_rir_that_answered_last() -> None:
    arin_to_ripe = RdapAnswer({}, ("https://rdap.arin.net/registry/ip/1", "https://rdap.db.ripe.net/ip/1"))
    assert registry_of(arin_to_ripe) == "RIPE NCC"
    local_server = RdapAnswer({"port43": "whois.afrinic.net"}, ("http://127.0.0.1:1234/x/ip/1",))
    assert registry_of(local_server) == "AFRINIC"
    via_lacnic = RdapAnswer(
        {"port43": "whois.nic.br"}, ("https://rdap.lacnic.net/rdap/ip/1", "https://rdap.registro.br/ip/1")
    )
    assert registry_of(via_lacnic) == "LACNIC"
    assert registry_of(RdapAnswer({"port43": "whois.example.net"}, ("https://rdap.example.net/ip/1",))) is None


# Bootstrap tables -------------------------------------------------------------------


def test_https_preferred_trailing_slash_added_and_http_only_lists_usable() -> None:
    assert choose_base_url(["http://rdap.arin.net/registry", "https://rdap.arin.net/registry"]) == (
        "https://rdap.arin.net/registry/"
    )
    assert choose_base_url(["http://127.0.0.1:8000/arin"]) == "http://127.0.0.1:8000/arin/"
    assert choose_base_url(["ftp://example.net/", 7]) is None


def test_longest_prefix_wins_and_unknown_space_has_no_server() -> None:
    table = parse_bootstrap(
        bootstrap_document(
            [
                (["23.0.0.0/8", "8.0.0.0/8"], ["https://arin.example/"]),
                (["23.45.0.0/16"], ["https://ripe.example/"]),
                (["23.45.67.0/24"], ["https://apnic.example"]),
            ]
        ),
        4,
    )
    assert table.base_url(ipaddress.ip_address("23.45.67.89")) == "https://apnic.example/"
    assert table.base_url(ipaddress.ip_address("23.45.68.1")) == "https://ripe.example/"
    assert table.base_url(ipaddress.ip_address("23.46.0.1")) == "https://arin.example/"
    assert table.base_url(ipaddress.ip_address("9.9.9.9")) is None


def test_malformed_entries_are_skipped_one_by_one() -> None:
    table = parse_bootstrap(
        {
            "services": [
                "junk",
                [["not-a-prefix", "2001:db8::/32", "41.0.0.0/8"], ["https://afrinic.example/"]],
                [["102.0.0.0/8"], ["gopher://nowhere/"]],
                [["105.0.0.0/8"]],
            ]
        },
        4,
    )
    assert len(table) == 1
    assert table.base_url(ipaddress.ip_address("41.1.1.1")) == "https://afrinic.example/"


@pytest.mark.parametrize("document", [{}, {"services": "x"}, {"services": []}, [], "text"])
def test_a_bootstrap_without_usable_services_is_an_upstream_error(document: object) -> None:
    with pytest.raises(UpstreamError):
        parse_bootstrap(document, 6)
