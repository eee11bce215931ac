"""The abuse contact of a registry record (docs/API.md#registry-rdap): where each registry puts it, read from
real registry answers (tests/fixtures/README.md) and from entity trees written for the edge cases, then through
``GET /whois/{ip}`` against the local RDAP world (tests/support/rdap_server.py)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from ipintel.capabilities.whois import parse_network, select_abuse
from ipintel.settings import Settings
from tests.support.app import running_app, validator
from tests.support.rdap_server import RdapServer, Reply, rdap_fixture

WHOIS_SCHEMA = validator("whois")

# (fixture, an address it covers, registry, the abuse contact expected). All but the last are real answers.
REAL = [
    # ARIN (Amazon, 3.0.0.0/9): the abuse POC only nested under the registrant organisation.
    (
        "arin_3_0_0_0",
        "3.3.3.3",
        "arin",
        {"email": "abuse@amazonaws.com", "phone": "+1-206-266-4064", "name": "Amazon EC2 Abuse"},
    ),
    # ARIN 2024 (Cloudflare): nested under the registrant and repeated at the top level.
    (
        "arin_2606_4700_2024",
        "2606:4700:4700::1111",
        "arin",
        {"email": "abuse@cloudflare.com", "phone": "+1-650-319-8930", "name": "Abuse"},
    ),
    # RIPE NCC: top level; the vCard lists ops@ and abuse@, the one typed abuse wins; the fax is not a phone.
    (
        "ripe_193_0_0_0",
        "193.0.6.139",
        "ripe",
        {"email": "abuse@ripe.net", "phone": "+31 20 535 4444", "name": "RIPE NCC Operations"},
    ),
    # APNIC 2024: the IRT object at the top level, email twice, no telephone.
    (
        "apnic_1_1_1_0_2024",
        "1.1.1.1",
        "apnic",
        {"email": "helpdesk@apnic.net", "phone": None, "name": "IRT-APNICRANDNET-AU"},
    ),
    # LACNIC: one contact with the roles technical and abuse.
    (
        "lacnic_179_0_0_0",
        "179.0.1.10",
        "lacnic",
        {"email": "tomas.cribb@neuralsoft.com", "phone": "54 341 4090555", "name": "Tomas Cribb"},
    ),
    # NIC.br: an abuse entity that carries only its name; reported as such, nothing invented.
    ("nicbr_177_0_0_0", "177.1.2.3", "lacnic", {"email": None, "phone": None, "name": "CSIRT OI"}),
    # AFRINIC: no entity with the role abuse at all.
    ("afrinic_41_0_0_0", "41.0.1.1", "afrinic", None),
]


@pytest.mark.parametrize(("fixture", "ip", "registry", "expected"), REAL, ids=[r[0] for r in REAL])
def test_abuse_contact_of_each_registrys_real_answer(
    fixture: str, ip: str, registry: str, expected: dict[str, Any] | None
) -> None:
    record = parse_network(ipaddress.ip_address(ip), rdap_fixture(fixture), registry=None)
    WHOIS_SCHEMA.validate(record)
    assert record["abuse"] == expected


@pytest.mark.parametrize("fixture", ["ripe_legacy", "arin_v6", "nicbr", "afrinic"])
def test_records_without_an_abuse_entity_say_null(fixture: str) -> None:
    assert select_abuse(rdap_fixture(fixture)) is None


def _entity(roles: list[str], *props: list[Any], children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    entity: dict[str, Any] = {"roles": roles, "vcardArray": ["vcard", [["version", {}, "text", "4.0"], *props]]}
    if children:
        entity["entities"] = children
    return entity


def test_the_objects_own_abuse_contact_wins_over_the_one_nested_under_its_registrant() -> None:
    nested = _entity(["abuse"], ["fn", {}, "text", "Org Abuse"], ["email", {}, "text", "org-abuse@example.net"])
    own = _entity(["abuse"], ["fn", {}, "text", "Net Abuse"], ["email", {}, "text", "net-abuse@example.net"])
    registrant = _entity(["registrant"], ["fn", {}, "text", "Example Org"], children=[nested])
    assert select_abuse({"entities": [registrant, own]}) == {
        "email": "net-abuse@example.net",
        "phone": None,
        "name": "Net Abuse",
    }


def test_a_contact_with_details_wins_over_an_earlier_one_with_only_a_name() -> None:
    named = _entity(["abuse"], ["fn", {}, "text", "IRT-ONLY-NAME"])
    reachable = _entity(["abuse"], ["org", {}, "text", "Desk"], ["tel", {"type": "voice"}, "uri", "tel:+1-555-0100"])
    assert select_abuse({"entities": [named, reachable]}) == {"email": None, "phone": "+1-555-0100", "name": "Desk"}


def test_email_and_phone_forms() -> None:
    contact = _entity(
        ["Abuse"],
        ["tel", {"type": ["fax"]}, "text", "+1-555-0199"],
        ["tel", {"type": ["work", "voice"]}, "uri", "tel:+1-555-0100;ext=7"],
        ["email", {"type": ["work"]}, "text", "noc@example.net"],
        ["email", {"type": ["internet", "Abuse"]}, "text", "mailto:abuse@example.net"],
    )
    assert select_abuse({"entities": [contact]}) == {
        "email": "abuse@example.net",
        "phone": "+1-555-0100;ext=7",
        "name": None,
    }


def test_a_fax_alone_is_no_phone_and_an_empty_contact_is_none() -> None:
    fax_only = _entity(["abuse"], ["fn", {}, "text", "Desk"], ["tel", {"type": "fax"}, "text", "+1-555-0199"])
    assert select_abuse({"entities": [fax_only]}) == {"email": None, "phone": None, "name": "Desk"}
    assert select_abuse({"entities": [{"roles": ["abuse"]}]}) is None
    assert select_abuse({"entities": [_entity(["technical"], ["email", {}, "text", "noc@example.net"])]}) is None


def test_a_hostile_entity_tree_is_walked_within_bounds() -> None:
    deep: dict[str, Any] = _entity(["abuse"], ["email", {}, "text", "deep@example.net"])
    for _ in range(50):
        deep = {"roles": ["technical"], "entities": [deep, "junk", 7]}
    wide = {"entities": [{"roles": ["technical"]}] * 5000 + [_entity(["abuse"], ["email", {}, "text", "x@y"])]}
    assert select_abuse(deep) is None  # deeper than any registry nests
    assert select_abuse(wide) is None  # past the entity bound
    assert select_abuse({"entities": [{"roles": "abuse", "vcardArray": "x"}, None]}) is None


# Through the API ------------------------------------------------------------------------------


@pytest.fixture
def rdap(rdap: RdapServer) -> RdapServer:
    """The RDAP world with the space of the real answers above."""
    rdap.serve_registries(
        {
            "arin": ["3.0.0.0/8", "2600::/12"],
            "ripe": ["193.0.0.0/8"],
            "apnic": ["1.0.0.0/8"],
            "lacnic": ["179.0.0.0/8", "177.0.0.0/8"],
            "afrinic": ["41.0.0.0/8"],
        }
    )
    for fixture, ip, registry, _ in REAL:
        rdap.set(rdap.ip_path(registry, ip), Reply.json(rdap_fixture(fixture)))
    return rdap


async def test_whois_answers_the_abuse_contact_of_each_registry(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:  # every answer is checked against schemas/whois.json
        for _, ip, _, expected in REAL:
            response = await client.get(f"/whois/{ip}")
            assert response.status_code == 200, response.text
            assert response.json()["data"]["abuse"] == expected, ip


async def test_the_profiles_whois_part_carries_the_abuse_contact(whois_settings: Settings, rdap: RdapServer) -> None:
    async with running_app(whois_settings) as client:
        response = await client.get("/ip/193.0.6.139/profile?include=whois")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["whois"]["abuse"]["email"] == "abuse@ripe.net"
