"""Parsers for the published formats of the address feeds.

Each takes the bodies downloaded for one feed (two where IPv4 and IPv6 are published apart) and returns the
prefixes as text, with the region or service of each where the format names one (``us-east-1``); a body that is
not the format at all raises :class:`FeedFormatError`, and the caller keeps the last good copy.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ipintel.infra.ranges import PrefixError, parse_prefix


class FeedFormatError(ValueError):
    """A body that is not the feed's format."""


@dataclass(frozen=True)
class Parsed:
    prefixes: list[str]
    skipped: int  # entries that were present but not a prefix
    # Aligned with ``prefixes``: the region or service of each ("" when none), or
    # ``None`` for a format that names none. Bounded: see :func:`_collect_labelled`.
    labels: list[str] | None = None


Parser = Callable[[list[bytes]], Parsed]

# A text list where more than this share of the lines is not a prefix is
# not the list (an error page, a captive portal, a different file).
MAX_JUNK_SHARE = 0.1


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FeedFormatError("the body is not UTF-8 text") from None


def _json(body: bytes) -> Any:
    try:
        return json.loads(_text(body))
    except json.JSONDecodeError as exc:
        raise FeedFormatError(f"the body is not JSON ({exc.msg} at line {exc.lineno})") from None


def _documents(bodies: list[bytes], key: str, what: str) -> Iterator[dict[str, Any]]:
    """Each body as a JSON object holding a ``key`` list: a provider's ranges
    document. Anything else is not the feed (``what`` names the document)."""
    for body in bodies:
        doc = _json(body)
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            raise FeedFormatError(f"not {what} document (no {key!r} list)")
        yield doc


# Wider prefixes than these are junk in any of these lists (a 0.0.0.0/0 by
# mistake would mark the whole Internet as a datacenter).
MIN_PREFIX_LENGTH = {4: 8, 6: 16}


def _family_and_length(item: Any) -> tuple[int, int] | None:
    """The IP version and prefix length of ``item`` when it is a prefix or an address, else ``None``."""
    if not isinstance(item, str):
        return None
    try:
        version, _, _, length = parse_prefix(item)
    except PrefixError:
        return None
    return version, length


def _prefix(item: Any) -> str | None:
    """``item`` as a prefix of a sane size, or ``None`` when it is not one."""
    parsed = _family_and_length(item)
    return item.strip() if parsed and parsed[1] >= MIN_PREFIX_LENGTH[parsed[0]] else None


def _collect(candidates: Iterable[Any], accept: Callable[[Any], str | None] = _prefix) -> Parsed:
    """Keep the strings ``accept`` takes (by default prefixes of a sane size); count the rest."""
    # A bad entry is skipped and counted, so that one odd line does not discard a whole list; a list that is
    # mostly junk is refused by _check_junk.
    prefixes: list[str] = []
    skipped = 0
    for item in candidates:
        prefix = accept(item)
        if prefix is None:
            skipped += 1
        else:
            prefixes.append(prefix)
    return Parsed(prefixes, skipped)


# A label is a region or service name as the provider publishes it (``us-east-1``,
# ``westeurope``, ``CLOUDFRONT``): kept only in that shape, and only so many distinct
# ones per feed, so that a hostile or broken document cannot fill memory with names
# (a real one has a few dozen to a few hundred).
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}")
MAX_LABELS = 2000


def _collect_labelled(candidates: Iterable[tuple[Any, Any]]) -> Parsed:
    """Like :func:`_collect` for ``(prefix, label)`` pairs: each prefix once (the
    documents list one under several services), with the first usable label
    found for it; labels not of the expected shape, or past :data:`MAX_LABELS`
    distinct ones, are dropped (the prefix is kept)."""
    labels: dict[str, str] = {}
    known: dict[str, str] = {}  # distinct labels, interned
    skipped = 0
    for item, raw_label in candidates:
        prefix = _prefix(item)
        if prefix is None:
            skipped += 1
            continue
        label = ""
        if isinstance(raw_label, str) and LABEL.fullmatch(raw_label):
            label = known.get(raw_label, "")
            if not label and len(known) < MAX_LABELS:
                label = known[raw_label] = raw_label
        if prefix not in labels or (label and not labels[prefix]):
            labels[prefix] = label
    return Parsed(list(labels), skipped, list(labels.values()))


def _check_junk(parsed: Parsed, what: str) -> Parsed:
    total = len(parsed.prefixes) + parsed.skipped
    if total and parsed.skipped / total > MAX_JUNK_SHARE:
        raise FeedFormatError(f"{parsed.skipped} of {total} entries of the {what} are not addresses or prefixes")
    return parsed


def _lines(body: bytes) -> Iterator[str]:
    for line in _text(body).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            yield line


def text_list(bodies: list[bytes]) -> Parsed:
    """One address or prefix per line, ``#`` comments: the Tor bulk exit list,
    Cloudflare's ``ips-v4``/``ips-v6`` and X4BNet's ``ipv4.txt``/``ipv6.txt``."""
    if any(_text(b).lstrip().startswith("<") for b in bodies):
        raise FeedFormatError("the body is markup, not a list of addresses")
    return _check_junk(_collect(line for body in bodies for line in _lines(body)), "list")


