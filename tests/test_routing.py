"""SegmentRouter (ipintel/web/routing.py) picks exactly the route Starlette's Router picks.

Two Starlette apps with the same routes, one on each router, answer the same
requests; every endpoint names its route, so any difference in matching,
order, 404 or 405 shows as a different answer."""

from __future__ import annotations

import asyncio
import functools

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Mount, Route, Router

from ipintel.app import create_app
from ipintel.settings import Settings
from ipintel.web.routing import SegmentRouter
from tests.support.app import running_app


def _named(template: str, methods: list[str] | None = None) -> Route:
    async def endpoint(request: Request) -> JSONResponse:
        return JSONResponse({"route": template, "params": request.path_params})

    return Route(template, endpoint, methods=methods)


def _routes() -> list[BaseRoute]:
    """The service's own route templates, in its order, plus the shapes the index
    must leave to every request: a parameter first, a mount, overlapping templates."""

    async def mounted(scope, receive, send) -> None:
        await PlainTextResponse(f"mount {scope['path']}")(scope, receive, send)

    templates = [r.path for r in create_app().router.routes if isinstance(r, Route)]
    return [
        *(_named(t, ["GET"]) for t in templates),
        _named("/mcp", ["POST"]),  # same path, other method: the first partial match wins (405)
        _named("/{anything}/tail", ["GET"]),
        _named("/ip/special", ["GET"]),  # after /ip/{ip}: reached here (a literal path wins), not in Starlette
        Mount("/static", app=mounted),
        _named("/late/{x}", ["GET"]),
    ]


@functools.cache
def _apps() -> tuple[Starlette, Starlette]:
    plain = Starlette()
    plain.router = Router(_routes(), redirect_slashes=False)
    indexed = Starlette()
    indexed.router = SegmentRouter(_routes(), redirect_slashes=False)
    return plain, indexed


async def _answer(app: Starlette, method: str, path: str, root_path: str = "") -> tuple[int, str]:
    """Called as a server would (any path, ``//`` included, which HTTP clients refuse to send)."""
    messages: list[dict[str, object]] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path,
        "raw_path": (root_path + path).encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", b"t")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        messages.append(message)

    await app(scope, receive, send)  # type: ignore[arg-type]
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")  # type: ignore[misc]
    return status, body.decode()  # type: ignore[return-value]


SEGMENTS = ["ip", "8.8.8.8", "vpn", "whois", "dns", "reverse", "cidr", "mcp", "static", "tail", "x", "", "docs", "late"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=4),
    st.sampled_from(["GET", "POST", "DELETE"]),
)
def test_same_route_as_starlette_for_any_path(segments: list[str], method: str) -> None:
    path = "/" + "/".join(segments)

    plain, indexed = _apps()

    async def both() -> tuple[tuple[int, str], tuple[int, str]]:
        return await _answer(plain, method, path), await _answer(indexed, method, path)

    expected, actual = asyncio.run(both())
    assert actual == expected, path


async def test_known_cases() -> None:
    cases = {
        ("GET", "/ip/8.8.8.8"): (200, "/ip/{ip}"),
        ("GET", "/ip/8.8.8.8/vpn"): (200, "/ip/{ip}/vpn"),
        ("GET", "/cidr"): (200, "/cidr"),
        ("POST", "/cidr"): (405, None),
        ("POST", "/mcp"): (200, "/mcp"),
        ("GET", "/cidr/tail"): (200, "/{anything}/tail"),
        ("GET", "/static/a/b"): (200, None),
        ("GET", "/nowhere"): (404, None),
    }
    plain, indexed = _apps()
    for (method, path), (status, route) in cases.items():
        expected = await _answer(plain, method, path)
        actual = await _answer(indexed, method, path)
        assert actual == expected and actual[0] == status, (method, path)
        if route is not None:
            assert f'"route":"{route}"' in actual[1]


async def test_a_literal_path_is_its_routes_for_every_method() -> None:
    """Starlette matches GET /ip/special as /ip/{ip} (the first full match), and a method /ip/special does
    not take as a 405 with /ip/{ip}'s Allow. A path a literal route spells is that route's here: issue 23's
    GET /ip/batch (400 invalid_ip as the address "batch") and OPTIONS /ip/batch (405 Allow: HEAD, GET)."""
    plain, indexed = _apps()
    assert await _answer(plain, "GET", "/ip/special") == (200, '{"route":"/ip/{ip}","params":{"ip":"special"}}')
    assert await _answer(indexed, "GET", "/ip/special") == (200, '{"route":"/ip/special","params":{}}')
    assert (await _answer(indexed, "GET", "/ip/other"))[1] == '{"route":"/ip/{ip}","params":{"ip":"other"}}'


async def test_a_trailing_newline_is_routed_like_a_trailing_space() -> None:
    """Starlette's patterns end in ``$``, which also matches before a final newline:
    its router serves ``/cidr\n`` as ``/cidr``. Ours ends them at the end of the path."""
    _, indexed = _apps()
    for path in ("/cidr", "/ip/8.8.8.8/vpn", "/dns/8.8.8.8/reverse", "/mcp", "/late/x/y"):
        space = await _answer(indexed, "GET", path + " ")
        newline = await _answer(indexed, "GET", path + "\n")
        assert newline[0] == space[0] == 404, (path, newline, space)
    # A parameter takes the newline as it takes the space (the handler then refuses it).
    space, newline = [await _answer(indexed, "GET", "/ip/8.8.8.8" + end) for end in (" ", "\n")]
    assert space == (200, '{"route":"/ip/{ip}","params":{"ip":"8.8.8.8 "}}')
    assert newline == (200, '{"route":"/ip/{ip}","params":{"ip":"8.8.8.8\\n"}}')
    # A mount's {path:path} is ".*", which takes no newline: once served as "/static/a", now a 404.
    assert (await _answer(indexed, "GET", "/static/a\n"))[0] == 404
    # Under a root_path, where Starlette's own matching runs, the routes are just as strict.
    assert (await _answer(indexed, "GET", "/cidr\n", root_path="/api"))[0] == 404


async def test_a_route_added_after_the_first_request_is_found() -> None:
    router = SegmentRouter([_named("/a", ["GET"])], redirect_slashes=False)
    app = Starlette()
    app.router = router
    assert (await _answer(app, "GET", "/a"))[0] == 200
    assert (await _answer(app, "GET", "/b"))[0] == 404
    router.routes.append(_named("/b", ["GET"]))
    assert (await _answer(app, "GET", "/b")) == (200, '{"route":"/b","params":{}}')


async def test_requests_under_a_root_path_take_starlettes_own_path() -> None:
    app = Starlette()
    app.router = SegmentRouter([_named("/a", ["GET"])], redirect_slashes=False)
    assert await _answer(app, "GET", "/a", root_path="/prefix") == (200, '{"route":"/a","params":{}}')


async def test_get_and_options_of_the_batch_route_are_405_with_allow_post(settings: Settings) -> None:
    """Issue 23, point 13: OPTIONS /ip/batch was 405 with Allow: HEAD, GET (matched as /ip/{ip}) and GET
    /ip/batch 400 invalid_ip (the address "batch"); schemathesis' Allow-header check failed on it."""
    async with running_app(settings) as client:
        for method in ("GET", "OPTIONS", "HEAD", "PUT", "DELETE"):
            response = await client.request(method, "/ip/batch")
            assert response.status_code == 405, (method, response.text)
            assert response.headers["allow"] == "POST", method
            if method != "HEAD":
                assert response.json()["error"]["code"] == "method_not_allowed"
        assert (await client.get("/ip/8.8.8.8")).status_code == 200  # a parametric path is unchanged
