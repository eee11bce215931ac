"""The OpenAPI 3.1 document of ``/openapi.json`` (docs/API.md#openapi-and-schemas), assembled here alone: the
REST endpoints from their :class:`~ipintel.api.rest.endpoint.Endpoint` declarations and the schema files of
``schemas/``, the operations routes, ``/metrics`` and ``/mcp``, and what this server's configuration changes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from ipintel import __version__
from ipintel.api.rest.endpoint import Endpoint
from ipintel.errors import STATUS_BY_CODE
from ipintel.schema_files import embeddable_schema
from ipintel.settings import Settings

_RATE_HEADERS = {
    "RateLimit-Limit": ("Requests allowed per window in this route's scope", "integer"),
    "RateLimit-Remaining": ("Requests left in the current window", "integer"),
    "RateLimit-Reset": ("Seconds until the bucket is full again", "integer"),
    "RateLimit-Policy": ("The scope's policy, e.g. 60;w=60", "string"),
}
_COMMON_ERRORS = ("internal_error",)


def build_document(endpoints: Iterable[Endpoint], settings: Settings) -> dict[str, Any]:
    """The document of a server with these endpoints and ``settings``."""
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
    paths.update({**_OPS_PATHS, **_METRICS_PATHS, **_MCP_PATHS})
    schemas.update(_mcp_components())
    schemas.setdefault("health", embeddable_schema("health"))
    # The batch limit is configuration (IPINTEL_BATCH_MAX): the document states this server's.
    schemas["ip_batch_request"]["properties"]["ips"]["maxItems"] = settings.batch_max
    headers = {name: {"description": text, "schema": {"type": kind}} for name, (text, kind) in _RATE_HEADERS.items()}
    headers["Retry-After"] = {"description": "Whole seconds to wait (at least 1)", "schema": {"type": "integer"}}
    document = {
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
    if settings.api_keys_file is not None:
        _require_keys(document)
    return document


def _require_keys(document: dict[str, Any]) -> None:
    """With ``IPINTEL_API_KEYS_FILE``: the security schemes, and on every operation of a rate-limited route (the
    routes that need a key, docs/API.md#authentication) its ``security`` and its 401 answer."""
    components = document.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key of IPINTEL_API_KEYS_FILE: Authorization: Bearer <key>",
        },
        "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "The same key"},
    }
    challenge = {
        "WWW-Authenticate": {
            "description": 'Bearer realm="ipintel", with error="invalid_token" or "invalid_request" when a key '
            "was sent",
            "schema": {"type": "string"},
        }
    }
    paths = document.get("paths", {})
    for path in list(paths):
        if not any(isinstance(op, dict) and "x-rate-limit-scope" in op for op in paths[path].values()):
            continue
        # A copy: the items of the operations routes and /mcp are module constants, shared by every app.
        item = paths[path] = copy.deepcopy(paths[path])
        mcp = path == "/mcp" or path.startswith("/mcp/")
        schema = {"$ref": "#/components/schemas/McpResponse" if mcp else "#/components/schemas/Error"}
        for method, operation in item.items():
            if method == "options" or not isinstance(operation, dict) or "responses" not in operation:
                continue
            operation["security"] = [{"bearer": []}, {"apiKey": []}]
            description = (
                "No valid API key (JSON-RPC error -32000, data.httpStatus 401)"
                if mcp
                else "Error codes: `unauthorized` (no API key, a malformed header, or a key not in force)"
            )
            operation["responses"]["401"] = {
                "description": description,
                "headers": dict(challenge),
                "content": {"application/json": {"schema": dict(schema)}},
            }
            operation["responses"] = dict(sorted(operation["responses"].items()))


# The operations routes (ipintel/api/rest/ops.py) -------------------------------------------------


def _health(description: str) -> dict[str, Any]:
    """A 200 answering ``{"data": <health>}``."""
    return {
        "description": description,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {"data": {"$ref": "#/components/schemas/health"}},
                }
            }
        },
    }