_HOST_LENGTH = {4: 32, 6: 128}


def _host(item: Any) -> str | None:
    """``item`` as a single address (``1.2.3.4``, ``1.2.3.4/32``), or ``None``: a server list names servers."""
    parsed = _family_and_length(item)
    return item.strip() if parsed and parsed[1] == _HOST_LENGTH[parsed[0]] else None


def _gluetun_addresses(doc: Any) -> Iterator[Any]:
    """The ``ips`` of every server of one provider in gluetun's server data: a document
    ``{"version", "timestamp", "servers": [{"hostname", "ips": [...], ...}]}`` (a file of
    qdm12/gluetun-servers' ``pkg/servers/``, or one provider's value in the older single
    ``servers.json``). A server without addresses yields a ``None`` (counted as junk)."""
    servers = doc.get("servers") if isinstance(doc, dict) else None
    if not isinstance(servers, list):
        raise FeedFormatError("not a server list document (no 'servers' list)")
    for server in servers:
        ips = server.get("ips") if isinstance(server, dict) else None
        if isinstance(ips, list) and ips:
            yield from ips
        else:
            yield None


def vpn_server_list(bodies: list[bytes]) -> Parsed:
    """A VPN provider's published servers, one address per entry: a text list, one per line (the default,
    Joe12387/open-source-vpn-ip-lists), or gluetun's JSON server data (``{"servers": [{"ips": [...]}]}``), told
    apart by the body's first character. The servers come first, then the subnets they cluster in
    (:func:`server_subnets`)."""
    candidates: list[Any] = []
    for body in bodies:
        text = _text(body).lstrip()
        if text.startswith("<"):
            raise FeedFormatError("the body is markup, not a list of servers")
        if text.startswith("{"):
            candidates.extend(_gluetun_addresses(_json(body)))
        else:
            candidates.extend(_lines(body))
    # A prefix is not a server: it counts as junk, so a list that turned into ranges is refused rather than read
    # as exact evidence.
    collected = _collect(candidates, _host)
    hosts = list(dict.fromkeys(collected.prefixes))
    _check_junk(Parsed(hosts, collected.skipped), "server list")
    return Parsed(hosts + server_subnets(hosts), collected.skipped)


def vpn_servers_only(bodies: list[bytes]) -> Parsed:
    """:func:`vpn_server_list` without the subnets: for a fleet of cloud instances, whose
    neighbours in a /24 are other customers' machines."""
    parsed = vpn_server_list(bodies)
    return Parsed([p for p in parsed.prefixes if "/" not in p], parsed.skipped)


# A provider's servers come in subnets it rents whole (a /24 at a hosting company, a /64 in IPv6), and
# its fleet churns inside them: NordVPN and PIA renumber daily. A subnet holding at least this many
# of its published servers is the provider's network: evidence about the network, not the address.
SUBNET_LENGTH = {4: 24, 6: 64}
SUBNET_MIN_SERVERS = 2


def server_subnets(hosts: Iterable[str], min_servers: int = SUBNET_MIN_SERVERS) -> list[str]:
    """The /24 (IPv4) and /64 (IPv6) subnets holding at least ``min_servers`` of ``hosts``,
    in the order first seen. They are kept with the list (a snapshot line each) and matched
    as prefixes: ``net``, where the servers themselves are ``host``."""
    counts: dict[str, int] = {}
    for host in hosts:
        version, first, _, _ = parse_prefix(host)
        length = SUBNET_LENGTH[version]
        bits = 32 if version == 4 else 128
        network = ipaddress.ip_network((first >> (bits - length) << (bits - length), length))
        key = str(network)
        counts[key] = counts.get(key, 0) + 1
    return [subnet for subnet, count in counts.items() if count >= min_servers]


def _aws_label(entry: dict[str, Any]) -> Any:
    """The entry's region; for the ``GLOBAL`` ones (CloudFront, Route 53 ...) its service,
    unless that is only ``AMAZON``, the umbrella every prefix is also listed under."""
    region = entry.get("region")
    if region != "GLOBAL":
        return region
    service = entry.get("service")
    return service if service != "AMAZON" else None


def aws_ip_ranges(bodies: list[bytes]) -> Parsed:
    """AWS ``ip-ranges.json``: ``prefixes[].ip_prefix`` and ``ipv6_prefixes[].ipv6_prefix``,
    labelled with their ``region`` (the service for ``GLOBAL`` ones)."""
    candidates: list[tuple[Any, Any]] = []
    for doc in _documents(bodies, "prefixes", "an AWS ip-ranges"):
        v6 = doc.get("ipv6_prefixes")
        for entries, key in ((doc["prefixes"], "ip_prefix"), (v6 if isinstance(v6, list) else [], "ipv6_prefix")):
            candidates += [(p.get(key), _aws_label(p)) if isinstance(p, dict) else (None, None) for p in entries]
    return _check_junk(_collect_labelled(candidates), "AWS ranges")


