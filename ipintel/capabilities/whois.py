"""Registry records over RDAP (RFC 9082/9083): ``GET /whois/:ip`` (docs/API.md#registry-rdap) and the
registry part of ``GET /asn/:asn`` (docs/API.md#as-record).

:func:`lookup` and :func:`lookup_autnum` find the registry in IANA's bootstrap, fetch its object (following
redirects) and map it to our record; :func:`parse_network` and :func:`parse_autnum` are the pure part, with each
RIR's differences commented at the rule that reads them.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from yarl import URL

from ipintel.addresses import IPAddress, canonical
from ipintel.errors import ApiError, UpstreamError
from ipintel.infra.rdap_bootstrap import RdapBootstrap
from ipintel.infra.registry_gate import RegistryGate
from ipintel.infra.upstream import REDIRECT_STATUSES, HttpClient, HttpResponse, RedirectRefused

MAX_REDIRECTS = 5
MAX_RDAP_BYTES = 2 * 1024 * 1024
# RFC 9083 13: RDAP's media type; registries also send plain JSON.
_JSON_TYPES = frozenset({"application/rdap+json", "application/json"})
_ACCEPT = {"Accept": "application/rdap+json, application/json;q=0.9"}

# The five RIRs, recognised by the domain of the RDAP host or of the port43
# (whois) server: rdap.arin.net / whois.arin.net, rdap.db.ripe.net /
# whois.ripe.net, rdap.apnic.net, rdap.lacnic.net, rdap.afrinic.net ...
RIR_DOMAINS: dict[str, str] = {
    "arin.net": "ARIN",
    "ripe.net": "RIPE NCC",
    "apnic.net": "APNIC",
    "lacnic.net": "LACNIC",
    "afrinic.net": "AFRINIC",
}


@dataclass(frozen=True)
class RdapAnswer:
    """The final ``ip network`` object and every URL asked on the way to it."""

    document: dict[str, Any]
    urls: tuple[str, ...]  # first: the bootstrap's server; last: the one that answered


async def lookup(
    address: IPAddress, *, http: HttpClient, bootstrap: RdapBootstrap, registries: RegistryGate | None = None
) -> dict[str, Any]:
    """The registry record of a public ``address`` (already parsed and checked).

    Within a batch, ``registries`` bounds the lookups under way per registry
    and keeps the batch away from a registry that answered 429."""
    base = await bootstrap.base_url_for(address)
    if base is None:
        raise ApiError("registration_not_found", f"no registry is responsible for {address} (IANA RDAP bootstrap)")
    url = f"{base}ip/{address}"
    if registries is None:
        answer = await fetch_network(url, http=http)
    else:
        try:
            async with registries.slot(_host(url)):
                answer = await fetch_network(url, http=http, before_request=lambda hop: registries.check(_host(hop)))
        except RegistryRateLimiting as refusal:
            registries.refused(refusal.host)
            raise
    return parse_network(address, answer.document, registry=registry_of(answer))


async def lookup_autnum(number: int, *, http: HttpClient, bootstrap: RdapBootstrap) -> dict[str, Any]:
    """The registry record of AS ``number`` (docs/API.md#as-record), without ``prefixes`` (not the
    registry's to say: ``Intel`` adds them from the ASN database)."""
    base = await bootstrap.base_url_for_asn(number)
    if base is None:
        raise ApiError("registration_not_found", f"no registry is responsible for AS{number} (IANA RDAP bootstrap)")
    answer = await fetch_object(f"{base}autnum/{number}", "autnum", http=http)
    return parse_autnum(number, answer.document, registry=registry_of(answer))


class RegistryRateLimiting(UpstreamError):
    """An RDAP server answered 429 (502 ``upstream_error``)."""

    def __init__(self, host: str) -> None:
        super().__init__(f"the RDAP server {host} is rate limiting us (HTTP 429)")
        self.host = host


async def fetch_network(
    url: str, *, http: HttpClient, before_request: Callable[[str], None] | None = None
) -> RdapAnswer:
    """GET an RDAP ``ip network`` object (:func:`fetch_object`)."""
    return await fetch_object(url, "ip network", http=http, before_request=before_request)


async def fetch_object(
    url: str, object_class: str, *, http: HttpClient, before_request: Callable[[str], None] | None = None
) -> RdapAnswer:
    """GET an RDAP object of ``object_class``, following up to :data:`MAX_REDIRECTS` redirects.

    The HTTP client's redirect policy checks each hop before it is followed
    (relative ``Location`` resolved, http/https only, never HTTPS to HTTP);
    RDAP also refuses a URL met twice, a loop. Each request has the client's
    own timeout; at most ``MAX_REDIRECTS + 1`` requests are made."""
    try:
        url = str(URL(url))  # the form redirect targets are compared in
    except ValueError:
        raise UpstreamError(f"the RDAP bootstrap gave an invalid server URL {url!r}") from None
    try:
        followed = await http.get_following_redirects(
            url,
            max_redirects=MAX_REDIRECTS,
            refuse_loops=True,
            what=lambda hop: f"the RDAP server {_host(hop)}",
            headers=_ACCEPT,
            max_bytes=MAX_RDAP_BYTES,
            source="rdap",
            before_request=before_request,
        )
    except RedirectRefused as refused:
        raise _refusal(refused, first=url) from None
    return RdapAnswer(_document(followed.response, followed.urls[-1], object_class), followed.urls)


def _refusal(refused: RedirectRefused, *, first: str) -> UpstreamError:
    """A refused redirect in RDAP's words (docs/API.md#registry-rdap)."""
    server = f"the RDAP server {_host(refused.current)}"
    target = refused.target.host if refused.target is not None else None
    match refused.problem:
        case "invalid":
            return UpstreamError(f"{server} redirected to an invalid URL")
        case "non-http":
            return UpstreamError(f"{server} redirected to a non-HTTP URL")
        case "downgrade":
            return UpstreamError(f"{server} redirected from HTTPS to HTTP ({target}); refused")
        case "loop":
            return UpstreamError(f"the RDAP servers redirect in a loop ({_host(refused.current)} -> {target})")
        case "too-many":
            return UpstreamError(f"the RDAP servers redirected more than {MAX_REDIRECTS} times for {first}")


# What a registry's 404 means, per object class.
_NOT_REGISTERED = {"ip network": "this address", "autnum": "this AS number"}


def _document(response: HttpResponse, url: str, object_class: str) -> dict[str, Any]:
    """Map an RDAP server's final answer to the document or to an error (docs/API.md#errors)."""
    server = f"the RDAP server {_host(url)}"
    if response.status in REDIRECT_STATUSES:  # the redirect policy follows only those with a Location
        raise UpstreamError(f"{server} redirected (HTTP {response.status}) without a Location")
    if response.status == 404:
        what = _NOT_REGISTERED.get(object_class, "this object")
        raise ApiError("registration_not_found", f"{server} has no registration for {what}")
    if response.status == 429:  # RIPE's is an HTML page, not an RDAP error object
        raise RegistryRateLimiting(_host(url))
    if response.status != 200:
        raise UpstreamError(f"{server} answered HTTP {response.status}")
    content_type = response.content_type
    if content_type and content_type not in _JSON_TYPES and not content_type.endswith("+json"):
        raise UpstreamError(f"{server} answered {content_type}, not JSON")
    try:
        document = json.loads(response.body)
    except (ValueError, RecursionError):
        raise UpstreamError(f"{server} answered invalid JSON") from None
    if not isinstance(document, dict) or document.get("objectClassName") != object_class:
        raise UpstreamError(f"{server} did not answer with an RDAP {object_class} object")
    return document


def _host(url: str) -> str:
    try:
        return URL(url).host or url
    except ValueError:
        return url


# Registry ---------------------------------------------------------------------


def rir_of_host(host: object) -> str | None:
    """The RIR owning a host name (``rdap.db.ripe.net`` -> ``RIPE NCC``), else ``None``."""
    if not isinstance(host, str):
        return None
    name = host.strip().lower().rstrip(".")
    for domain, rir in RIR_DOMAINS.items():
        if name == domain or name.endswith("." + domain):
            return rir
    return None


def registry_of(answer: RdapAnswer) -> str | None:
    """The RIR that answered last (docs/API.md#registry-rdap): the final server's, else its ``port43`` whois
    server's, else the last RIR host on the redirect chain; ``None`` when none is an RIR's."""
    final = rir_of_host(_host(answer.urls[-1]))
    if final is not None:
        return final
    # A mirror or proxy of an RIR still names the RIR's whois host.
    by_port43 = rir_of_host(answer.document.get("port43"))
    if by_port43 is not None:
        return by_port43
    # A national registry under an RIR: LACNIC sends Brazilian space to NIC.br (rdap.registro.br, port43
    # whois.nic.br), so LACNIC is the RIR that answered last.
    for url in reversed(answer.urls[:-1]):
        rir = rir_of_host(_host(url))
        if rir is not None:
            return rir
    return None


# Parsing ------------------------------------------------------------------------


def parse_network(address: IPAddress, document: dict[str, Any], *, registry: str | None) -> dict[str, Any]:
    """Our record (docs/API.md#registry-rdap) from an RDAP ``ip network`` object; unknown fields are ``None``."""
    return {
        "ip": str(address),
        "name": _text(document.get("name")),  # LACNIC sends none
        "handle": _text(document.get("handle")),
        "startAddress": _address(document.get("startAddress")),
        "endAddress": _address(document.get("endAddress")),
        # As the registry gives it. ARIN has no country on networks (only in the
        # registrant's postal address): null, never guessed.
        "country": _country(document.get("country")),
        "registrant": select_registrant(document),
        "registry": registry,
        "events": parse_events(document.get("events")),
        "abuse": select_abuse(document),
    }


def parse_autnum(number: int, document: dict[str, Any], *, registry: str | None) -> dict[str, Any]:
    """Our AS record (docs/API.md#as-record) from an RDAP ``autnum`` object, without ``prefixes``.

    ``asn`` is the number asked about, written as the GeoIP record writes it: a
    registry may answer with the block holding it (``startAutnum`` ..
    ``endAutnum``; ``handle`` then names the block). ``name`` is the record's
    own (ARIN ``GOOGLE``, RIPE's ``as-name``); ``org`` the registrant
    organisation by the rules of :func:`select_registrant` (RIPE maintainers
    skipped). ARIN and RIPE give no ``country`` on AS records: ``null``."""
    return {
        "asn": f"AS{number}",
        "name": _text(document.get("name")),
        "org": select_registrant(document),
        "country": _country(document.get("country")),
        "registry": registry,
        "handle": _text(document.get("handle")),
        "events": parse_events(document.get("events")),
        "abuse": select_abuse(document),
    }


def select_registrant(document: dict[str, Any]) -> str | None:
    """The registrant organisation's name (docs/API.md#registry-rdap): the best-ranked top-level entity with the
    role ``registrant``, else the first line of the remark titled ``description``; ``None`` when neither."""
    # Only the network's own (top-level) entities count: nested entities are contacts of those entities, not of
    # the network (since 2024 ARIN nests its POCs under the registrant; they are ignored). RIPE NCC also gives
    # its maintainers the registrant role: handles ending in -MNT are skipped. AFRINIC often has no registrant.
    candidates = [
        entity
        for entity in _list(document.get("entities"))
        if isinstance(entity, dict) and _has_role(entity, "registrant") and not _is_maintainer(entity)
    ]
    best: tuple[int, str] | None = None
    for entity in candidates:
        vcard = VCard.of(entity)
        # Read by property name, never by position: RIRs order them differently.
        name = vcard.text("fn") or vcard.text("org")
        if name is None:
            continue
        rank = _KIND_PREFERENCE.get((vcard.text("kind") or "").lower(), len(_KIND_PREFERENCE))
        if best is None or rank < best[0]:
            best = (rank, name)
    if best is not None:
        return best[1]
    # Older APNIC and RIPE records have no registrant entity with a name, only the network's descr lines,
    # published as remarks titled "description": their first line is the organisation.
    return _description_remark(document)


# Registrant vCard kinds, most wanted first; any other kind (or none) comes after. ARIN, RIPE NCC and APNIC
# (since 2023) give the registrant kind org; LACNIC's (and NIC.br's) is often individual while its fn is a
# company name, so it is accepted after any org.
_KIND_PREFERENCE = {"org": 0, "individual": 1}


def _has_role(entity: dict[str, Any], role: str) -> bool:
    return any(isinstance(r, str) and r.strip().lower() == role for r in _list(entity.get("roles")))


def _is_maintainer(entity: dict[str, Any]) -> bool:
    handle = entity.get("handle")
    return isinstance(handle, str) and handle.strip().upper().endswith("-MNT")


def _description_remark(document: dict[str, Any]) -> str | None:
    for remark in _list(document.get("remarks")):
        if not isinstance(remark, dict):
            continue
        title = remark.get("title")
        if isinstance(title, str) and title.strip().lower() == "description":
            for line in _list(remark.get("description")):
                if (text := _text(line)) is not None:
                    return text
    return None


# Bounds on walking a registry's entity tree: the document is at most 2 MiB, but a hostile one could nest
# thousands of entities; an abuse contact is always within a few levels.
_MAX_ENTITY_DEPTH = 8
_MAX_ENTITIES = 2000


def select_abuse(document: dict[str, Any]) -> dict[str, str | None] | None:
    """The abuse contact ``{email, phone, name}``: the first entity with the role ``abuse``, breadth first, that
    gives an email or a telephone number, else the first that gives a name; ``None`` when the registry names
    none (the rules per registry: docs/API.md#registry-rdap)."""
    named_only: dict[str, str | None] | None = None
    for entity in _entities_breadth_first(document):
        if not _has_role(entity, "abuse"):
            continue
        vcard = VCard.of(entity)
        contact = {
            "email": _abuse_email(vcard),
            "phone": _phone(vcard),
            "name": vcard.text("fn") or vcard.text("org"),
        }
        if contact["email"] is not None or contact["phone"] is not None:
            return contact
        if named_only is None and contact["name"] is not None:
            named_only = contact
    return named_only


def _entities_breadth_first(document: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    level = [e for e in _list(document.get("entities")) if isinstance(e, dict)]
    depth = 0
    while level and depth < _MAX_ENTITY_DEPTH and len(found) < _MAX_ENTITIES:
        found.extend(level[: _MAX_ENTITIES - len(found)])
        level = [child for e in level for child in _list(e.get("entities")) if isinstance(child, dict)]
        depth += 1
    return found


def _abuse_email(vcard: VCard) -> str | None:
    emails = vcard.all("email")
    for value, params in emails:
        if "abuse" in _param_values(params, "type"):
            return _email(value)
    for value, _ in emails:
        if (email := _email(value)) is not None:
            return email
    return None


def _email(value: str) -> str | None:
    # A jCard email is text; a mailto: URI is read as the address it names.
    text = value[7:] if value[:7].lower() == "mailto:" else value
    return _text(text)


def _phone(vcard: VCard) -> str | None:
    for value, params in vcard.all("tel"):
        types = _param_values(params, "type")
        if types and types <= {"fax"}:
            continue
        # ARIN and APNIC write text ("+1-650-253-0000"); some registries a tel: URI (RFC 3966).
        text = value[4:] if value[:4].lower() == "tel:" else value
        if (phone := _text(text)) is not None:
            return phone
    return None


def _param_values(params: dict[str, Any], name: str) -> set[str]:
    """A jCard parameter's values, lower-case: ``"type": "abuse"`` or ``"type": ["work", "voice"]``."""
    value = params.get(name)
    values = value if isinstance(value, list) else [value]
    return {v.strip().lower() for v in values if isinstance(v, str)}


class VCard:
    """Read access to an entity's jCard (RFC 7095) by property name.

    ``vcardArray`` is ``["vcard", [[name, params, type, value], ...]]``;
    properties come in any order and may repeat (the first usable one wins).
    A structured value (``org`` with units) gives its first non-empty part."""

    def __init__(self, properties: list[Any]) -> None:
        self._properties = properties

    @classmethod
    def of(cls, entity: dict[str, Any]) -> VCard:
        array = entity.get("vcardArray")
        if isinstance(array, list) and len(array) >= 2 and array[0] == "vcard" and isinstance(array[1], list):
            return cls(array[1])
        return cls([])

    def text(self, name: str) -> str | None:
        for prop in self._properties:
            if not isinstance(prop, list) or len(prop) < 4 or not isinstance(prop[0], str):
                continue
            if prop[0].lower() != name:
                continue
            value = prop[3]
            if isinstance(value, list):
                value = next((v for v in value if _text(v) is not None), None)
            if (text := _text(value)) is not None:
                return text
        return None

    def all(self, name: str) -> list[tuple[str, dict[str, Any]]]:
        """Every text value of the property ``name`` with its parameters, in the registry's order."""
        found = []
        for prop in self._properties:
            if not isinstance(prop, list) or len(prop) < 4 or not isinstance(prop[0], str):
                continue
            if prop[0].lower() == name and isinstance(prop[3], str):
                found.append((prop[3], prop[1] if isinstance(prop[1], dict) else {}))
        return found


def parse_events(events: object) -> list[dict[str, str]]:
    """``[{action, date}]``; events without an action or with an unreadable date are dropped."""
    parsed = []
    for event in _list(events):
        if not isinstance(event, dict):
            continue
        action = _text(event.get("eventAction"))
        date = normalise_date(event.get("eventDate"))
        if action is not None and date is not None:
            parsed.append({"action": action, "date": date})
    return parsed


def normalise_date(value: object) -> str | None:
    """ISO 8601 with an explicit offset (docs/API.md#registry-rdap).

    The registry's own offset is kept (ARIN answers in US Eastern time:
    ``2011-11-01T15:59:58-04:00`` stays so); ``Z`` becomes ``+00:00``; a
    date without an offset is taken as UTC. Offsets with seconds cannot be
    written in RFC 3339 and such dates are dropped with the unparseable ones."""
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    offset = moment.utcoffset()
    if offset is None or offset.total_seconds() % 60:
        return None
    return moment.isoformat()


def _text(value: object) -> str | None:
    if isinstance(value, str):
        stripped = value.strip()
        return stripped or None
    return None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _address(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        ip = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    return str(canonical(ip))


def _country(value: object) -> str | None:
    text = _text(value)
    if text is None or len(text) != 2 or not text.isascii() or not text.isalpha():
        return None
    return text.upper()
