"""JSON-RPC 2.0 for the MCP endpoint (docs/MCP.md), independent of HTTP: :class:`McpProtocol` answers a parsed
body (a message or a batch) in either era, or says there is nothing to answer (``None``: HTTP 202). Each message
is classified by its keys and checked against its envelope schema in ``schemas/mcp/``.
"""

# Stateless, with tools and one resource (the MCP Apps card): every method works without a prior initialize, and
# one answer fits every protocol version the server speaks.

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ipintel import __version__
from ipintel.api.mcp import apps
from ipintel.api.mcp.envelope import (
    CLIENT_CAPABILITIES_KEY,
    LEGACY_VERSIONS,
    SERVER_INFO_KEY,
    SUPPORTED_VERSIONS,
    RoutingHeaders,
    check_notification,
    check_request,
)
from ipintel.api.mcp.tools import CallContext, ToolSet
from ipintel.encoding import dumps_text
from ipintel.errors import ApiError
from ipintel.schema_check import QuickCheck, SchemaCheck
from ipintel.schema_files import load_schema
from ipintel.web.responses import rpc_error

if TYPE_CHECKING:
    from ipintel.service import Intel

log = logging.getLogger("ipintel.mcp")

# JSON-RPC 2.0 error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP's code for a resources/read of a URI the server does not have (every revision since 2024-11-05).
RESOURCE_NOT_FOUND = -32002

# ``initialize`` agrees on a legacy version it is asked for, and answers any other with the newest
# legacy one, as the reference server does: a client that asked for something newer (2026-07-28 in a
# handshake) can still carry on, and one that cannot speak it disconnects (docs/MCP.md#versions).
FALLBACK_VERSION = LEGACY_VERSIONS[0]

# How long a client may keep the tool list of a 2026-07-28 ``tools/list`` (``ttlMs``). The list is
# fixed for the life of the process, the same for every caller (``cacheScope: public``); an hour
# bounds how long a client keeps a list from before an upgrade.
TOOLS_TTL_MS = 3_600_000

MAX_BATCH: int = load_schema("mcp/batch")["maxItems"]

# What the server offers, in initialize and server/discover alike: tools, the card as a resource, and the MCP
# Apps extension (docs/MCP.md#the-profile-card). Neither list changes while the server runs.
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": False},
    "resources": {"listChanged": False},
    "extensions": {apps.EXTENSION_ID: apps.SERVER_SETTINGS},
}

Answer = dict[str, Any]


def result(id_: str | int, value: dict[str, Any]) -> Answer:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def tool_success(data: dict[str, Any]) -> dict[str, Any]:
    """The REST data object (docs/MCP.md#tools): as text for the model, and as structuredContent for programs."""
    return {"content": [{"type": "text", "text": dumps_text(data)}], "structuredContent": data, "isError": False}


def tool_failure(failure: ApiError) -> dict[str, Any]:
    """A failure the model can read and correct, as the REST error object (docs/API.md#errors). No structuredContent:
    clients validate structuredContent against outputSchema, which describes successes."""
    return {"content": [{"type": "text", "text": dumps_text(failure.to_dict())}], "isError": True}


def _valid_id(value: Any) -> bool:
    # JSON Schema counts 1.0 as an integer; JSON-RPC ids must not be fractional, so floats are refused here.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# What a malformed member of an envelope is called out as: the rule it breaks, which a client can act on,
# rather than the schema's keyword (an id of 1.5 fails "type", one of 1.0 fails in _valid_id: one message).
_MEMBER_PROBLEMS = {
    "jsonrpc": 'a JSON-RPC 2.0 message needs "jsonrpc": "2.0"',
    "id": "the id must be a string or an integer (not null, a fraction, a boolean, an array or an object)",
    "method": "the method must be a non-empty string of at most 256 characters",
    "params": "params must be an object",
    "result": "a JSON-RPC response needs a well-formed result",
    "error": "a JSON-RPC response needs a well-formed error",
}


_REQUEST_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})


