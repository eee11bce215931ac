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

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A schema file by name (``"geoip"`` or ``"mcp/request"``), parsed once. Shared: never mutate it."""
    loaded: dict[str, Any] = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


def embeddable_schema(name: str) -> dict[str, Any]:
    """A fresh copy of a schema file to nest inside another document, without ``$schema`` and ``$id``.

    An ``$id`` inside an OpenAPI component or a tool's schema would make a
    validator register the same id twice (Ajv, used by the MCP Inspector,
    refuses to compile that), and ``$schema`` is only allowed at a root."""
    embedded = copy.deepcopy(load_schema(name))
    embedded.pop("$schema", None)
    embedded.pop("$id", None)
    return embedded