_OPS_PATHS: dict[str, Any] = {
    "/healthz": {
        "get": {
            "operationId": "healthz",
            "summary": "Liveness",
            "tags": ["operations"],
            "responses": {"200": _health("The process is alive")},
        }
    },
    "/readyz": {
        "get": {
            "operationId": "readyz",
            "summary": "Readiness: 200 when the GeoIP database is loaded",
            "tags": ["operations"],
            "responses": {
                "200": _health("Ready, with the state of each database and feed"),
                "503": {
                    "description": "Error codes: `geoip_unavailable`",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        }
    },
}


# GET /metrics (ipintel/api/rest/metrics.py) ------------------------------------------------------

_METRICS_PATHS: dict[str, Any] = {
    "/metrics": {
        "get": {
            "operationId": "metrics",
            "summary": "Prometheus metrics",
            "description": (
                "Requests by route template and status with latency histograms, cache hits/misses/evictions, "
                "rate-limit rejections by scope, upstream calls by source and outcome with latency, feed ages, "
                "GeoIP database build dates and reloads, process figures. Not rate limited."
            ),
            "tags": ["operations"],
            "responses": {
                "200": {
                    "description": "Prometheus text exposition format 0.0.4 (OpenMetrics when asked for)",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }
            },
        }
    }
}


# POST /mcp (ipintel/api/mcp/transport.py) ------------------------------------------------------------

_COMPONENTS = {
    "McpRequest": "mcp/request",
    "McpNotification": "mcp/notification",
    "McpResponse": "mcp/response",
    "McpBatch": "mcp/batch",
}


def _mcp_components() -> dict[str, Any]:
    """The envelope schemas, for ``components.schemas`` of the OpenAPI document."""
    return {component: embeddable_schema(name) for component, name in _COMPONENTS.items()}


def _rpc_error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/McpResponse"}}},
    }
    if headers:
        response["headers"] = headers
    return response


_MCP_PATHS: dict[str, Any] = {
    "/mcp": {
        "post": {
            "operationId": "mcp",
            "summary": "MCP tool endpoint (JSON-RPC 2.0, Streamable HTTP without sessions)",
            "description": (
                "Model Context Protocol for AI clients: tools/list and tools/call of lookup_ip, whois_ip, "
                "lookup_dns, check_blacklist, detect_vpn, calculate_cidr, profile_ip, lookup_ips and lookup_asn, "
                "the same capabilities and caches as "
                "the REST routes; resources/list and resources/read of ui://ipintel/profile, the profile card of "
                "the MCP Apps extension (io.modelcontextprotocol/ui). Two eras on one endpoint, decided per request. 2026-07-28: a request carries "
                "params._meta['io.modelcontextprotocol/protocolVersion'] and clientCapabilities, and the headers "
                "MCP-Protocol-Version, Mcp-Method and (tools/call) Mcp-Name, which must agree with the body; "
                "server/discover lists the versions; results carry resultType and _meta with the server's "
                "identity; refusals are 400 (-32700, -32600, -32602, -32020 header mismatch, -32022 unsupported "
                "version with data.supported) or 404 (-32601); one message per POST. 2025-11-25, 2025-06-18, "
                "2025-03-26 and 2024-11-05: initialize and ping, batches of at most 20, JSON-RPC errors with "
                "HTTP 200. A request is 2026-07-28 when its _meta names a version or its MCP-Protocol-Version "
                "header names anything but those four. Stateless: no Mcp-Session-Id; GET and DELETE answer 405. "
                "A client that accepts only text/event-stream gets a 200 answer as one SSE event. /mcp/ answers "
                "too. A tools/call also spends a token of its tool's rate-limit scope (lookup_dns: dns; whois_ip, "
                "lookup_asn and check_blacklist: registry); a spent scope is an isError result with code rate_limited. "
                "See docs/MCP.md."
            ),
            "parameters": [
                {
                    "name": "MCP-Protocol-Version",
                    "in": "header",
                    "required": False,
                    "description": "The revision the request speaks (required by 2025-06-18 and later)",
                    "schema": {"type": "string", "examples": ["2026-07-28", "2025-11-25"]},
                },
                {
                    "name": "Mcp-Method",
                    "in": "header",
                    "required": False,
                    "description": "2026-07-28: the request's method, as in the body",
                    "schema": {"type": "string", "examples": ["tools/call"]},
                },
                {
                    "name": "Mcp-Name",
                    "in": "header",
                    "required": False,
                    "description": "2026-07-28, tools/call: the tool's name (resources/read: the URI), plain or as =?base64?…?=",
                    "schema": {"type": "string", "examples": ["calculate_cidr"]},
                },
            ],
            "tags": ["mcp"],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "anyOf": [
                                {"$ref": "#/components/schemas/McpRequest"},
                                {"$ref": "#/components/schemas/McpNotification"},
                                {"$ref": "#/components/schemas/McpResponse"},
                                {"$ref": "#/components/schemas/McpBatch"},
                            ]
                        }
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "The answer: a JSON-RPC response, or an array of them for a batch",
                    "headers": {
                        name: {"$ref": f"#/components/headers/{name}"}
                        for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy")
                    },
                    "content": {
                        "application/json": {
                            "schema": {
                                "anyOf": [
                                    {"$ref": "#/components/schemas/McpResponse"},
                                    {"type": "array", "items": {"$ref": "#/components/schemas/McpResponse"}},
                                ]
                            }
                        },
                        "text/event-stream": {
                            "schema": {"type": "string", "description": "one event: message, data: the JSON answer"}
                        },
                    },
                },
                "202": {"description": "Only notifications or responses were posted: nothing to answer, empty body"},
                "400": _rpc_error(
                    "2026-07-28: the request was refused before it was answered: not JSON (-32700), not one "
                    "well-formed request (-32600), _meta keys or params missing or wrong (-32602), routing headers "
                    "missing or disagreeing with the body (-32020), or a version this server does not speak "
                    "(-32022, data.supported lists every version)"
                ),
                "404": _rpc_error("2026-07-28: the method is not offered, or was removed in that revision (-32601)"),
                "403": _rpc_error(
                    "The Origin is not in IPINTEL_MCP_ALLOWED_ORIGINS (code -32000, data.code origin_not_allowed)"
                ),
                "405": _rpc_error(
                    "Not POST (code -32000)", {"Allow": {"schema": {"type": "string"}, "description": "POST"}}
                ),
                "413": _rpc_error("The body is over IPINTEL_MAX_BODY_BYTES (code -32000)"),
                "415": _rpc_error("The body is not application/json (code -32000)"),
                "429": _rpc_error(
                    "The general rate limit is spent (code -32000)",
                    {"Retry-After": {"$ref": "#/components/headers/Retry-After"}},
                ),
            },
            "x-rate-limit-scope": "general",
        },
        # The preflight is documented so that a client (and the fuzzer) knows what it answers. GET and
        # DELETE are not: they are not offered (405, as for any undocumented method), and Allow lists
        # exactly the documented methods.
        "options": {
            "operationId": "mcpPreflight",
            "summary": "CORS preflight of /mcp",
            "description": (
                "What a browser asks before a cross-origin POST. Answered for an allowed Origin (or none); "
                "not rate limited."
            ),
            "tags": ["mcp"],
            "responses": {
                "204": {
                    "description": "POST may be sent: the allowed methods and headers, cacheable for 600 s",
                    "headers": {
                        name: {"schema": {"type": "string"}}
                        for name in (
                            "Allow",
                            "Access-Control-Allow-Methods",
                            "Access-Control-Allow-Headers",
                            "Access-Control-Max-Age",
                        )
                    },
                },
                "403": _rpc_error(
                    "The Origin is not in IPINTEL_MCP_ALLOWED_ORIGINS (code -32000, data.code origin_not_allowed)"
                ),
            },
        },
    }
}
