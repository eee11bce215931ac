"""Fuzzing from the contract: schemathesis drives every operation of /openapi.json
against the real server process, pointed at the local fake internet.

Every response must be documented: its status code, its content type, its
body against the schema, its headers; no 500 (nor a JSON-RPC -32603 or an
``internal_error`` body) and no hang (a request has 10 s, and the server must
still be running afterwards). Four runs:

- valid requests (schema-valid, which for a free-form string parameter is
  mostly not a valid address: 400 is then the documented answer);
- invalid requests (schema-violating: a missing ``range``, a wrong body type);
  they must be refused with a 4xx, except on /mcp, where JSON-RPC errors travel
  with HTTP 200 (docs/MCP.md);
- valid requests while the upstreams fail (DNS silent, registries slow, garbage
  everywhere): 502 and 504 are then documented answers, 500 never is;
- valid requests against a server with tiny rate limits: the 429s and their
  headers must match the document too.

``make test`` runs a bounded number of examples per operation
(``IPINTEL_FUZZ_EXAMPLES``, default 10, derandomised); ``make fuzz`` runs many
more with fresh random seeds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

from tests.support.app import server_process
from tests.support.fake_internet import ARIN_IP, DOMAIN, LISTED_IP, RIPE_IP, FakeInternet
from tests.support.feeds import VPN_SERVER_ADDRESS

# schemathesis is imported where it is used: importing it takes about 0.4 s, which every pytest run that collects
# this module (make test-fast, that runs none of its tests, included) would pay.
if importlib.util.find_spec("schemathesis") is None:
    pytest.skip("schemathesis is a dev dependency", allow_module_level=True)
if TYPE_CHECKING:
    from schemathesis import GenerationMode

pytestmark = pytest.mark.usefixtures("healthy_net")  # the fault runs switch faults on: off again after each

EXAMPLES = int(os.environ.get("IPINTEL_FUZZ_EXAMPLES", "10"))
CASES: Counter[str] = Counter()  # cases run, by operation, over the module
RANDOM = os.environ.get("IPINTEL_FUZZ_RANDOM") == "1"

# Operations that reach an upstream: the ones the fault runs drive.
UPSTREAM_OPERATIONS = {
    "GET /ip/{ip}",
    "GET /ip/{ip}/vpn",
    "GET /whois/{ip}",
    "GET /dns/{domain}",
    "GET /dns/{ip}/reverse",
    "GET /blacklist/{ip}",
    "GET /ip/{ip}/profile",
    "POST /ip/batch",
    "GET /asn/{asn}",
    "POST /mcp",
}
# Fault sets, each with one request that must show it: (faults, path, status).
FAULT_SETS = [
    (("dns_down", "rdap_slow", "reputation_slow"), "/dns/example.com", 504),  # every upstream silent
    (("dns_garbage", "rdap_garbage", "reputation_garbage", "feeds_garbage"), "/dns/example.com", 502),  # all wrong
    (("rdap_down", "reputation_down", "feeds_down"), f"/whois/{ARIN_IP}", 502),  # dropped connections, 503s
]

# Values that reach the fake internet's data (schema-valid random strings almost never
# are addresses): public, reserved and malformed ones, so every branch is driven.
IPS = [ARIN_IP, RIPE_IP, LISTED_IP, VPN_SERVER_ADDRESS, "8.8.8.8", "2001:4860:4860::8888", "10.0.0.1", "::1", "8.8.8"]
DOMAINS = [DOMAIN, "www.example.com", "nx.example.com", "xn--bcher-kva.example", "bücher.example", "-bad.com"]
# AS numbers the fake registries hold (ARIN AS15169, RIPE AS3333), one nobody holds, and malformed ones.
ASNS = ["AS15169", "15169", "as3333", "AS64512", "ASX", "4294967296", "AS-1"]
QUERIES = {
    "range": ["10.0.0.0/8", "192.168.1.77/24", "0.0.0.0/0", "::/0", "2001:db8::/48", "1.2.3.4/33"],
    "type": ["A", "aaaa", "MX", "TXT", "NS", "CNAME", "PTR"],
    # the profile's parts: all five, one, a few in any order, and unknown or empty selections
    "include": ["geo,vpn,whois,blacklist,ptr", "geo", "whois,ptr", "ptr,geo,blacklist", "vpn,vpn", "nope", ""],
}
PARTS = ["geo", "vpn", "whois", "blacklist", "ptr"]
# Batch bodies of those addresses (duplicates, malformed and reserved ones included), with or without include.
BATCH_BODIES = st.fixed_dictionaries(
    {"ips": st.lists(st.sampled_from([*IPS, "::ffff:8.8.8.8", ""]), max_size=6)},
    optional={"include": st.lists(st.sampled_from(PARTS), min_size=1, max_size=5)},
)
TOOL_ARGUMENTS: list[tuple[str, dict[str, st.SearchStrategy[Any]]]] = [
    ("lookup_ip", {"ip": st.sampled_from(IPS)}),
    ("lookup_ip", {}),
    ("whois_ip", {"ip": st.sampled_from(IPS)}),
    ("detect_vpn", {"ip": st.sampled_from(IPS)}),
    ("check_blacklist", {"ip": st.sampled_from(IPS)}),
    ("lookup_dns", {"domain": st.sampled_from(DOMAINS), "type": st.sampled_from(QUERIES["type"])}),
    ("lookup_dns", {"ip": st.sampled_from(IPS)}),
    ("calculate_cidr", {"range": st.sampled_from(QUERIES["range"])}),
    ("profile_ip", {"ip": st.sampled_from(IPS)}),
    ("profile_ip", {"ip": st.sampled_from(IPS), "include": st.lists(st.sampled_from(PARTS), min_size=1, max_size=3)}),
    ("lookup_ips", {"ips": st.lists(st.sampled_from(IPS), min_size=1, max_size=5)}),
    ("lookup_ips", {"ips": st.lists(st.sampled_from(IPS), min_size=1, max_size=5), "include": st.just(PARTS)}),
    ("lookup_asn", {"asn": st.sampled_from(ASNS)}),
]


def _mcp_bodies() -> st.SearchStrategy[Any]:
    calls = st.one_of(
        *(
            st.fixed_dictionaries(arguments).map(
                lambda args, name=name: {"name": name, "arguments": args}  # type: ignore[misc]
            )
            for name, arguments in TOOL_ARGUMENTS
        )
    )
    tools_call = st.builds(
        lambda i, params: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params},
        st.integers(1, 10**6),
        calls,
    )
    others = st.sampled_from(
        [
            {"jsonrpc": "2.0", "id": "a", "method": "initialize",
             "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
    )  # fmt: skip
    return st.one_of(tools_call, others, st.lists(tools_call, min_size=1, max_size=4))


def meaningful_cases(operation: Any) -> st.SearchStrategy[Any]:
    """Cases of ``operation`` whose parameters (or /mcp body) come from the values above."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    values = {"ip": IPS, "asn": ASNS}
    path = {p.name: st.sampled_from(values.get(p.name, DOMAINS)) for p in operation.path_parameters}
    query = {q.name: st.sampled_from(QUERIES[q.name]) for q in operation.query if q.name in QUERIES}
    if path:
        parts["path_parameters"] = st.fixed_dictionaries(path)
    if query:
        parts["query"] = st.fixed_dictionaries(query)
    if operation.label == "POST /mcp":
        parts["body"] = _mcp_bodies()
    if operation.label == "POST /ip/batch":
        parts["body"] = BATCH_BODIES
    if not parts:
        return operation.as_strategy()
    return st.fixed_dictionaries(parts).flatmap(lambda chosen: operation.as_strategy(**chosen))