def _plainly_valid_request(message: dict[str, Any]) -> bool:
    """``schemas/mcp/request.json`` written out for the shape every client sends, so that a good request
    costs a few comparisons rather than a schema walk (a third of a cached tools/call). ``False`` means
    "ask the schema", never "invalid": the schema stays the one judge and the one explainer."""
    method, id_, params = message.get("method"), message.get("id"), message.get("params", {})
    return (
        message.get("jsonrpc") == "2.0"
        and message.keys() <= _REQUEST_MEMBERS
        and type(method) is str
        and 0 < len(method) <= 256
        and ((type(id_) is str and len(id_) <= 256) or type(id_) is int)
        and type(params) in (dict, list)
    )


class _Envelope:
    def __init__(self, kind: str, quick: QuickCheck | None = None) -> None:
        self.check = SchemaCheck(load_schema(f"mcp/{kind}"), what=f"a JSON-RPC {kind}", quick=quick)

    def problem(self, message: dict[str, Any]) -> str | None:
        failure = self.check.failure(message)
        if failure is None:
            return None
        return _MEMBER_PROBLEMS.get(failure.member or "", failure.message)


class McpProtocol:
    """Answers JSON-RPC messages with the tools of one :class:`~ipintel.service.Intel`, in either era.

    :meth:`answer` serves the handshake era (2024-11-05 … 2025-11-25): batches,
    ``initialize`` and ``ping``, results as those revisions shape them.
    :meth:`answer_modern` serves 2026-07-28: one message per POST, the checks of
    :mod:`ipintel.api.mcp.envelope` first, ``server/discover``, and results that
    carry ``resultType`` and the server's identity."""

    def __init__(self, intel: Intel, tools: ToolSet) -> None:
        self.intel = intel
        self.tools = tools
        self._request = _Envelope("request", _plainly_valid_request)
        self._notification = _Envelope("notification")
        self._response = _Envelope("response")
        self._legacy_methods: dict[str, _Handler] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resource_templates_list,
            "resources/read": self._resources_read,
        }
        self._modern_methods: dict[str, _Handler] = {
            "server/discover": self._discover,
            "tools/list": self._tools_list_cacheable,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list_cacheable,
            "resources/templates/list": self._resource_templates_list_cacheable,
            "resources/read": self._resources_read_cacheable,
        }
        # The tool list with the card linked (docs/MCP.md#the-profile-card): the listing of a client that declared
        # the extension, and of every handshake-era client, whose capabilities a stateless server never sees again
        # after initialize.
        self.app_listing = [
            {**tool, "_meta": apps.tool_meta()} if tool["name"] in apps.UI_TOOLS else tool for tool in tools.listing
        ]
        self.server_info = {"name": "ipintel", "title": "ipintel IP intelligence", "version": __version__}
        self.instructions = (
            "IP intelligence tools: "
            + "; ".join(f"{tool.name} ({tool.title})" for tool in tools.tools)
            + ". Every tool is read-only and answers with the same JSON as the ipintel REST API; unknown values "
            'are null. A failure is a result with isError true and {"error": {"code", "message"}}: fix the '
            "argument the message names and call again."
        )

    # The handshake era ---------------------------------------------------------------

    async def answer(self, payload: Any, context: CallContext) -> Answer | list[Answer] | None:
        """The answer to a parsed body: an object, an array (batch), or None (nothing to answer: 202)."""
        if isinstance(payload, list):
            if not payload:
                return rpc_error(None, INVALID_REQUEST, "an empty batch is not a valid JSON-RPC request")
            if len(payload) > MAX_BATCH:
                return rpc_error(
                    None,
                    INVALID_REQUEST,
                    f"a batch holds at most {MAX_BATCH} messages, this one has {len(payload)}: "
                    "split it into several requests",
                )
            answers = await asyncio.gather(*(self.answer_message(message, context) for message in payload))
            batch = [answer for answer in answers if answer is not None]
            return batch or None
        return await self.answer_message(payload, context)

    async def answer_message(self, message: Any, context: CallContext) -> Answer | None:
        """One handshake-era message's answer; never raises (a bug becomes -32603, logged with the request id)."""
        return await self._guarded(message, context, self._answer_legacy_message(message, context))

    async def _answer_legacy_message(self, message: Any, context: CallContext) -> Answer | None:
        kind, outcome = self._classify(message)
        if kind != "request":
            return outcome
        id_ = message["id"]
        return await self._dispatch(self._legacy_methods, id_, message["method"], message.get("params"), context)

    # 2026-07-28 ----------------------------------------------------------------------

    async def answer_modern(self, payload: Any, headers: RoutingHeaders, context: CallContext) -> Answer | None:
        """The answer to a 2026-07-28 body (one request or notification), or None (a notification: 202).

        Never raises; the transport picks the HTTP status from the error code."""
        if isinstance(payload, list):
            return rpc_error(
                None,
                INVALID_REQUEST,
                "a 2026-07-28 POST carries one JSON-RPC request or notification: batches were removed "
                "in that revision; send each request on its own POST",
            )
        return await self._guarded(payload, context, self._answer_modern_message(payload, headers, context))

    async def _answer_modern_message(
        self, message: Any, headers: RoutingHeaders, context: CallContext
    ) -> Answer | None:
        kind, outcome = self._classify(message)
        if kind == "response":
            return outcome or rpc_error(
                None,
                INVALID_REQUEST,
                "a 2026-07-28 client does not post JSON-RPC responses: this server sends no requests",
            )
        if kind == "notification":
            rejection = None if outcome else check_notification(message, headers)
            return outcome or (
                rpc_error(None, rejection.code, rejection.message, rejection.data) if rejection else None
            )
        if kind != "request":
            return outcome
        id_ = message["id"]
        rejection = check_request(message, headers)
        if rejection is not None:
            return rpc_error(id_, rejection.code, rejection.message, rejection.data)
        method = message["method"]
        if method in _REMOVED_METHODS:
            return rpc_error(
                id_,
                METHOD_NOT_FOUND,
                f"{method!r} was removed in MCP 2026-07-28 ({_REMOVED_METHODS[method]}); "
                f"this server offers {', '.join(self._modern_methods)} in that revision",
            )
        answer = await self._dispatch(self._modern_methods, id_, method, message.get("params"), context)
        if "result" in answer:
            answer["result"] = {
                **answer["result"],
                "resultType": "complete",
                "_meta": {SERVER_INFO_KEY: self.server_info},
            }
        return answer

    # Shared --------------------------------------------------------------------------

    async def _guarded(self, message: Any, context: CallContext, work: Awaitable[Answer | None]) -> Answer | None:
        try:
            return await work
        except RecursionError:
            return rpc_error(None, INVALID_REQUEST, "the message is nested too deeply")
        except Exception:
            log.exception("MCP message failed", extra={"request_id": context.request_id})
            id_ = message.get("id") if isinstance(message, dict) else None
            return rpc_error(
                id_ if _valid_id(id_) else None,
                INTERNAL_ERROR,
                "internal error; quote the request id when reporting it",
                {"requestId": context.request_id} if context.request_id else None,
            )

    def _classify(self, message: Any) -> tuple[str, Answer | None]:
        """What a message is, ``request``, ``notification`` or ``response``, with the -32600 answer when its
        envelope is malformed (else ``None``); ``("invalid", answer)`` for what is none of them."""
        if not isinstance(message, dict):
            return "invalid", rpc_error(
                None, INVALID_REQUEST, "a JSON-RPC message is an object (or a batch: an array of objects)"
            )
        if "method" in message:
            if "id" not in message:
                problem = self._notification.problem(message)
                # A notification is never answered, except that a malformed one is an Invalid Request (JSON-RPC 5.1).
                return "notification", rpc_error(None, INVALID_REQUEST, problem) if problem else None
            id_ = message["id"]
            problem = _MEMBER_PROBLEMS["id"] if not _valid_id(id_) else self._request.problem(message)
            if problem:
                return "invalid", rpc_error(id_ if _valid_id(id_) else None, INVALID_REQUEST, problem)
            return "request", None
        if "result" in message or "error" in message:
            # A client's answer to a server request: this server sends none, so there is nothing to do.
            problem = self._response.problem(message)
            return "response", rpc_error(None, INVALID_REQUEST, problem) if problem else None
        return "invalid", rpc_error(
            None, INVALID_REQUEST, "not a JSON-RPC 2.0 message: it has neither a method nor a result or error"
        )

    async def _dispatch(
        self, methods: dict[str, _Handler], id_: str | int, method: str, params: Any, context: CallContext
    ) -> Answer:
        handler = methods.get(method)
        if handler is None:
            return rpc_error(
                id_,
                METHOD_NOT_FOUND,
                f"method {method[:64]!r} is not offered; this server offers {', '.join(methods)}",
            )
        if params is not None and not isinstance(params, dict):
            return rpc_error(id_, INVALID_PARAMS, f"the params of {method} must be an object")
        outcome = await handler(params or {}, context)
        if isinstance(outcome, _ParamsError):
            return rpc_error(id_, outcome.code, outcome.message, outcome.data)
        return result(id_, outcome)

    # Methods -------------------------------------------------------------------

    async def _initialize(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else FALLBACK_VERSION
        return {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": self.server_info,
            "instructions": self.instructions,
        }

    async def _discover(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """``server/discover`` (2026-07-28): every version we speak, so that a client of either era can choose.

        Cacheable like the tool list: the answer is the same for every caller."""
        return {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": CAPABILITIES,
            "instructions": self.instructions,
            "ttlMs": TOOLS_TTL_MS,
            "cacheScope": "public",
        }

    async def _ping(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {}

    async def _tools_list(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {"tools": self.app_listing}  # one page: a cursor, if sent, changes nothing

    async def _tools_list_cacheable(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """2026-07-28: the card is linked only for a client whose request declares the extension (the extension's
        rule: check the client's capabilities); any other client gets the list exactly as before it existed. The
        answer depends on the request alone, never on who sends it, so it stays ``public``."""
        meta = params.get("_meta")
        capabilities = meta.get(CLIENT_CAPABILITIES_KEY) if isinstance(meta, dict) else None
        listing = self.app_listing if apps.client_supports_apps(capabilities) else self.tools.listing
        return {"tools": listing, "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}

    async def _resources_list(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {"resources": [apps.LISTING]}

    async def _resources_list_cacheable(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {"resources": [apps.LISTING], "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}

    async def _resource_templates_list(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {"resourceTemplates": []}

    async def _resource_templates_list_cacheable(self, params: dict[str, Any], context: CallContext) -> dict[str, Any]:
        return {"resourceTemplates": [], "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}

    async def _resources_read(self, params: dict[str, Any], context: CallContext) -> dict[str, Any] | _ParamsError:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            return _ParamsError(f"resources/read needs params.uri, e.g. {apps.PROFILE_URI!r} from resources/list")
        contents = apps.RESOURCES.get(uri)
        if contents is None:
            return _ParamsError(
                f"no resource {uri[:100]!r}; this server's resources are: {', '.join(apps.RESOURCES)}",
                RESOURCE_NOT_FOUND,
                {"uri": uri[:256]},
            )
        return {"contents": [contents]}

    async def _resources_read_cacheable(
        self, params: dict[str, Any], context: CallContext
    ) -> dict[str, Any] | _ParamsError:
        outcome = await self._resources_read(params, context)
        if isinstance(outcome, _ParamsError):
            return outcome
        return {**outcome, "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}

    async def _tools_call(self, params: dict[str, Any], context: CallContext) -> dict[str, Any] | _ParamsError:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            return _ParamsError("tools/call needs params.name, the name of a tool from tools/list")
        tool = self.tools.by_name.get(name)
        if tool is None:
            return _ParamsError(f"unknown tool {name[:64]!r}; the tools are: {', '.join(self.tools.by_name)}")
        arguments = params.get("arguments")
        if arguments is None:  # absent, or null as some clients send for "no arguments"
            arguments = {}
        if not isinstance(arguments, dict):
            return _ParamsError(f"the arguments of {name} must be an object, e.g. {{}}")
        try:
            data = await self.tools.call(self.intel, tool, arguments, context)
        except ApiError as failure:
            return tool_failure(failure)
        return tool_success(data)


# Methods of the handshake era that 2026-07-28 removed, and what replaces each.
_REMOVED_METHODS = {
    "initialize": "a request names its version in params._meta; server/discover lists the versions",
    "ping": "a request is its own liveness check",
    "logging/setLevel": "the level travels in each request's _meta",
}


class _ParamsError:
    """A -32602 (or other JSON-RPC error) outcome of a method, kept apart from results without raising."""

    __slots__ = ("code", "data", "message")

    def __init__(self, message: str, code: int = INVALID_PARAMS, data: dict[str, Any] | None = None) -> None:
        self.message = message
        self.code = code
        self.data = data


_Handler = Callable[[dict[str, Any], CallContext], Awaitable[dict[str, Any] | _ParamsError]]