def google_cloud(bodies: list[bytes]) -> Parsed:
    """Google Cloud ``cloud.json``: ``prefixes[]`` with ``ipv4Prefix`` or ``ipv6Prefix``,
    labelled with their ``scope`` (the region, ``europe-west1``; ``global`` names none)."""
    candidates: list[tuple[Any, Any]] = []
    for doc in _documents(bodies, "prefixes", "a Google cloud.json"):
        for entry in doc["prefixes"]:
            if isinstance(entry, dict):
                scope = entry.get("scope")
                label = scope if isinstance(scope, str) and scope.lower() != "global" else None
                candidates.append((entry.get("ipv4Prefix") or entry.get("ipv6Prefix"), label))
            else:
                candidates.append((None, None))
    return _check_junk(_collect_labelled(candidates), "Google Cloud ranges")


def azure_service_tags(bodies: list[bytes]) -> Parsed:
    """Azure ``ServiceTags_Public_*.json``: ``values[].properties.addressPrefixes``,
    labelled with the tag's ``properties.region`` (``westeurope``).

    Every service tag is read; the same prefix appears under several tags
    (``AzureCloud`` is the superset, with no region), and counts once, with the
    first region a tag gives it."""
    candidates: list[tuple[Any, Any]] = []
    seen: dict[str, bool] = {}  # prefix -> a region was found for it
    for doc in _documents(bodies, "values", "an Azure service tags"):
        for value in doc["values"]:
            props = value.get("properties") if isinstance(value, dict) else None
            prefixes = props.get("addressPrefixes") if isinstance(props, dict) else None
            if not isinstance(prefixes, list):
                continue
            region = props.get("region") if isinstance(props, dict) else None
            has_region = isinstance(region, str) and bool(region)
            for prefix in prefixes:
                if isinstance(prefix, str):
                    if seen.get(prefix) or (prefix in seen and not has_region):
                        continue  # already there with a region, or nothing new to add
                    seen[prefix] = has_region
                candidates.append((prefix, region))
    return _check_junk(_collect_labelled(candidates), "Azure service tags")


def oracle_cloud(bodies: list[bytes]) -> Parsed:
    """Oracle ``public_ip_ranges.json``: ``regions[].cidrs[].cidr``, labelled with ``regions[].region``."""
    candidates: list[tuple[Any, Any]] = []
    for doc in _documents(bodies, "regions", "an Oracle public_ip_ranges"):
        for region in doc["regions"]:
            cidrs = region.get("cidrs") if isinstance(region, dict) else None
            if isinstance(cidrs, list):
                name = region.get("region") if isinstance(region, dict) else None
                candidates += [(c.get("cidr"), name) if isinstance(c, dict) else (None, None) for c in cidrs]
    return _check_junk(_collect_labelled(candidates), "Oracle ranges")


def geofeed_csv(bodies: list[bytes]) -> Parsed:
    """An RFC 8805 geofeed (DigitalOcean's ``geo/google.csv``): the prefix is
    the first column of each row; ``#`` lines are comments."""
    candidates: list[Any] = []
    for body in bodies:
        text = _text(body)
        if text.lstrip().startswith("<"):
            raise FeedFormatError("the body is markup, not a geofeed CSV")
        for row in csv.reader(io.StringIO(text)):
            if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
                continue
            candidates.append(row[0])
    return _check_junk(_collect(candidates), "geofeed")


def icloud_relay_csv(bodies: list[bytes]) -> Parsed:
    """Apple's iCloud Private Relay egress ranges (``egress-ip-ranges.csv``): no header,
    one row per prefix, ``prefix,country,region,city,`` (``172.224.226.0/27,GB,GB-EN,London,``,
    ``2a02:26f7:b3c0:4000::/64,US,US-CA,Los Angeles,``), IPv4 and IPv6 in one file, every
    row ending in an empty field. Only the prefix is kept: the location is ``/ip``'s business.

    The file is large (about 287,000 rows) and served whole; a body cut short in the
    middle of its last row (fewer fields than the rows before it) is refused as
    truncated, rather than read as a shorter list."""
    candidates: list[str] = []
    for body in bodies:
        text = _text(body)
        if text.lstrip().startswith("<"):
            raise FeedFormatError("the body is markup, not Apple's egress ranges CSV")
        width = fields = 0  # fields in a row as the first row has them; in the last row
        for row in csv.reader(io.StringIO(text)):
            if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
                continue
            fields = len(row)
            width = width or fields
            candidates.append(row[0])
        if fields < width:
            raise FeedFormatError(f"the last row has {fields} of {width} fields: the body was cut short")
    return _check_junk(_collect(candidates), "iCloud Private Relay ranges")


# Microsoft publishes the service tags weekly under a new file name; the
# download page links the current one. The link's shape has been stable for years.
_AZURE_LINK = re.compile(rb"https://download\.microsoft\.com/download/[A-Za-z0-9/_.-]+/ServiceTags_Public_\d{8}\.json")


def azure_download_link(page: bytes) -> str | None:
    """The current ``ServiceTags_Public_*.json`` link on Microsoft's download page."""
    links = sorted({m.decode() for m in _AZURE_LINK.findall(page)}, key=lambda u: u.rsplit("_", 1)[-1])
    return links[-1] if links else None