def no_internal_error(ctx: Any, response: Any, case: Any) -> None:
    """A bug never reaches a client: no HTTP 500, no JSON-RPC -32603, no ``internal_error``."""
    assert response.status_code != 500, f"500 from {case.operation.label}: {response.content[:300]!r}"
    text = response.content.decode("utf-8")  # every answer is UTF-8
    media_type = response.headers.get("content-type", [""])
    media_type = media_type[0] if isinstance(media_type, list) else media_type
    if not media_type.startswith(("application/json", "text/event-stream")):
        return  # /metrics, /docs
    if text.startswith("event: message"):
        text = text.partition("data: ")[2]
    if not text.strip():
        return
    answers = json.loads(text)
    for answer in answers if isinstance(answers, list) else [answers]:
        assert (answer.get("error") or {}).get("code") not in (-32603, "internal_error"), answer
        result = answer.get("result") or {}
        if result.get("isError"):
            error = json.loads(result["content"][0]["text"])["error"]
            assert error["code"] != "internal_error", error


def fuzz(
    schema: Any,
    url: str,
    *,
    mode: GenerationMode | None = None,
    examples: int = EXAMPLES,
    only: set[str] | None = None,
    excluded: tuple[Any, ...] = (),
    strategy: str = "both",
) -> Counter[int]:
    """Run every operation (or ``only`` those) for ``examples`` cases; returns the statuses answered.

    ``strategy``: ``"random"`` (schemathesis's own generation), ``"meaningful"`` (the
    values above), ``"both"`` (either, case by case; always random for invalid requests). ``mode``: positive
    (valid requests) unless told."""
    from schemathesis import GenerationMode
    from schemathesis.checks import negative_data_rejection, positive_data_acceptance

    if mode is None:
        mode = GenerationMode.POSITIVE
    statuses: Counter[int] = Counter()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12, [op.label for op in operations]
    for operation in operations:
        if only is not None and operation.label not in only:
            continue
        # positive_data_acceptance is left out: a schema-valid string is not a valid
        # address, and a valid address may be reserved (400/422 are the documented
        # answers); every other check applies.
        skip = [positive_data_acceptance, *excluded]
        if mode is GenerationMode.NEGATIVE and operation.label == "POST /mcp":
            skip.append(negative_data_rejection)  # JSON-RPC errors travel with HTTP 200 (docs/MCP.md)

        random_cases = operation.as_strategy(generation_mode=mode)
        if mode is GenerationMode.NEGATIVE or strategy == "random":
            cases = random_cases
        elif strategy == "meaningful":
            cases = meaningful_cases(operation)
        else:
            cases = st.one_of(random_cases, meaningful_cases(operation))
        check = _checker(cases, url, examples, skip, statuses)
        try:
            check()
        except Unsatisfiable:
            # Nothing schema-violating can be built for a free-form string path
            # parameter (or an operation without parameters): no negative cases.
            assert mode is GenerationMode.NEGATIVE, operation.label
        except Exception as exc:
            raise AssertionError(f"{operation.label} ({mode.value}): {exc}") from exc
    return statuses


