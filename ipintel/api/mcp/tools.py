"""The MCP tools (docs/MCP.md#tools): what ``tools/list`` shows a model, and for each a few lines that call the
same :class:`~ipintel.service.Intel` method as its REST route, so both share behaviour, caches and errors. The
input schemas are ``schemas/mcp/tools/<tool>.input.json``; the output is the REST route's response schema.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ipintel.errors import ApiError
from ipintel.infra.limiter import Quota
from ipintel.schema_check import Failure, SchemaCheck
from ipintel.schema_files import embeddable_schema

if TYPE_CHECKING:
    from ipintel.service import Intel

log = logging.getLogger("ipintel.mcp")

# Which error code a schema failure of an argument becomes: the code the REST
# route would give for the same bad value, so a model sees one vocabulary.
_CODE_BY_ARGUMENT = {
    "ip": "invalid_ip",
    "domain": "invalid_domain",
    "type": "invalid_record_type",
    "range": "invalid_range",
    "asn": "invalid_asn",
}


@dataclass(frozen=True)
class CallContext:
    """What a tool call may need from the HTTP request that carried it."""

    caller_ip: str | None  # docs/API.md#client-address, for lookup_ip without an address
    spend: Callable[[Quota], Awaitable[None]]  # takes a token of a rate-limit quota; raises ApiError("rate_limited")
    request_id: str | None = None  # for logs


Runner = Callable[["Intel", dict[str, Any], CallContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    output: tuple[str, ...]  # REST schema file(s) of the result; several are alternatives (anyOf)
    quota: Quota  # the rate-limit quota (docs/API.md#rate-limits) it spends besides the request's own general token
    run: Runner
    open_world: bool = True
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # canonicalises arguments before checking

    @property
    def input_schema_name(self) -> str:
        return f"mcp/tools/{self.name}.input"


# Adapters: each reads its arguments and calls one Intel method. -------------


async def _lookup_ip(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    ip = arguments.get("ip")
    if ip is not None:
        return await intel.lookup_ip(ip)  # GET /ip/{ip}
    if context.caller_ip is None:
        raise ApiError("invalid_ip", "the caller's address is unknown; pass the argument 'ip'")
    # GET /ip: the caller's address, not cached (docs/API.md#caching)
    return await intel.lookup_own_ip(context.caller_ip)


async def _whois_ip(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    return await intel.whois_ip(arguments["ip"])


def _upper_record_type(arguments: dict[str, Any]) -> dict[str, Any]:
    """Record types are case-insensitive (docs/API.md#dns); the schema's enum lists the canonical spelling."""
    if isinstance(arguments.get("type"), str):
        return {**arguments, "type": arguments["type"].upper()}
    return arguments


async def _lookup_dns(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    has_domain, has_ip = "domain" in arguments, "ip" in arguments
    if has_domain == has_ip:
        raise ApiError(
            "invalid_request",
            "lookup_dns takes exactly one of 'domain' (with an optional 'type') or 'ip', "
            'e.g. {"domain": "example.com", "type": "MX"} or {"ip": "8.8.8.8"}',
        )
    if has_ip:
        if "type" in arguments:
            raise ApiError(
                "invalid_request", "'type' goes with 'domain'; a reverse lookup with 'ip' always asks for PTR"
            )
        return await intel.reverse_dns(arguments["ip"])
    return await intel.lookup_dns(arguments["domain"], type=arguments.get("type", "A"))


async def _check_blacklist(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    return await intel.check_blacklist(arguments["ip"])


async def _detect_vpn(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    return await intel.detect_vpn(arguments["ip"])


async def _calculate_cidr(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    return await intel.calculate_cidr(arguments["range"])


async def _profile_ip(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    # GET /ip/{ip}/profile: each part that asks an upstream spends its own quota, as the route's do.
    return await intel.profile_ip(arguments["ip"], arguments.get("include"), spend=context.spend)


async def _lookup_asn(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    return await intel.lookup_asn(arguments["asn"])  # GET /asn/{asn}


async def _lookup_ips(intel: Intel, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
    # POST /ip/batch, at most MCP_BATCH_MAX addresses (the input schema's maxItems).
    return await intel.lookup_ips(arguments["ips"], arguments.get("include"), spend=context.spend)


# The tools, in the fixed order of docs/MCP.md#tools. ---------------------------------

TOOLS: tuple[Tool, ...] = (
    Tool(
        name="lookup_ip",
        title="GeoIP lookup",
        description=(
            "Geolocate an IP address and name the network that announces it. Returns ip (canonical form), "
            "country (ISO 3166 code), region, city, latitude, longitude, timezone (IANA name), asn (e.g. "
            '"AS15169"), isp, org and network (the matched database prefix); a field the data does not know is '
            "null. Use it to find where an address is or which provider operates it. Argument: ip, an IPv4 or "
            "IPv6 address; omit it to look up the caller's own public address. Private, loopback and other "
            "non-public addresses give the error reserved_address. "
            'Example: {"ip": "8.8.8.8"} returns {"country": "US", "city": "Mountain View", "asn": "AS15169", ...}.'
        ),
        output=("geoip",),
        quota=Quota.GENERAL,
        run=_lookup_ip,
    ),
    Tool(
        name="whois_ip",
        title="Registration data (RDAP/WHOIS)",
        description=(
            "Registration record of an IP address from its regional internet registry over RDAP (the successor "
            "of WHOIS). Returns the network's name and handle, startAddress and endAddress, country (as the "
            "registry gives it, often null at ARIN), registrant (the organisation holding the block), registry "
            "(ARIN, RIPE NCC, APNIC, LACNIC or AFRINIC), events (registration, last changed) with ISO 8601 "
            "dates and abuse (the abuse contact: email, phone, name; null when the registry names none). Use it "
            "to learn who an address block is assigned to, how large it is and where to report abuse from it; "
            "use lookup_ip for location. Argument: ip, a public IPv4 or IPv6 address. "
            'Example: {"ip": "1.1.1.1"} returns {"registry": "APNIC", "startAddress": "1.1.1.0", ...}.'
        ),
        output=("whois",),
        quota=Quota.REGISTRY,
        run=_whois_ip,
    ),
    Tool(
        name="lookup_dns",
        title="DNS and reverse DNS",
        description=(
            "DNS records of a domain, or the reverse DNS (PTR) names of an IP address. Give exactly one of: "
            "domain, with an optional type (A by default, AAAA, MX, TXT, NS or CNAME); or ip. Returns "
            '{"records": [{"name", "type", "ttl", "data"}]} for a domain, and {"ip", "records": [...]} with PTR '
            'records for an ip. MX data is "<preference> <exchange>"; a CNAME met on the way is its own record. '
            "An empty records list means the name exists but has no record of that type; the error "
            "domain_not_found means the name does not exist. Use it to check mail servers, verification TXT "
            'records, name servers, or the host name of an address. Examples: {"domain": "example.com", "type": '
            '"MX"}; {"ip": "8.8.8.8"} returns a PTR record with data "dns.google".'
        ),
        output=("dns", "reverse"),
        quota=Quota.DNS,
        run=_lookup_dns,
        prepare=_upper_record_type,
    ),
    Tool(
        name="check_blacklist",
        title="DNS blacklist check",
        description=(
            "Whether DNS blacklists (such as Spamhaus ZEN, SpamCop, PSBL, DroneBL) and an IP reputation database "
            "list an IPv4 address. Returns status: listed (at least one source lists it), clear (every source "
            "answered and none lists it) or unknown (no listing, but some source could not be asked); listed "
            "(true only when status is listed); and sources, one entry per list with name, status "
            "(listed/clear/unavailable), listed and an optional detail. Use it to judge whether an address is "
            "known for spam or abuse. Argument: ip, a public IPv4 address (IPv6 gives the error "
            'ipv6_not_supported). Example: {"ip": "185.220.101.1"}.'
        ),
        output=("blacklist",),
        quota=Quota.REGISTRY,
        run=_check_blacklist,
    ),
    Tool(
        name="detect_vpn",
        title="VPN, proxy and hosting detection",
        description=(
            "Whether an IP address belongs to a VPN, a proxy or Tor exit, iCloud Private Relay, a hosting or cloud "
            "provider, or a mobile network. Returns isVpn (the anonymisation verdict), isProxy, isTor, isHosting, "
            "isMobile, isRelay (an iCloud Private Relay egress: an Apple customer browsing privately, not a VPN, "
            'proxy or datacenter), provider (the operator a signal names, e.g. "AWS us-east-1", "iCloud Private '
            'Relay", or null), confidence (high, medium or low; it is about isVpn) and reasons, the signals that '
            'fired (e.g. "tor-exit", "cloud:aws", "asn-hosting:AS16509", "relay:icloud"). A datacenter address '
            "without a VPN signal is isHosting true, isVpn false. Use it to tell whether traffic comes from an "
            "anonymising service or a server rather "
            'than a home or mobile user. Argument: ip, a public IPv4 or IPv6 address. Example: {"ip": '
            '"185.220.101.1"}.'
        ),
        output=("vpn",),
        quota=Quota.GENERAL,
        run=_detect_vpn,
    ),
    Tool(
        name="calculate_cidr",
        title="CIDR calculator",
        description=(
            "Subnet arithmetic for an IPv4 or IPv6 range in CIDR notation, computed locally without any network "
            "access. Returns network, broadcast, subnetMask, wildcardMask, prefixLength, totalHosts, usableHosts, "
            "firstHost and lastHost. Host bits may be set (192.168.1.77/24 means 192.168.1.0/24); /31 has 2 usable "
            "hosts (RFC 3021) and /32 one; for IPv6, broadcast and wildcardMask are null and every address is "
            "usable. Use it for subnet sizes, masks and host ranges instead of computing them yourself. Argument: "
            'range, e.g. "192.168.1.0/24" or "2001:db8::/48". Example: {"range": "192.168.1.0/24"} returns '
            '{"network": "192.168.1.0", "broadcast": "192.168.1.255", "usableHosts": 254, ...}.'
        ),
        output=("cidr",),
        quota=Quota.GENERAL,
        run=_calculate_cidr,
        open_world=False,
    ),
    Tool(
        name="profile_ip",
        title="Everything about an address",
        description=(
            "Everything ipintel knows about one IP address in one call. Returns geo (the lookup_ip record: location, "
            "AS, ISP), vpn (the detect_vpn verdict), whois (the whois_ip registry record), blacklist (the "
            "check_blacklist result; IPv4 only) and ptr (reverse DNS names). The parts are fetched at once; a "
            'part that fails is {"error": {"code", "message"}} in its place while the others are answered. '
            "Use it to triage an address instead of calling five tools. Arguments: ip, a public IPv4 or IPv6 "
            "address; include, optional, the parts to fetch (default all). "
            'Example: {"ip": "8.8.8.8", "include": ["geo", "whois"]}.'
        ),
        output=("profile",),
        quota=Quota.GENERAL,
        run=_profile_ip,
    ),
    Tool(
        name="lookup_ips",
        title="Many addresses at once",
        description=(
            "Profiles of up to 100 IP addresses in one call. Returns results, in the order given: a list of "
            '{"ip", "data"} (data as profile_ip answers it, with the included parts) or {"ip", "error"} for an '
            "address that is malformed or not public. Duplicates are looked up once. include defaults to geo "
            "and vpn, which are local and fast; whois, blacklist and ptr ask upstreams. Use it to enrich a list "
            'of addresses from a log or an alert. Example: {"ips": ["8.8.8.8", "1.1.1.1"], "include": '
            '["geo", "vpn"]}.'
        ),
        output=("ip_batch",),
        quota=Quota.GENERAL,
        run=_lookup_ips,
    ),
    Tool(
        name="lookup_asn",
        title="Autonomous system lookup",
        description=(
            'Registration and networks of an autonomous system (AS). Returns asn (e.g. "AS13335", the form '
            "lookup_ip gives), name (the AS record's name, e.g. CLOUDFLARENET), org (the registrant "
            "organisation), country (often null at ARIN and RIPE NCC), registry (ARIN, RIPE NCC, APNIC, LACNIC "
            "or AFRINIC), handle, events (registration, last changed) with ISO 8601 dates, abuse (the abuse "
            "contact: email, phone, name; null when the registry names none) and prefixes (the IPv4 and IPv6 "
            "networks the server's ASN database lists for the AS; null when it has no ASN database, which means "
            "unknown, not none). Use it to learn who operates an AS, where to report abuse from it, or which "
            'networks it announces; use lookup_ip to find the AS of an address. Argument: asn, "AS13335" or '
            '"13335". Example: {"asn": "AS13335"} returns {"asn": "AS13335", "org": "Cloudflare, Inc.", ...}.'
        ),
        output=("asn",),
        quota=Quota.REGISTRY,
        run=_lookup_asn,
    ),
)

TOOLS_BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}


def _prefix_refs(node: Any, prefix: str) -> Any:
    """Rewrite local ``#/$defs/x`` references to ``#/$defs/<prefix>x`` (for hoisting ``$defs``)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = "#/$defs/" + prefix + value[len("#/$defs/") :]
            else:
                out[key] = _prefix_refs(value, prefix)
        return out
    if isinstance(node, list):
        return [_prefix_refs(item, prefix) for item in node]
    return node


def output_schema(names: tuple[str, ...]) -> dict[str, Any]:
    """The ``outputSchema`` of a tool: one REST schema file, or ``anyOf`` several.

    Alternatives are wrapped in ``{"type": "object", "anyOf": [...]}`` (MCP up to
    2025-11-25 wants an object at the root). Each file's ``$defs`` are hoisted to
    the root under a per-file prefix, so local references keep resolving once
    the file is nested."""
    if len(names) == 1:
        return embeddable_schema(names[0])
    branches: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for name in names:
        branch = embeddable_schema(name)
        prefix = f"{name.replace('/', '_')}_"
        branch = _prefix_refs(branch, prefix)
        for key, value in branch.pop("$defs", {}).items():
            defs[prefix + key] = value
        branches.append(branch)
    combined: dict[str, Any] = {"type": "object", "anyOf": branches}
    if defs:
        combined["$defs"] = defs
    return combined


def input_schema(tool: Tool) -> dict[str, Any]:
    return embeddable_schema(tool.input_schema_name)


# Argument checking ---------------------------------------------------------------


def _argument_error(failure: Failure) -> ApiError:
    """A schema failure of the arguments, with the error code the REST route would give for the same value."""
    return ApiError(_CODE_BY_ARGUMENT.get(failure.member or "", "invalid_request"), failure.message)


@dataclass
class ToolSet:
    """The live tools of one app, with their schemas compiled once at app creation."""

    tools: Sequence[Tool]
    listing: list[dict[str, Any]] = field(init=False)
    by_name: dict[str, Tool] = field(init=False)
    _checks: dict[str, SchemaCheck] = field(init=False)

    def __post_init__(self) -> None:
        self._checks = {
            tool.name: SchemaCheck(input_schema(tool), what=tool.name, noun="argument") for tool in self.tools
        }
        self.listing = [self._describe(tool) for tool in self.tools]
        self.by_name = {tool.name: tool for tool in self.tools}

    def _describe(self, tool: Tool) -> dict[str, Any]:
        return {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": self._checks[tool.name].schema,
            "outputSchema": output_schema(tool.output),
            "annotations": {
                "title": tool.title,
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": tool.open_world,
            },
        }

    def check_arguments(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments, canonicalised and valid against the tool's inputSchema; else ``ApiError``."""
        if tool.prepare is not None:
            arguments = tool.prepare(arguments)
        failure = self._checks[tool.name].failure(arguments)
        if failure is not None:
            raise _argument_error(failure)
        return arguments

    async def call(self, intel: Intel, tool: Tool, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """Check the arguments, spend the tool's rate-limit token, run the one Intel call."""
        arguments = self.check_arguments(tool, arguments)
        await context.spend(tool.quota)
        return await tool.run(intel, arguments, context)
