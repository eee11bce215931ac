"""Checking a parsed JSON document against a JSON Schema, and saying in one wording what is wrong with it.

MCP tool arguments, JSON-RPC envelopes and the batch body are all checked here; a caller only decides
which error a :class:`Failure` becomes, and keeps a few messages of its own vocabulary.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from ipintel.schema_files import embeddable_schema

QuickCheck = Callable[[Any], bool]

# How much of a client's value a message may quote: a value can be a megabyte long.
SHOWN_CHARACTERS = 40


@dataclass(frozen=True, slots=True)
class Failure:
    """The one failure of a document worth reporting, and its message."""

    keyword: str  # the JSON Schema keyword that failed: "required", "type", "enum", "additionalProperties"...
    path: tuple[str | int, ...]  # where in the document; () is the document itself
    member: str | None  # the top-level member at fault (for "required", the missing one); None: the whole document
    message: str


class SchemaCheck:
    """One schema, its validator compiled once, an optional quick yes, and the wording of its failures.

    ``what`` names the document in messages (``"calculate_cidr"``, ``"a JSON-RPC request"``), ``noun`` its
    top-level members (``"argument"``). ``quick`` answers ``True`` only for documents the schema accepts;
    without one, :func:`plain_object_check` derives it when the schema is plain enough."""

    def __init__(
        self, schema: dict[str, Any], *, what: str, noun: str = "member", quick: QuickCheck | None = None
    ) -> None:
        self.schema = schema
        self.what = what
        self.noun = noun
        self._validator = Draft202012Validator(schema)
        self._quick = quick if quick is not None else plain_object_check(schema)

    def failure(self, document: Any) -> Failure | None:
        """``None`` when the schema accepts ``document``; else its most useful failure, worded."""
        # The quick check spares a valid document the validator's walk (most of a cached MCP call's checking);
        # a False from it only means "ask the validator", which stays the one judge.
        if (self._quick is not None and self._quick(document)) or self._validator.is_valid(document):
            return None
        return self._worded(most_useful(self._validator.iter_errors(document)))

    def _worded(self, error: ValidationError) -> Failure:
        keyword = str(error.validator)
        path = tuple(error.absolute_path)
        # jsonschema types these as possibly unset; for a failed keyword they are the instance, the keyword's
        # value and the (sub)schema holding it.
        instance: Any = error.instance
        expected: Any = error.validator_value
        schema: Any = error.schema
        member = str(path[0]) if path else None
        subject = f"the {self.noun} '{_path_text(path)}'" if path else self.what
        if keyword == "required":
            missing = next((name for name in expected if name not in instance), "?")
            examples = schema.get("properties", {}).get(missing, {}).get("examples")
            hint = f", e.g. {json.dumps(examples[0])}" if examples else ""
            if path:
                return Failure(keyword, path, member, f"{subject} needs the member '{missing}'{hint}")
            return Failure(keyword, path, missing, f"{self.what} needs the {self.noun} '{missing}'{hint}")
        if keyword == "additionalProperties":
            known = list(schema.get("properties", {}))
            extra = sorted(set(instance) - set(known))
            shown = ", ".join(shown_value(name) for name in extra[:5])
            noun = self.noun if not path else "member"
            unexpected = f"unexpected {noun}{'s' if len(extra) > 1 else ''} {shown}"
            takes = f"takes only {_listing(known)}" if known else f"takes no {noun}s"
            return Failure(keyword, path, member, f"{unexpected}; {subject} {takes}")
        return Failure(keyword, path, member, f"{subject} {_rule(keyword, expected, instance)}")


def _rule(keyword: str, expected: Any, instance: Any) -> str:
    """What a value must be, by the keyword it failed."""
    if keyword == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        return f"must be {' or '.join(_TYPE_NAMES.get(t, t) for t in types)}, not {json_type(instance)}"
    if keyword == "enum":
        return f"must be one of {', '.join(str(choice) for choice in expected)}, not {shown_value(instance)}"
    if keyword == "const":
        return f"must be {json.dumps(expected)}"
    if keyword in ("minLength", "maxLength"):
        return f"must be {_bound(keyword)} {_count(expected, 'character')} long"
    if keyword in ("minItems", "maxItems"):
        return f"must hold {_bound(keyword)} {_count(expected, 'item')}"
    return f"does not match its schema ({keyword})"


def _bound(keyword: str) -> str:
    return "at least" if keyword.startswith("min") else "at most"


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}{'' if number == 1 else 's'}"


def _listing(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _path_text(path: tuple[str | int, ...]) -> str:
    """``include[1]``, ``error.code``: a place in the document as a programmer writes it."""
    text = str(path[0])[:SHOWN_CHARACTERS]
    for step in path[1:]:
        text += f"[{step}]" if isinstance(step, int) else f".{step[:SHOWN_CHARACTERS]}"
    return text


_TYPE_NAMES = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def json_type(value: Any) -> str:
    """The JSON type of a parsed value, as a message says it (``"a string"``, ``"null"``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def shown_value(value: Any) -> str:
    """A client's value for a message: a string quoted and cut short, anything else only named by its type."""
    if not isinstance(value, str):
        return json_type(value)
    return repr(value if len(value) <= SHOWN_CHARACTERS else value[:SHOWN_CHARACTERS] + "…")


# Reported first: a member that should not be there, then a missing one, then a wrong type, then the rest;
# within each, the failure nearest the top of the document.
_KEYWORD_ORDER = {"additionalProperties": 0, "required": 1, "type": 2}


def _rank(error: ValidationError) -> tuple[int, int]:
    return (_KEYWORD_ORDER.get(str(error.validator), 3), len(error.absolute_path))


def most_useful(errors: Iterable[ValidationError]) -> ValidationError:
    """The failure to report among a document's failures."""
    best = min(errors, key=_rank)
    while best.validator in ("oneOf", "anyOf") and best.context:
        # No branch fits (a JSON-RPC response: a result or an error). The document meant the branch it went
        # furthest into before failing (the first such), so that branch's own failure is the one to report.
        branches: dict[Any, list[ValidationError]] = {}
        for error in best.context:
            branches.setdefault(error.relative_schema_path[0], []).append(error)
        nearest = max(branches.values(), key=lambda failures: min(len(e.absolute_path) for e in failures))
        best = min(nearest, key=_rank)
    return best


@cache
def file_check(name: str, *, what: str, noun: str = "member") -> SchemaCheck:
    """The check of a schema file of ``schemas/`` (``"ip_batch.request"``), compiled once per process."""
    return SchemaCheck(embeddable_schema(name), what=what, noun=noun)


# Quick checks ---------------------------------------------------------------------------------------------

# Keywords that only describe: they never make an instance invalid.
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "examples", "default"})
_NO_LIMIT = sys.maxsize

