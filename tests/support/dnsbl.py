"""DNSBL zones that behave like the real ones, and like their real failure modes,
served by the test :class:`~tests.support.dns_server.DnsServer`.

    with DnsServer() as dns:
        healthy_list(dns, "healthy.test", listed={"45.33.32.156": "127.0.0.4"})
        answers_everything(dns, "zen.spamhaus.org", "127.255.255.254")   # queried via a public resolver
        rewrites_nxdomain(dns, "rewrite.test")                             # NXDOMAIN -> an ad server
        answers_everything(dns, "dead.test", "127.0.0.2")                  # a dead list listing the world
        dns.blackhole("silent.test"); dns.servfail("broken.test"); dns.refuse("refused.test")
"""

from __future__ import annotations

from collections.abc import Mapping

from tests.support.dns_server import Answer, DnsServer

AD_SERVER = "198.51.100.10"  # where an NXDOMAIN-rewriting resolver sends every typo


def query_name(ip: str, zone: str) -> str:
    return ".".join(reversed(ip.split("."))) + "." + zone


def _under(name: str, zone: str) -> bool:
    return name == zone or name.endswith("." + zone)


def healthy_list(dns: DnsServer, zone: str, listed: Mapping[str, str | list[str]] | None = None, ttl: int = 0) -> None:
    """A live list: the RFC 5782 test entry 127.0.0.2, plus ``listed`` (ip -> code or codes).

    Everything else is NXDOMAIN, 127.0.0.1 included. ``ttl=0`` by default so
    that c-ares's cache never hides a query from the server."""
    entries: dict[str, str | list[str]] = {"127.0.0.2": "127.0.0.2", **(listed or {})}
    for ip, codes in entries.items():
        for code in [codes] if isinstance(codes, str) else codes:
            dns.add(query_name(ip, zone), "A", code, ttl=ttl)


def answers_everything(dns: DnsServer, zone: str, address: str) -> None:
    """Every A question under ``zone`` answered with ``address``: a dead list that
    lists the world (127.0.0.2), or Spamhaus refusing a public resolver (127.255.255.254)."""
    dns.hook(lambda name, qtype: Answer.a(name, address, ttl=0) if _under(name, zone) and qtype == "A" else None)


def rewrites_nxdomain(
    dns: DnsServer, zone: str, listed: Mapping[str, str] | None = None, ad_server: str = AD_SERVER
) -> None:
    """A live list behind a resolver that turns NXDOMAIN into an advertising address."""
    entries = {query_name(ip, zone): code for ip, code in {"127.0.0.2": "127.0.0.2", **(listed or {})}.items()}

    def hook(name: str, qtype: str) -> Answer | None:
        if not _under(name, zone) or qtype != "A":
            return None
        return Answer.a(name, entries.get(name, ad_server), ttl=0)

    dns.hook(hook)
