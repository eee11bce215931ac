"""Schema checks (ipintel/schema_check.py): which failure is reported, in which words, and the quick yes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ipintel.schema_check import Failure, SchemaCheck, file_check, json_type, plain_object_check, shown_value
from ipintel.schema_files import load_schema

ORDER = {
    "type": "object",
    "required": ["item"],
    "additionalProperties": False,
    "properties": {
        "item": {"type": "string", "examples": ["8.8.8.8"]},
        "size": {"type": "string", "enum": ["S", "M", "L"]},
        "tags": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": ["a", "b"]}},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}


def refusal(check: SchemaCheck, document: Any) -> Failure:
    failure = check.failure(document)
    assert failure is not None, f"{document!r} passed"
    return failure


def failure_of(document: Any, schema: dict[str, Any] = ORDER) -> Failure:
    return refusal(SchemaCheck(schema, what="an order"), document)


def test_a_document_the_schema_accepts_has_no_failure() -> None:
    check = SchemaCheck(ORDER, what="an order")
    assert check.failure({"item": "x"}) is None
    assert check.failure({"item": "x", "size": "M", "tags": ["a", "b"], "notes": []}) is None


def test_an_unknown_member_is_reported_before_a_missing_one_and_the_members_are_listed() -> None:
    failure = failure_of({"colour": "red"})
    assert failure.keyword == "additionalProperties" and failure.member is None
    assert failure.message == "unexpected member 'colour'; an order takes only item, size, tags and notes"


def test_unknown_members_are_quoted_short_and_at_most_five() -> None:
    names = ["x" * 10_000, *(f"extra{i}" for i in range(9))]
    failure = failure_of({"item": "x", **dict.fromkeys(names, 1)})
    assert failure.message.startswith("unexpected members 'extra0', 'extra1', 'extra2', 'extra3', 'extra4';")
    assert len(failure.message) < 200
    long_only = failure_of({"item": "x", "y" * 10_000: 1})
    assert f"'{'y' * 40}…'" in long_only.message and len(long_only.message) < 200


def test_a_missing_member_is_named_with_an_example_and_is_the_member_at_fault() -> None:
    failure = failure_of({"size": "M"})
    assert failure.keyword == "required" and failure.member == "item"
    assert failure.message == "an order needs the member 'item', e.g. \"8.8.8.8\""


def test_a_wrong_type_names_both_json_types_and_never_the_value() -> None:
    failure = failure_of({"item": 12345678})
    assert failure.member == "item" and failure.path == ("item",)
    assert failure.message == "the member 'item' must be a string, not a number"
    assert "12345678" not in failure.message


def test_a_value_outside_an_enum_lists_the_choices_and_quotes_at_most_forty_characters() -> None:
    failure = failure_of({"item": "x", "size": "XL"})
    assert failure.message == "the member 'size' must be one of S, M, L, not 'XL'"
    huge = failure_of({"item": "x", "size": "X" * 1_000_000})
    assert huge.message.endswith(f"not '{'X' * 40}…'")


def test_a_failure_inside_an_array_names_the_item_by_its_place() -> None:
    assert failure_of({"item": "x", "tags": ["a", "c"]}).message == "the member 'tags[1]' must be one of a, b, not 'c'"
    wrong_type = failure_of({"item": "x", "tags": ["a", ["b"]]})
    assert wrong_type.path == ("tags", 1) and wrong_type.member == "tags"
    assert wrong_type.message == "the member 'tags[1]' must be a string, not an array"


def test_a_wrong_type_is_reported_before_a_value_outside_an_enum() -> None:
    failure = failure_of({"item": "x", "size": "XL", "notes": "one note"})
    assert failure.keyword == "type" and failure.member == "notes"


@pytest.mark.parametrize(
    ("tags", "said"),
    [
        ([], "the member 'tags' must hold at least 1 item"),
        (["a", "b", "a", "b"], "the member 'tags' must hold at most 3 items"),
        (None, "the member 'tags' must be an array, not null"),
    ],
)
def test_bounds_and_types_of_an_array_are_said_in_words(tags: Any, said: str) -> None:
    assert failure_of({"item": "x", "tags": tags}).message == said


def test_the_document_itself_is_named_by_what_it_is() -> None:
    failure = failure_of(["item"])
    assert failure.path == () and failure.member is None
    assert failure.message == "an order must be an object, not an array"


def test_the_noun_names_the_top_level_members() -> None:
    check = SchemaCheck(ORDER, what="order_tool", noun="argument")
    assert refusal(check, {}).message == "order_tool needs the argument 'item', e.g. \"8.8.8.8\""
    assert refusal(check, {"item": 1}).message == "the argument 'item' must be a string, not a number"
    assert refusal(check, {"item": "x", "a": 1, "b": 2}).message.startswith("unexpected arguments 'a', 'b'; order_tool")


def test_string_lengths_and_constants_are_said_in_words() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 2, "maxLength": 3},
            "version": {"const": "2.0"},
        },
    }
    assert failure_of({"code": "x"}, schema).message == "the member 'code' must be at least 2 characters long"
    assert failure_of({"code": "xxxx"}, schema).message == "the member 'code' must be at most 3 characters long"
    assert failure_of({"version": "1.0"}, schema).message == "the member 'version' must be \"2.0\""


def test_when_no_branch_fits_the_failure_of_the_branch_the_document_went_furthest_into_is_reported() -> None:
    """A JSON-RPC response is a result or an error (schemas/mcp/response.json, oneOf)."""
    check = SchemaCheck(load_schema("mcp/response"), what="a JSON-RPC response")
    error_response = refusal(check, {"jsonrpc": "2.0", "id": None, "error": {"code": "x", "message": "m"}})
    assert error_response.path == ("error", "code")
    assert error_response.message == "the member 'error.code' must be an integer, not a string"
    old_version = refusal(check, {"jsonrpc": "1.0", "id": 1, "result": {}})
    assert old_version.member == "jsonrpc" and old_version.message == "the member 'jsonrpc' must be \"2.0\""
    both = refusal(check, {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}})
    assert both.message == "unexpected member 'error'; a JSON-RPC response takes only jsonrpc, id and result"


def test_values_are_named_by_their_json_type_and_strings_are_cut_short() -> None:
    values: list[Any] = [None, True, 1, 1.5, "s", [], {}]
    assert [json_type(v) for v in values] == [
        "null",
        "a boolean",
        "a number",
        "a number",
        "a string",
        "an array",
        "an object",
    ]
    assert shown_value("abc") == "'abc'"
    assert shown_value("a" * 41) == f"'{'a' * 40}…'"
    assert shown_value(10**30) == "a number"


# The quick check ---------------------------------------------------------------------------------------------


def test_a_quick_check_given_is_asked_first_and_the_validator_only_after_its_no() -> None:
    asked: list[Any] = []

    def quick(document: Any) -> bool:
        asked.append(document)
        return document == {"item": "quick"}

    check = SchemaCheck(ORDER, what="an order", quick=quick)
    assert check.failure({"item": "quick"}) is None
    assert check.failure({"item": "slow"}) is None  # the quick check's no is not a refusal
    assert check.failure({}) is not None
    assert asked == [{"item": "quick"}, {"item": "slow"}, {}]


@pytest.mark.parametrize(
    "schema",
    [
        {**ORDER, "minProperties": 1},  # a keyword of the object the check does not know
        {**ORDER, "additionalProperties": True},
        {**ORDER, "properties": {"item": {"type": "string", "maxLength": 5}}},
        {**ORDER, "properties": {"item": {"type": "integer"}}},
        {**ORDER, "properties": {"item": {"type": "array", "items": {"type": "integer"}}}},
        {**ORDER, "properties": {"item": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}},
        {**ORDER, "properties": {"item": {"type": "array"}}},
        {**ORDER, "properties": {"item": {"type": "string", "enum": ["a", 1]}}},
        {"oneOf": [ORDER]},
    ],
)
def test_a_schema_asking_more_than_the_quick_check_knows_gets_none(schema: dict[str, Any]) -> None:
    assert plain_object_check(schema) is None


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["8.8.8.8", "S", "M", "a", "b", "c", ""]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["item", "x"]), inner, max_size=2),
    max_leaves=6,
)


@given(
    st.one_of(
        st.dictionaries(st.sampled_from(["item", "size", "tags", "notes", "other"]), _VALUES, max_size=4),
        _VALUES,
    )
)
def test_the_quick_check_says_yes_exactly_when_the_validator_does(document: Any) -> None:
    check = plain_object_check(ORDER)
    assert check is not None
    assert check(document) == Draft202012Validator(ORDER).is_valid(document), document


# The batch body --------------------------------------------------------------------------------------------


def test_the_batch_body_is_checked_quickly_with_no_limit_on_its_addresses() -> None:
    """The limit is per server (IPINTEL_BATCH_MAX), checked by the service: the schema file sets none."""
    check = file_check("ip_batch.request", what="a batch")
    assert check is file_check("ip_batch.request", what="a batch")  # compiled once
    assert plain_object_check(check.schema) is not None
    assert check.failure({"ips": ["8.8.8.8"] * 5000, "include": ["geo", "whois"]}) is None
    assert check.failure({"ips": []}) is None
    assert refusal(check, {"ips": ["8.8.8.8"], "include": None}).path == ("include",)
