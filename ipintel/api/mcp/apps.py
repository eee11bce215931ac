"""The MCP Apps extension (``io.modelcontextprotocol/ui``): the profile card ``ui://ipintel/profile``
(docs/MCP.md#the-profile-card) — what the resource is, which tools point at it, and whether a client declared
the extension. The card is one HTML document built at import from the page's files and the view's, everything
inlined so that its content security policy names no other origin.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ipintel.api.page import STATIC as PAGE_STATIC

EXTENSION_ID = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
PROFILE_URI = "ui://ipintel/profile"
# The deprecated flat key the extension's own SDK still writes next to ``ui.resourceUri`` (registerAppTool),
# for hosts that read only that one.
LEGACY_RESOURCE_URI_KEY = "ui/resourceUri"
# Our validator of the document (its SHA-256, quoted like an HTTP ETag): a host that cached the resource compares
# it with the one resources/list gives to know whether to read it again.
ETAG_KEY = "ipintel/etag"

# The tools whose results the card renders: one address's profile or a part of it. lookup_ips is not linked:
# the card is one address with one map marker, and a batch of up to 100 is better read as the model's summary
# (docs/MCP.md#the-profile-card).
UI_TOOLS = ("lookup_ip", "detect_vpn", "profile_ip")

VIEW = Path(__file__).resolve().parent / "view"

# What the card loads from elsewhere: nothing. Every list empty, so a host's policy allows no other origin for
# fetches, images, scripts, styles, fonts, frames or <base>.
CSP: dict[str, list[str]] = {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
UI_META: dict[str, Any] = {"csp": CSP, "prefersBorder": True}


def _inline_script(text: str) -> str:
    # "</script" inside the text would end the element early; none of our files has it, and it must stay so.
    if "</script" in text.lower() or "<!--" in text:
        raise ValueError("an inlined script must not contain '</script' or '<!--'")
    return text


def build_document() -> str:
    """The card: view.html with the shared styles and scripts inlined and the map as a ``data:`` URL."""
    template = (VIEW / "view.html").read_text(encoding="utf-8")
    styles = (PAGE_STATIC / "page.css").read_text(encoding="utf-8") + (VIEW / "view.css").read_text(encoding="utf-8")
    scripts = (PAGE_STATIC / "render.js").read_text(encoding="utf-8") + (VIEW / "view.js").read_text(encoding="utf-8")
    world = base64.b64encode((PAGE_STATIC / "world.svg").read_bytes()).decode("ascii")
    if "</style" in styles.lower():
        raise ValueError("inlined styles must not contain '</style'")
    return (
        template.replace("/*STYLES*/", styles)
        .replace("/*SCRIPTS*/", _inline_script(scripts))
        .replace("MAP_DATA_URL", f"data:image/svg+xml;base64,{world}")
    )


DOCUMENT = build_document()
DOCUMENT_BYTES = len(DOCUMENT.encode("utf-8"))
ETAG = '"' + hashlib.sha256(DOCUMENT.encode("utf-8")).hexdigest()[:32] + '"'

LISTING: dict[str, Any] = {
    "uri": PROFILE_URI,
    "name": "profile",
    "title": "IP address profile card",
    "description": (
        "A card that shows the result of profile_ip, lookup_ip or detect_vpn: location on a world map, network, "
        "the anonymiser verdict with its reasons, the registry record with its abuse contact, the blacklist "
        "sources and host names. Self-contained: it loads nothing from any host."
    ),
    "mimeType": MIME_TYPE,
    "size": DOCUMENT_BYTES,
    "annotations": {"audience": ["user"]},
    "_meta": {"ui": UI_META, ETAG_KEY: ETAG},
}

CONTENTS: dict[str, Any] = {
    "uri": PROFILE_URI,
    "mimeType": MIME_TYPE,
    "text": DOCUMENT,
    "_meta": {"ui": UI_META, ETAG_KEY: ETAG},
}

RESOURCES: dict[str, dict[str, Any]] = {PROFILE_URI: CONTENTS}

# What the server declares under ``capabilities.extensions`` (server/discover and initialize).
SERVER_SETTINGS: dict[str, Any] = {"mimeTypes": [MIME_TYPE]}


def tool_meta() -> dict[str, Any]:
    """The ``_meta`` of a linked tool: the resource, visible to the model and callable from the card."""
    return {"ui": {"resourceUri": PROFILE_URI, "visibility": ["model", "app"]}, LEGACY_RESOURCE_URI_KEY: PROFILE_URI}


def client_supports_apps(capabilities: Any) -> bool:
    """Whether client capabilities declare the extension with the card's MIME type, as the extension defines it
    (``capabilities.extensions["io.modelcontextprotocol/ui"].mimeTypes`` holds ``text/html;profile=mcp-app``)."""
    if not isinstance(capabilities, Mapping):
        return False
    extensions = capabilities.get("extensions")
    settings = extensions.get(EXTENSION_ID) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, list) and MIME_TYPE in mime_types