# A plain array member: (minItems, maxItems, the strings its items may be, or None for any string).
_ArrayRule = tuple[int, int, frozenset[str] | None]


def plain_object_check(schema: dict[str, Any]) -> QuickCheck | None:
    """A quick yes for the common shape: an object whose members are strings, or arrays of strings with
    bounds on their length, each string maybe from an enum; some members required, no others allowed.

    ``None`` when the schema uses anything more. The check only ever says "valid"; a ``False`` sends the
    document to the validator, which decides and explains."""
    if (
        not schema.keys() - _ANNOTATIONS <= {"type", "properties", "required", "additionalProperties"}
        or schema.get("type") != "object"
        or schema.get("additionalProperties") is not False
    ):
        return None
    strings: dict[str, frozenset[str] | None] = {}
    arrays: dict[str, _ArrayRule] = {}
    for name, member in schema.get("properties", {}).items():
        if member.get("type") == "array":
            rule = _plain_array(member)
            if rule is None:
                return None
            arrays[name] = rule
            continue
        if not _is_plain_string(member):
            return None
        strings[name] = _choices(member)
    required = frozenset(schema.get("required", ()))

    def check(document: Any) -> bool:
        if type(document) is not dict or not required <= document.keys():
            return False
        for name, value in document.items():
            if name in strings:
                if type(value) is not str:
                    return False
                allowed = strings[name]
                if allowed is not None and value not in allowed:
                    return False
            elif name in arrays:
                if not _plain_array_holds(value, *arrays[name]):
                    return False
            else:
                return False
        return True

    return check


def _is_plain_string(member: dict[str, Any]) -> bool:
    enum = member.get("enum")
    return (
        member.keys() - _ANNOTATIONS <= {"type", "enum"}
        and member.get("type") == "string"
        and (enum is None or all(type(choice) is str for choice in enum))
    )


def _choices(member: dict[str, Any]) -> frozenset[str] | None:
    enum = member.get("enum")
    return frozenset(enum) if enum is not None else None


def _plain_array(member: dict[str, Any]) -> _ArrayRule | None:
    items = member.get("items")
    low, high = member.get("minItems", 0), member.get("maxItems", _NO_LIMIT)
    if (
        not member.keys() - _ANNOTATIONS <= {"type", "items", "minItems", "maxItems"}
        or not isinstance(items, dict)
        or not _is_plain_string(items)
        or type(low) is not int
        or type(high) is not int
    ):
        return None
    return low, high, _choices(items)


def _plain_array_holds(value: Any, low: int, high: int, allowed: frozenset[str] | None) -> bool:
    if type(value) is not list or not low <= len(value) <= high:
        return False
    if allowed is None:
        return all(type(item) is str for item in value)
    return all(type(item) is str and item in allowed for item in value)
