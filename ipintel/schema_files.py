"""The JSON Schema files in ``schemas/``: the one place they are read.

Each resource's ``data`` object, the error object and the MCP envelopes are
described once, in a file, and that file serves everywhere: the OpenAPI
document, the MCP tools' ``inputSchema``/``outputSchema``, the envelope checks
of ``/mcp`` and the response checks of the tests (docs/API.md#openapi-and-schemas).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import orjson

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema file by name (``"geoip"`` or ``"mcp/request"``), parsed once. Shared: never mutate it."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


def embeddable_schema(name: str) -> dict[str, Any]:
    """A fresh, self-contained copy of a schema file to nest inside another document or to validate with:
    without ``$schema`` and ``$id``, and with every reference to another file (``"$ref": "geoip.json"``,
    ``"error.json#/properties/error"``) replaced by that file's schema (or the part it points at)."""
    copied: dict[str, Any] = orjson.loads(orjson.dumps(_embedded(name)))  # JSON: several times faster than deepcopy
    return copied


@cache
def _embedded(name: str) -> dict[str, Any]:
    """The self-contained schema, resolved once (every app built in a process asks for the same ones). Shared."""
    return _resolved(name, ())


def _resolved(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
    if name in chain:
        raise ValueError(f"schema {chain[0]} refers to itself through {' -> '.join((*chain, name))}")
    embedded = copy.deepcopy(load_schema(name))
    # An $id inside an OpenAPI component or a tool's schema would make a validator register the same id twice
    # (Ajv, used by the MCP Inspector, refuses to compile that), and $schema is only allowed at a root.
    embedded.pop("$schema", None)
    embedded.pop("$id", None)
    inlined: dict[str, Any] = _inline(embedded, name.rpartition("/")[0], (*chain, name))
    return inlined


def _inline(node: Any, folder: str, chain: tuple[str, ...]) -> Any:
    """``node`` with every reference to another schema file replaced by (a part of) that file."""
    if isinstance(node, list):
        return [_inline(item, folder, chain) for item in node]
    if not isinstance(node, dict):
        return node
    # Inlined so that no reader has to fetch or register anything: a composite answer (a profile) is described by
    # the same files as its parts, and an MCP client gets one schema it can compile.
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        file, _, pointer = ref.partition("#")
        target = f"{folder}/{file.removesuffix('.json')}" if folder else file.removesuffix(".json")
        part: Any = _resolved(target, chain)
        for step in filter(None, pointer.split("/")):
            part = part[step]
        siblings = {key: _inline(value, folder, chain) for key, value in node.items() if key != "$ref"}
        return {**part, **siblings}
    return {key: _inline(value, folder, chain) for key, value in node.items()}
