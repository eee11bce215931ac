"""Parsers for the published formats of the address feeds.

Each parser takes the bodies downloaded for one feed (most feeds are one
document; Cloudflare and X4BNet publish IPv4 and IPv6 separately) and returns
the prefixes as text. A parser raises :class:`FeedFormatError` when a body is
not the format it expects at all (an HTML error page served with 200, a
truncated JSON document): the caller then keeps the last good copy. Single
bad lines in a text list are skipped and counted, so that one odd entry does
not discard a whole list, but a list that is mostly junk is refused.
"""

from __future__ import annotations

import csv
import io
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


def _collect(candidates: Iterable[Any]) -> Parsed:
    """Keep the strings that parse as prefixes of a sane size; count the rest."""
    prefixes: list[str] = []
    skipped = 0
    for item in candidates:
        if isinstance(item, str):
            try:
                version, _, _, length = parse_prefix(item)
            except PrefixError:
                skipped += 1
                continue
            if length < MIN_PREFIX_LENGTH[version]:
                skipped += 1
                continue
            prefixes.append(item.strip())
        else:
            skipped += 1
    return Parsed(prefixes, skipped)


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


def aws_ip_ranges(bodies: list[bytes]) -> Parsed:
    """AWS ``ip-ranges.json``: ``prefixes[].ip_prefix`` and ``ipv6_prefixes[].ipv6_prefix``."""
    candidates: list[Any] = []
    for doc in _documents(bodies, "prefixes", "an AWS ip-ranges"):
        candidates += [p.get("ip_prefix") if isinstance(p, dict) else None for p in doc["prefixes"]]
        v6 = doc.get("ipv6_prefixes")
        if isinstance(v6, list):
            candidates += [p.get("ipv6_prefix") if isinstance(p, dict) else None for p in v6]
    return _check_junk(_collect(candidates), "AWS ranges")


def google_cloud(bodies: list[bytes]) -> Parsed:
    """Google Cloud ``cloud.json``: ``prefixes[]`` with ``ipv4Prefix`` or ``ipv6Prefix``."""
    candidates: list[Any] = []
    for doc in _documents(bodies, "prefixes", "a Google cloud.json"):
        for entry in doc["prefixes"]:
            if isinstance(entry, dict):
                candidates.append(entry.get("ipv4Prefix") or entry.get("ipv6Prefix"))
            else:
                candidates.append(None)
    return _check_junk(_collect(candidates), "Google Cloud ranges")


def azure_service_tags(bodies: list[bytes]) -> Parsed:
    """Azure ``ServiceTags_Public_*.json``: ``values[].properties.addressPrefixes``.

    Every service tag is read; the same prefix appears under several tags
    (``AzureCloud`` is the superset), and the range index merges duplicates."""
    candidates: list[Any] = []
    seen: set[str] = set()
    for doc in _documents(bodies, "values", "an Azure service tags"):
        for value in doc["values"]:
            props = value.get("properties") if isinstance(value, dict) else None
            prefixes = props.get("addressPrefixes") if isinstance(props, dict) else None
            if not isinstance(prefixes, list):
                continue
            for prefix in prefixes:
                if isinstance(prefix, str):
                    if prefix in seen:
                        continue
                    seen.add(prefix)
                candidates.append(prefix)
    return _check_junk(_collect(candidates), "Azure service tags")


def oracle_cloud(bodies: list[bytes]) -> Parsed:
    """Oracle ``public_ip_ranges.json``: ``regions[].cidrs[].cidr``."""
    candidates: list[Any] = []
    for doc in _documents(bodies, "regions", "an Oracle public_ip_ranges"):
        for region in doc["regions"]:
            cidrs = region.get("cidrs") if isinstance(region, dict) else None
            if isinstance(cidrs, list):
                candidates += [c.get("cidr") if isinstance(c, dict) else None for c in cidrs]
    return _check_junk(_collect(candidates), "Oracle ranges")


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


# Microsoft publishes the service tags weekly under a new file name; the
# download page links the current one. The link's shape has been stable for years.
_AZURE_LINK = re.compile(rb"https://download\.microsoft\.com/download/[A-Za-z0-9/_.-]+/ServiceTags_Public_\d{8}\.json")


def azure_download_link(page: bytes) -> str | None:
    """The current ``ServiceTags_Public_*.json`` link on Microsoft's download page."""
    links = sorted({m.decode() for m in _AZURE_LINK.findall(page)}, key=lambda u: u.rsplit("_", 1)[-1])
    return links[-1] if links else None
