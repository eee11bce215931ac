"""Answers are encoded by orjson, falling back to the json module for what orjson refuses."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from ipintel.api.mcp.protocol import tool_success
from ipintel.encoding import dumps, dumps_text
from ipintel.settings import Settings
from tests.support.app import running_app

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**130), max_value=2**130)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_round_trips_like_the_json_module(value: object) -> None:
    encoded = dumps(value)
    assert json.loads(encoded) == value
    assert b"\n" not in encoded  # one line, compact


def test_integers_beyond_64_bits_take_the_json_module() -> None:
    assert dumps({"totalHosts": 2**80}) == b'{"totalHosts":1208925819614629174706176}'
    assert dumps({"n": 2**64 - 1}) == b'{"n":18446744073709551615}'  # orjson's own range


def test_non_ascii_text_is_written_as_utf8_not_escaped() -> None:
    assert dumps({"city": "Zürich"}) == '{"city":"Zürich"}'.encode()
    assert dumps({"city": "Zürich", "big": 2**70}) == '{"city":"Zürich","big":1180591620717411303424}'.encode()


async def test_an_ipv6_range_answers_its_exact_host_count(settings: Settings) -> None:
    async with running_app(settings) as client:
        response = await client.get("/cidr", params={"range": "2001:db8::/48"})
    assert response.status_code == 200
    assert b'"totalHosts":1208925819614629174706176' in response.content
    assert response.json()["data"]["usableHosts"] == 2**80


def test_a_tool_result_text_is_json_for_what_orjson_refuses() -> None:
    """The text of an MCP tool result is JSON inside JSON: it goes through the same encoder, fallbacks included."""
    data = {"totalHosts": 2**80, "name": "\ud800", "city": "Zürich"}
    text = tool_success(data)["content"][0]["text"]
    assert json.loads(text) == data
    assert text.encode("utf-8")  # the lone surrogate is the escape it came in as, not a character UTF-8 refuses
    assert dumps_text({"n": 1}) == '{"n":1}'
