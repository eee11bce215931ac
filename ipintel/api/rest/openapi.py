"""The OpenAPI 3.1 document, assembled from the JSON Schema files in ``schemas/``
and the :class:`~ipintel.api.rest.endpoint.Endpoint` declarations (docs/API.md#openapi-and-schemas).

The schema files are the single source: the same files validate responses in
the tests and become the MCP tools' ``outputSchema``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from ipintel import __version__
from ipintel.api.rest.endpoint import Endpoint
from ipintel.errors import STATUS_BY_CODE
from ipintel.schema_files import embeddable_schema

_RATE_HEADERS = {
    "RateLimit-Limit": ("Requests allowed per window in this route's scope", "integer"),
    "RateLimit-Remaining": ("Requests left in the current window", "integer"),
    "RateLimit-Reset": ("Seconds until the bucket is full again", "integer"),
    "RateLimit-Policy": ("The scope's policy, e.g. 60;w=60", "string"),
}
_COMMON_ERRORS = ("internal_error",)


def build_document(endpoints: Iterable[Endpoint], extra_paths: dict[str, Any] | None = None) -> dict[str, Any]:
    endpoints = list(endpoints)
    schemas: dict[str, Any] = {"Error": embeddable_schema("error")}
    paths: dict[str, Any] = {}
    for ep in endpoints:
        component = ep.schema.replace("/", "_")
        schemas.setdefault(component, embeddable_schema(ep.schema))
        responses: dict[str, Any] = {
            "200": {
                "description": ep.summary,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["data"],
                            "additionalProperties": False,
                            "properties": {"data": {"$ref": f"#/components/schemas/{component}"}},
                        }
                    }
                },
            }
        }
        # An encoded slash in a path parameter ("/ip/8.8.8.8%2F24/vpn") makes it another path, one
        # with no route: 404 not_found is a real answer of every route with a path parameter.
        unrouted = ["not_found"] if "{" in ep.path and "not_found" not in ep.errors else []
        codes = [*ep.errors, *unrouted, *_COMMON_ERRORS] + (["rate_limited"] if ep.quota else [])
        by_status: dict[int, list[str]] = {}
        for code in codes:
            by_status.setdefault(STATUS_BY_CODE[code], []).append(code)
        for status, status_codes in sorted(by_status.items()):
            responses[str(status)] = {
                "description": "Error codes: " + ", ".join(f"`{c}`" for c in status_codes),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }
            if status == 429:
                responses["429"]["headers"] = {"Retry-After": {"$ref": "#/components/headers/Retry-After"}}
        if ep.quota:
            for response in responses.values():
                response.setdefault("headers", {}).update(
                    {name: {"$ref": f"#/components/headers/{name}"} for name in _RATE_HEADERS}
                )
        body: dict[str, Any] = {}
        if ep.body_schema is not None:
            body_component = ep.body_schema.replace("/", "_").replace(".", "_")
            schemas.setdefault(body_component, embeddable_schema(ep.body_schema))
            content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{body_component}"}}}
            body = {"requestBody": {"required": True, "content": content}}
        paths.setdefault(ep.path, {})[ep.method.lower()] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "description": ep.description or ep.summary,
            "tags": list(ep.tags),
            "parameters": [copy.deepcopy(p) for p in ep.parameters],
            **body,
            "responses": responses,
            **({"x-rate-limit-scope": ep.quota.value} if ep.quota else {}),
        }
    for path, item in (extra_paths or {}).items():
        paths[path] = item
    headers = {name: {"description": text, "schema": {"type": kind}} for name, (text, kind) in _RATE_HEADERS.items()}
    headers["Retry-After"] = {"description": "Whole seconds to wait (at least 1)", "schema": {"type": "integer"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ipintel",
            "version": __version__,
            "description": (
                "Self-hosted IP intelligence: GeoIP, VPN/proxy/hosting detection, RDAP registration data, "
                'DNS, DNS blacklists and CIDR arithmetic. Every success is {"data": ...}; every failure '
                '{"error": {"code", "message"}}; unknown values are null.'
            ),
            "license": {"name": "MIT", "identifier": "MIT"},
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": schemas, "headers": headers},
    }