def _checker(cases: st.SearchStrategy[Any], url: str, examples: int, skip: list[Any], statuses: Counter[int]) -> Any:
    @given(case=cases)
    @hypothesis_settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not RANDOM,
        database=None,
    )
    def check(case: Any) -> None:
        response = case.call_and_validate(
            base_url=url, timeout=10, excluded_checks=skip, additional_checks=[no_internal_error]
        )
        statuses[response.status_code] += 1
        CASES[case.operation.label] += 1

    return check


def start(net: FakeInternet, city_db: Path, asn_db: Path, data_dir: Path, **extra: str):
    env = {
        **net.env,
        "IPINTEL_GEOIP_CITY_DB": str(city_db),
        "IPINTEL_GEOIP_ASN_DB": str(asn_db),
        "IPINTEL_DATA_DIR": str(data_dir),
        "IPINTEL_RATE_LIMITS": "off",
        "IPINTEL_LOG_LEVEL": "ERROR",
        **extra,
    }
    return server_process(env)


@pytest.fixture(scope="module")
def fuzz_server(
    net: FakeInternet, city_db: Path, asn_db: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Popen]]:
    with start(net, city_db, asn_db, tmp_path_factory.mktemp("fuzz-data")) as (client, proc):
        yield str(client.base_url).rstrip("/"), proc


@pytest.fixture(scope="module")
def api_schema(fuzz_server: tuple[str, Popen]):
    import schemathesis

    url, _proc = fuzz_server
    return schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_valid_requests_keep_the_contract(api_schema, fuzz_server: tuple[str, Popen]) -> None:
    url, proc = fuzz_server
    statuses = fuzz(api_schema, url)
    assert proc.poll() is None, "the server died"
    assert statuses.total() >= 12 * 2, statuses
    assert {200, 400} <= set(statuses), statuses
    assert CASES["GET /ip/{ip}/profile"] >= 3 and CASES["POST /ip/batch"] >= 3, CASES
    print(f"valid: {statuses.total()} cases, statuses {dict(sorted(statuses.items()))}")


def test_invalid_requests_are_refused_as_documented(api_schema, fuzz_server: tuple[str, Popen]) -> None:
    from schemathesis import GenerationMode

    url, proc = fuzz_server
    statuses = fuzz(api_schema, url, mode=GenerationMode.NEGATIVE)
    assert proc.poll() is None, "the server died"
    assert statuses.total() >= 3, statuses  # /dns type, /cidr range, /mcp bodies at least
    print(f"invalid: {statuses.total()} cases, statuses {dict(sorted(statuses.items()))}")


