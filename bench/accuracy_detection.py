"""The VPN/proxy/hosting/relay section of `make accuracy` (issue 21): ``GET /ip/{ip}/vpn`` on real data.

The service downloads every default feed from the real snapshots in ``REALDATA/feeds`` (served on
127.0.0.1) and answers for every ground-truth address of ``REALDATA/truth``: VPN servers ten
providers published on 2026-07-03, residential and mobile access addresses, hosting addresses,
iCloud Private Relay egress addresses. It is measured in three configurations, because the VPN
providers' server lists and an ASN database need snapshots that ``REALDATA`` does not hold:

- ``before``: every feed but the provider lists (what the service answered before issue 21,
  with today's verdict rules);
- ``default``: the default feeds, the provider lists from their default source
  (``ACCURACY_DATA/open-source-vpn-ip-lists/``, a later snapshot of the repository the ground
  truth comes from): circular on the VPN sets, which say so;
- ``no-asn``: the same without an ASN database, so what the feeds alone do.

Circular too, and said so: the relay ground truth is drawn from the same mirror of Apple's list
as the relay feed snapshot, and the residential and hosting samples from the same AS table as the
ASN database, so the AS lists' share of those figures is not independent evidence.

With the default AS database (``fetch-geoip``'s, in ``DATA_DIR``) the shipped AS lists count; without it they
cannot (no DNS is reachable, so Team Cymru cannot answer either), and the report says so. The
VPN servers a configuration misses are counted by the AS that holds them: that is how the
shipped AS lists are reviewed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import maxminddb

from ipintel.infra.feed_catalogue import DEFAULT_FEEDS, VPN_PROVIDERS

if TYPE_CHECKING:
    from accuracy import Context

TITLE = "VPN detection (GET /ip/{ip}/vpn)"

ANONYMITY = ("isVpn", "isProxy", "isTor")
FLAGS = ("isVpn", "isProxy", "isTor", "isHosting", "isMobile", "isRelay")
VPN_NAMES = {p.key: p.name for p in VPN_PROVIDERS}
PROVIDER_FEEDS = [p.key for p in VPN_PROVIDERS]
# The snapshots in ACCURACY_DATA of the provider feeds whose sources are not (only) open-source-vpn-ip-lists'
# <key>.txt (ipintel.infra.feed_catalogue.VPN_PROVIDERS), one per source URL.
SNAPSHOTS = {
    "protonvpn": ("open-source-vpn-ip-lists/protonvpn.txt", "ProtonVPN-IPs/protonvpn_ips.txt"),
    "tunnelbear": ("TunnelBear-IPs/tunnelbear_ips.txt",),
}
# The feed snapshots' names in REALDATA's manifest, by feed.
SHARED_FEEDS = ("tor", "aws", "gcp", "azure", "oracle", "cloudflare", "digitalocean", "vpn", "datacenter", "relay")


@dataclass(frozen=True)
class Config:
    key: str
    title: str
    lists: str | None  # directory under ACCURACY_DATA with the provider feeds' snapshots; None: disabled
    asn: bool = True  # with the default AS database (when fetch-geoip got one)


CONFIGS = (
    Config("before", "without the provider lists (the other feeds, today's rules and AS lists)", None),
    Config("default", "default feeds, provider lists included", "open-source-vpn-ip-lists"),
    Config("no-asn", "default feeds, no ASN database (the AS lists cannot count)", "open-source-vpn-ip-lists", asn=False),
)  # fmt: skip


@dataclass(frozen=True)
class TruthSet:
    name: str  # file name without .txt
    kind: str  # "vpn", "residential", "hosting", "relay"
    provider: str | None = None  # the VPN's key for a vpn set


def truth_sets(ctx: Context) -> list[TruthSet]:
    sets = []
    for path in sorted((ctx.realdata / "truth").glob("*.txt")):
        name = path.stem
        if name.startswith("vpn-"):
            sets.append(TruthSet(name, "vpn", name.removeprefix("vpn-")))
        elif name.startswith("residential"):
            sets.append(TruthSet(name, "residential"))
        elif name.startswith("hosting"):
            sets.append(TruthSet(name, "hosting"))
        elif name.startswith("icloud-relay"):
            sets.append(TruthSet(name, "relay"))
    return sets


def addresses(ctx: Context, truth: TruthSet) -> list[str]:
    lines = (ctx.realdata / "truth" / f"{truth.name}.txt").read_text().split()
    return [str(ipaddress.ip_address(line)) for line in lines]


def feed_urls(ctx: Context, config: Config) -> tuple[str, list[str]]:
    """``IPINTEL_FEED_URLS`` for ``config``, and notes on what could not be served."""
    manifest = ctx.manifest()["feeds"]
    parts, notes = [], []
    for name in SHARED_FEEDS:
        files = manifest[name]["files"]
        parts.append(f"{name}=" + "|".join(ctx.realdata_url(f"feeds/{f}") for f in files))
    for key in PROVIDER_FEEDS:
        wanted = list(SNAPSHOTS.get(key, (f"{config.lists}/{key}.txt",))) if config.lists is not None else []
        here = [name for name in wanted if (ctx.extra / name).exists()]
        parts.append(f"{key}=" + "|".join(ctx.extra_url(name) for name in here))  # none: disabled
        for name in wanted:
            if name not in here:
                notes.append(f"`{key}`: no snapshot of this source (ACCURACY_DATA/{name}): not measured")
    known = set(SHARED_FEEDS) | set(PROVIDER_FEEDS)
    for spec in DEFAULT_FEEDS:
        if spec.name not in known:
            parts.append(f"{spec.name}=")
            notes.append(f"`{spec.name}`: no snapshot, feed disabled")
    return ",".join(parts), notes


def _rel(ctx: Context, path: Path | None) -> str:
    if path is None:
        return "-"
    try:
        return f"ACCURACY_DATA/{path.relative_to(ctx.extra)}"
    except ValueError:
        return str(path)


def pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


class AsnLookup:
    """The AS of an address from the default AS database (the same file the service reads)."""

    def __init__(self, path: Path) -> None:
        self.reader = maxminddb.open_database(str(path)) if path.exists() else None

    def __call__(self, ip: str) -> str:
        if self.reader is None:
            return "AS?"
        record = self.reader.get(ip)
        if not isinstance(record, dict):
            return "no AS"
        return f"AS{record.get('autonomous_system_number')} {record.get('autonomous_system_organization', '')}".strip()


def summarise(truth: TruthSet, answers: dict[str, dict[str, Any]], asn: AsnLookup) -> dict[str, Any]:
    """The figures of one set: the share of each flag, provider naming, false positives with
    their reasons, and (for VPN sets) the ASes of the servers missed."""
    good = {ip: a for ip, a in answers.items() if "error" not in a}
    n = len(good)
    row: dict[str, Any] = {"n": n, "errors": len(answers) - n}
    for flag in FLAGS:
        row[flag] = sum(1 for a in good.values() if a[flag])
    row["flagged"] = sum(1 for a in good.values() if any(a[f] for f in (*ANONYMITY, "isHosting", "isRelay")))
    row["named"] = sum(1 for a in good.values() if a["provider"])
    row["high"] = sum(1 for a in good.values() if a["isVpn"] and a["confidence"] == "high")
    if truth.kind == "vpn" and truth.provider is not None:
        name = VPN_NAMES.get(truth.provider)
        via_list = [a for a in good.values() if any(r.startswith(("vpn-server:", "vpn-subnet:")) for r in a["reasons"])]
        row["via_list"] = len(via_list)
        row["via_list_named"] = sum(1 for a in via_list if a["provider"] == name)
        row["named_vpn"] = sum(1 for a in good.values() if a["provider"] == name)
        missed = Counter(asn(ip) for ip, a in good.items() if not a["isVpn"])
        row["missed_by_as"] = missed.most_common(8)
        row["providers_named"] = Counter(a["provider"] for a in good.values() if a["provider"]).most_common(4)
    if truth.kind in ("residential", "relay", "hosting"):
        if truth.kind == "residential":
            wrong = [a for a in good.values() if any(a[f] for f in (*ANONYMITY, "isHosting", "isRelay"))]
        else:  # relays and hosting addresses: an anonymity flag is the false positive
            wrong = [a for a in good.values() if a["isVpn"]]
        row["fp"] = len(wrong)
        row["fp_reasons"] = sorted(
            Counter(" + ".join(a["reasons"]) for a in wrong).items(), key=lambda kv: (-kv[1], kv[0])
        )
        row["fp_examples"] = sorted({" + ".join(a["reasons"]): f"{a['ip']} ({asn(a['ip'])})" for a in wrong}.items())[
            :12
        ]
    if truth.kind == "hosting":
        row["missed_by_as"] = Counter(asn(ip) for ip, a in good.items() if not a["isHosting"]).most_common(8)
    return row


async def measure_config(ctx: Context, config: Config, sets: list[TruthSet], asn: AsnLookup) -> dict[str, Any]:
    urls, notes = feed_urls(ctx, config)
    env = {"IPINTEL_FEED_URLS": urls}
    asn_db = ctx.asn_db
    if asn_db.exists() and config.asn:
        env["IPINTEL_GEOIP_ASN_DB"] = str(asn_db)
    async with ctx.service(env) as service:
        everything = {truth.name: addresses(ctx, truth) for truth in sets}
        answers = await service.vpn_verdicts(sorted({ip for ips in everything.values() for ip in ips}))
        feeds = {name: {"status": h["status"], "prefixes": h["prefixes"]} for name, h in sorted(service.feeds.items())}
    rows = {t.name: summarise(t, {ip: answers[ip] for ip in everything[t.name]}, asn) for t in sets}
    return {"notes": notes, "feeds": feeds, "rows": rows}


def _vpn_targets(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    vpn_rows = {name: r for name, r in rows.items() if name.startswith("vpn-") and r["n"]}
    shares = {name: r["isVpn"] / r["n"] for name, r in vpn_rows.items()}
    total = sum(r["n"] for r in vpn_rows.values())
    via = sum(r["via_list"] for r in vpn_rows.values())
    return {
        "mean": sum(shares.values()) / len(shares) if shares else 0.0,
        "lowest": min(shares.items(), key=lambda kv: kv[1]) if shares else ("-", 0.0),
        "flagged": sum(r["flagged"] for r in vpn_rows.values()) / total if total else 0.0,
        "named": sum(r["via_list_named"] for r in vpn_rows.values()) / via if via else None,
    }


def _table(rows: dict[str, dict[str, Any]], sets: list[TruthSet]) -> list[str]:
    out = [
        "| set | n | isVpn | isProxy | isTor | isHosting | isMobile | isRelay | flagged at all | provider named | VPN named | isVpn high |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for truth in sets:
        r = rows[truth.name]
        n = r["n"]
        vpn_named = pct(r["named_vpn"], n) if "named_vpn" in r else "-"
        cells = [pct(r[f], n) for f in FLAGS]
        errors = f" ({r['errors']} refused)" if r["errors"] else ""
        out.append(
            f"| {truth.name} | {n}{errors} | {' | '.join(cells)} | {pct(r['flagged'], n)} | {pct(r['named'], n)} "
            f"| {vpn_named} | {pct(r['high'], n)} |"
        )
    return out


def _dates(ctx: Context) -> list[str]:
    manifest = ctx.manifest()
    out = ["| data | file | source | date |", "|---|---|---|---|"]
    for name in SHARED_FEEDS:
        for source in manifest["feeds"][name]["sources"]:
            date = source.get("data_date") or source.get("committed", "")[:10]
            out.append(
                f"| feed `{name}` | {source['file']} | {source['repo']}@{source['commit'][:7]} {source['path']} | {date} |"
            )
    for name, source in sorted(manifest["truth"].items()):
        if "repo" in source:
            origin, date = f"{source['repo']}@{source['commit'][:7]} {source['path']}", source["committed"][:10]
        else:  # sampled from a package's AS table
            origin, date = (
                f"npm {source['npm']}: {source['per_asn']} per AS of {len(source['asns'])} ASes",
                source["npm"].rsplit(".", 1)[-1][:8],
            )
        out.append(f"| truth `{name}` | truth/{name}.txt | {origin} | {date} |")
    for path in sorted(ctx.geodata.glob("*.mmdb")):
        with maxminddb.open_database(str(path)) as reader:
            meta = reader.metadata()
        built = dt.datetime.fromtimestamp(meta.build_epoch, dt.UTC).date().isoformat()
        out.append(f"| default database | DATA_DIR/{path.name} | fetch-geoip ({meta.database_type}) | {built} |")
    about = ctx.extra / "SOURCES.json"
    if about.exists():
        for name, source in json.loads(about.read_text()).items():
            out.append(f"| {name} | ACCURACY_DATA/{source['path']} | {source['source']} | {source['date']} |")
    return out


def render(ctx: Context, sets: list[TruthSet], results: dict[str, dict[str, Any]], asn_db: bool) -> str:
    lines = ["### Data and its dates", "", *_dates(ctx), ""]
    if not asn_db:
        lines += ["No default AS database: the shipped AS lists could not count (no DNS, so no Team Cymru).", ""]
    lines += [
        "Read the figures with these in mind:",
        "",
        "- Circular, and marked so: the VPN sets against the provider feeds (open-source-vpn-ip-lists is both the"
        " ground truth, 2026-07-03, and the feeds' default source, here 2026-08-22: 7 weeks of churn apart); the"
        " relay sets' `isRelay` (the truth is one address from each of 500 prefixes of the same hroost mirror as the"
        " relay feed snapshot: `isVpn` 0% is the figure that means something); the hosting and residential sets"
        " with the ASN database (both drawn from @ip-location-db/asn 2026-06-17): the `no-asn` configuration shows"
        " what the feeds do alone.",
        "- The Proton VPN ground truth is mostly entry addresses: of its 1,437, 678 are `EntryIP`s and 211 `ExitIP`s"
        " of Proton's API on the same day (tn3w/ProtonVPN-IPs `protonvpn_logicals.json` @c192903, 2026-07-03),"
        " and Proton's entries and exits differ; the `protonvpn` feed reads both lists.",
        "- Not measured: `tunnelbear` (no ground truth set holds TunnelBear servers; its feed is loaded),"
        " reverse DNS (a local DNS server that knows no name answers every PTR query), the Anonymous-IP and"
        " Connection-Type databases (commercial, not configured).",
        "- `isMobile` on residential sets is not a false positive: the sets include mobile carriers' ASes"
        " (AS21928 T-Mobile US, AS6167 Verizon Wireless, AS45609 Airtel) that the shipped mobile list names.",
        "",
    ]
    lines += ["### Targets (issue 21)", "", "| configuration | isVpn mean over providers | lowest provider | VPN flagged at all | provider names the VPN (found through a provider's list) | relay v4 isRelay / isVpn | relay v6 isRelay / isVpn | hosting v4 / v6 isHosting | residential v4 / v6 any flag |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for config in CONFIGS:
        rows = results[config.key]["rows"]
        t = _vpn_targets(rows)
        named = f"{100 * t['named']:.1f}%" if t["named"] is not None else "-"
        circular = " (circular)" if config.lists is not None else ""

        def rel(name: str, rows: dict[str, Any] = rows) -> str:
            r = rows.get(name)
            return f"{pct(r['isRelay'], r['n'])} / {pct(r['isVpn'], r['n'])}" if r else "-"

        def share(name: str, flag: str, rows: dict[str, Any] = rows) -> str:
            r = rows.get(name)
            return pct(r[flag], r["n"]) if r else "-"

        def fp(name: str, rows: dict[str, Any] = rows) -> str:
            r = rows.get(name)
            return pct(r["fp"], r["n"]) if r else "-"

        lines.append(
            f"| {config.title} | {100 * t['mean']:.1f}%{circular} | {t['lowest'][0]} {100 * t['lowest'][1]:.1f}% "
            f"| {100 * t['flagged']:.1f}% | {named} | {rel('icloud-relay')} | {rel('icloud-relay-v6')} "
            f"| {share('hosting', 'isHosting')} / {share('hosting-v6', 'isHosting')} | {fp('residential')} / {fp('residential-v6')} |"
        )
    lines.append("")
    lines.append(
        "Targets: isVpn mean >= 85%, no provider < 90%, flagged at all >= 97%, provider named >= 90%; relay isRelay 100% and isVpn 0%; hosting >= 98%; residential any flag <= 0.5%."
    )
    lines.append("")
    for config in CONFIGS:
        result = results[config.key]
        rows = result["rows"]
        lines += [f"### {config.title}", ""]
        loaded = ", ".join(f"`{n}` {f['prefixes']:,}" for n, f in result["feeds"].items() if f["status"] == "ok")
        lines += [f"Feeds loaded (entries): {loaded}.", ""]
        for note in result["notes"]:
            lines.append(f"- {note}")
        if result["notes"]:
            lines.append("")
        vpn_sets = [t for t in sets if t.kind == "vpn"]
        other = [t for t in sets if t.kind != "vpn"]
        if config.lists is not None:
            lines += [
                "VPN sets (circular: the feeds and the ground truth come from the same publisher, Joe12387/open-source-vpn-ip-lists, at different dates):",
                "",
            ]
        lines += [*_table(rows, vpn_sets), "", *_table(rows, other), ""]
        lines += ["VPN servers missed (not isVpn), by the AS that holds them (ASN database above):", ""]
        for truth in vpn_sets:
            missed = rows[truth.name]["missed_by_as"]
            if missed:
                lines.append(f"- {truth.name}: " + "; ".join(f"{name} {count}" for name, count in missed))
        lines.append("")
        lines += [
            "False positives (residential: any anonymity, hosting or relay flag; relay and hosting: isVpn), by reasons:",
            "",
        ]
        for truth in other:
            r = rows[truth.name]
            if r.get("fp"):
                reasons = "; ".join(f"`{reason or '(none)'}` {count}" for reason, count in r["fp_reasons"])
                lines.append(f"- {truth.name}: {r['fp']} of {r['n']}: {reasons}")
                lines.append("  - examples: " + "; ".join(f"{ex}" for _, ex in r["fp_examples"]))
            elif "fp" in r:
                lines.append(f"- {truth.name}: none of {r['n']}")
        hosting_missed = [(t.name, rows[t.name].get("missed_by_as")) for t in other if t.kind == "hosting"]
        for name, missed in hosting_missed:
            if missed:
                lines.append(f"- {name} not isHosting, by AS: " + "; ".join(f"{a} {c}" for a, c in missed))
        lines.append("")
    return "\n".join(lines)


async def measure(ctx: Context) -> Any:
    from accuracy import Section

    sets = truth_sets(ctx)
    asn = AsnLookup(ctx.asn_db)
    cache = Path(os.environ.get("ACCURACY_REUSE") or "/nonexistent")  # render again without measuring
    if cache.exists():  # noqa: ASYNC240 - before anything runs
        results = json.loads(cache.read_text())  # noqa: ASYNC240
    else:
        results = {}
        for config in CONFIGS:
            print(f"accuracy: detection, {config.key}", file=sys.stderr, flush=True)
            results[config.key] = await measure_config(ctx, config, sets, asn)
        results = json.loads(json.dumps(results))  # the figures as the report and a cache see them
        if os.environ.get("ACCURACY_REUSE"):
            cache.write_text(json.dumps(results))  # noqa: ASYNC240 - after everything ran
    return Section(results, render(ctx, sets, results, asn.reader is not None))