@pytest.mark.parametrize(("faults", "shown_by", "status"), FAULT_SETS, ids=["+".join(f[0]) for f in FAULT_SETS])
def test_failing_upstreams_keep_the_contract(
    net: FakeInternet,
    city_db: Path,
    asn_db: Path,
    tmp_path: Path,
    faults: tuple[str, ...],
    shown_by: str,
    status: int,
) -> None:
    """502 and 504 are documented answers here (not_a_server_error would count them as
    failures); a 500 is not, and every answer must still match the document. A fresh
    server each time, so that no cached answer hides the fault."""
    import schemathesis
    from schemathesis.checks import not_a_server_error

    net.apply(*faults)
    with start(net, city_db, asn_db, tmp_path) as (client, proc):
        url = str(client.base_url).rstrip("/")
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        statuses = fuzz(
            schema,
            url,
            examples=max(3, EXAMPLES // 6),
            only=UPSTREAM_OPERATIONS,
            excluded=(not_a_server_error,),
            strategy="meaningful",
        )
        failed = client.get(shown_by)  # the fault is really there
        assert failed.status_code == status, failed.text
        assert proc.poll() is None, "the server died"
    assert status in statuses, statuses  # the fuzzing met the fault, not only 400s
    print(f"{'+'.join(faults)}: {statuses.total()} cases, statuses {dict(sorted(statuses.items()))}")


def test_rate_limited_answers_keep_the_contract(net: FakeInternet, city_db: Path, asn_db: Path, tmp_path: Path) -> None:
    """With a bucket of 2 per scope most answers are 429: their body, Retry-After and
    RateLimit-* headers must match the document as every other answer does."""
    import schemathesis

    limits = "general=2,dns=2,registry=2"
    with start(net, city_db, asn_db, tmp_path, IPINTEL_RATE_LIMITS=limits) as (client, proc):
        url = str(client.base_url).rstrip("/")
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        statuses = fuzz(schema, url, examples=max(3, EXAMPLES // 3))
        assert client.get("/cidr", params={"range": "10.0.0.0/8"}).status_code == 429
        assert proc.poll() is None, "the server died"
    assert 429 in statuses, statuses
    print(f"rate limited: {statuses.total()} cases, statuses {dict(sorted(statuses.items()))}")


def test_what_fuzzing_found_stays_fixed(api_schema, fuzz_server: tuple[str, Popen]) -> None:
    """`make fuzz` found `/dns/example.com?type=` answered 200 (as A, by design) while the
    document's enum refused "", and the enum listed upper case only while the route accepts
    any case: the document now allows both. Every type the route answers with 200 must be
    one the document allows, and no other."""
    import httpx
    import jsonschema

    url, _proc = fuzz_server
    parameters = api_schema.raw_schema["paths"]["/dns/{domain}"]["get"]["parameters"]
    documented = jsonschema.Draft202012Validator(next(p for p in parameters if p["name"] == "type")["schema"])
    for rtype in ["", "A", "AAAA", "MX", "TXT", "NS", "CNAME", "mx", "Aaaa", "cname", "PTR", "ANY", "x", "AA", "MXX"]:
        response = httpx.get(f"{url}/dns/example.com", params={"type": rtype}, timeout=10)
        assert (response.status_code == 200) == documented.is_valid(rtype), (rtype, response.status_code)


def _schemathesis_cli(url: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("schemathesis")), "run", f"{url}/openapi.json", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())


def test_schemathesis_every_check_including_the_allow_header(
    net: FakeInternet, city_db: Path, asn_db: Path, tmp_path: Path
) -> None:
    """Issue 23's target: schemathesis' own run (its coverage phase, which sends the methods a path does not
    document and checks the 405 and its Allow header) with every check it has. The caller is a public address
    (X-Forwarded-For from a trusted proxy) so that GET /ip has an answer. POST /mcp is run apart without
    positive_data_acceptance: a body the document allows with a 2026-07-28 header but no params._meta is one
    that revision requires the server to refuse (docs/MCP.md), and the document cannot tie a body to a header."""
    with start(net, city_db, asn_db, tmp_path, IPINTEL_TRUSTED_PROXIES="127.0.0.1/32") as (client, _proc):
        url = str(client.base_url).rstrip("/")
        common = ["--phases", "coverage", "-n", "5", "--request-timeout", "10", "-H", "X-Forwarded-For: 8.8.8.8"]
        rest = _schemathesis_cli(url, "--checks", "all", "--exclude-path", "/mcp", *common)
        assert rest.returncode == 0, rest.stdout[-6000:]
        mcp = _schemathesis_cli(
            url, "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--include-path", "/mcp", *common
        )
        assert mcp.returncode == 0, mcp.stdout[-6000:]
