"""The deployment surface: k8s/ manifests rendered and validated offline, their security and
consistency with the code; the image recipe; the GeoIP refresh script.

Rendering uses ``kubectl kustomize`` when it is installed and the built-in
renderer of scripts/k8s-validate otherwise; when kubectl is there, both are
compared, so the fallback is known to render the same objects.
"""

from __future__ import annotations

import copy
import importlib.util
import ipaddress
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest

from ipintel.__main__ import hypercorn_config
from ipintel.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "k8s/base"
PRODUCTION = ROOT / "k8s/overlays/production"
SCHEMAS = ROOT / "k8s/schemas"

Doc = dict[str, Any]

pytestmark = pytest.mark.k8s


def load_script(name: str) -> ModuleType:
    """A script of scripts/ (no .py suffix) as a module."""
    loader = SourceFileLoader(name.replace("-", "_"), str(ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


k8s_validate = load_script("k8s-validate")


@pytest.fixture(scope="module")
def base() -> list[Doc]:
    return k8s_validate.render(BASE)


@pytest.fixture(scope="module")
def production() -> list[Doc]:
    return k8s_validate.render(PRODUCTION)


def find(docs: list[Doc], kind: str, name: str = "ipintel") -> Doc:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def pod_spec(docs: list[Doc]) -> Doc:
    return find(docs, "Deployment")["spec"]["template"]["spec"]


def containers(spec: Doc) -> Iterator[Doc]:
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def container(spec: Doc, name: str) -> Doc:
    return next(c for c in containers(spec) if c["name"] == name)


# Rendering and schema validation -----------------------------------------------------------


@pytest.mark.parametrize("renderer", ["auto", "python"])
@pytest.mark.parametrize("directory", [BASE, PRODUCTION], ids=["base", "production"])
def test_manifests_render_and_validate_against_the_kubernetes_schemas(directory: Path, renderer: str) -> None:
    docs = k8s_validate.render(directory, renderer)
    assert {d["kind"] for d in docs} >= {
        "Deployment",
        "Service",
        "ConfigMap",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
    }
    if directory == PRODUCTION:
        assert {d["kind"] for d in docs} >= {"Gateway", "HTTPRoute", "BackendTrafficPolicy"}
        assert "Ingress" not in {d["kind"] for d in docs}, "ingress-nginx is retired: the Gateway API replaces it"
        custom = [d for d in docs if k8s_validate.crd_schema_file(d) is not None]
        assert {d["kind"] for d in custom} == {"Gateway", "HTTPRoute", "BackendTrafficPolicy"}
    versions = k8s_validate.kubernetes_versions()
    assert versions[0] == "1.29" and len(versions) == 2
    assert k8s_validate.validate(docs, versions) == []


def test_schema_validation_is_strict(base: list[Doc]) -> None:
    """A misspelt field is an error, not silently dropped by the API server."""
    deployment = find(base, "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 3}}
    errors = k8s_validate.validate([broken], ["1.29"])
    assert len(errors) == 1 and "replica" in errors[0]


def _edited(doc: Doc, edit: Any) -> Doc:
    broken = copy.deepcopy(doc)
    edit(broken)
    return broken


@pytest.mark.parametrize(
    ("kind", "name", "edit", "expected"),
    [
        # a misspelt field, at any depth
        ("HTTPRoute", "ipintel", lambda d: d["spec"]["rules"][0].update(backendRef=[]), "backendRef"),
        ("Gateway", "ipintel", lambda d: d["spec"]["listeners"][0].update(protocl="HTTPS"), "protocl"),
        (
            "BackendTrafficPolicy",
            "ipintel",
            lambda d: d["spec"]["loadBalancer"].update(consistenHash={}),
            "consistenHash",
        ),
        # a value the CRD does not allow
        (
            "BackendTrafficPolicy",
            "ipintel",
            lambda d: d["spec"]["loadBalancer"]["consistentHash"].update(type="SourceIp"),
            "SourceIp",
        ),
        ("Gateway", "ipintel", lambda d: d["spec"]["listeners"][0].update(port=70000), "70000"),
        ("HTTPRoute", "ipintel", lambda d: d["spec"]["rules"][0]["matches"][0]["path"].update(type="Prefix"), "Prefix"),
        # the wrong version of the kind, and metadata (ObjectMeta, as for built-in kinds)
        ("HTTPRoute", "ipintel", lambda d: d.update(kind="HTTPRoutes"), "HTTPRoutes"),
        ("Gateway", "ipintel", lambda d: d["metadata"].update(lables={}), "lables"),
    ],
)
def test_custom_resources_are_validated_strictly(
    production: list[Doc], kind: str, name: str, edit: Any, expected: str
) -> None:
    broken = _edited(find(production, kind, name), edit)
    errors = k8s_validate.validate([broken], ["1.29"])
    assert errors and all(expected in error for error in errors), errors


def test_a_custom_resource_without_a_schema_is_an_error() -> None:
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    assert k8s_validate.crd_schema_file(unknown) is None
    errors = k8s_validate.validate([unknown], ["1.29"])
    assert len(errors) == 1 and "no schema" in errors[0]


def test_crd_schemas_are_generated_from_the_committed_sources() -> None:
    """The BackendTrafficPolicy schema is what scripts/k8s-crd-schemas makes of the CRD in k8s/schemas/src/;
    every schema file says where it comes from, and k8s/schemas/README.md names each source and licence."""
    generate = load_script("k8s-crd-schemas")
    for source in generate.CRD_SOURCES:
        for name, schema in generate.crd_schemas(source).items():
            assert json.loads((SCHEMAS / name).read_text()) == schema, f"regenerate {name}: scripts/k8s-crd-schemas"
    readme = (SCHEMAS / "README.md").read_text()
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        assert "generated by scripts/k8s-crd-schemas" in schema["$comment"], path.name
        assert path.name in readme, f"{path.name}: its source is not described in k8s/schemas/README.md"
    assert "Apache-2.0" in readme and (SCHEMAS / "LICENSE-Apache-2.0").is_file()


def test_strict_conversion_closes_objects_but_not_open_maps_or_preserved_fields() -> None:
    generate = load_script("k8s-crd-schemas")
    converted = generate.strict(
        {
            "type": "object",
            "properties": {
                "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
                "map": {"type": "object", "additionalProperties": {"type": "string"}},
                "kept": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "port": {"type": "integer", "maximum": 65536, "exclusiveMaximum": True},
            },
            "x-kubernetes-validations": [{"rule": "true"}],
        }
    )
    assert converted["additionalProperties"] is False
    assert converted["properties"]["closed"]["additionalProperties"] is False
    assert converted["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in converted["properties"]["kept"]
    assert converted["properties"]["port"] == {"type": "integer", "exclusiveMaximum": 65536}
    assert "x-kubernetes-validations" not in converted


@pytest.mark.skipif(k8s_validate.kustomize_command() is None, reason="kubectl/kustomize not installed")
@pytest.mark.parametrize("directory", [BASE, PRODUCTION], ids=["base", "production"])
def test_builtin_renderer_agrees_with_kustomize(directory: Path) -> None:
    def by_name(docs: list[Doc]) -> dict[tuple[str, str], Doc]:
        return {(d["kind"], d["metadata"]["name"]): d for d in docs}

    assert by_name(k8s_validate.render_python(directory)) == by_name(k8s_validate.render(directory, "kubectl"))


# Security ----------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", ["base", "production"])
def test_every_container_is_locked_down(overlay: str, request: pytest.FixtureRequest) -> None:
    spec = pod_spec(request.getfixturevalue(overlay))
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] != 0
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False, "a Service named ipintel would inject IPINTEL_PORT=tcp://..."
    assert "hostNetwork" not in spec and "hostPID" not in spec
    names = []
    for c in containers(spec):
        names.append(c["name"])
        security = c["securityContext"]
        assert security["allowPrivilegeEscalation"] is False, c["name"]
        assert security["readOnlyRootFilesystem"] is True, c["name"]
        assert security["capabilities"] == {"drop": ["ALL"]}, c["name"]
        assert security.get("runAsNonRoot", pod_security["runAsNonRoot"]) is True, c["name"]
        assert security.get("runAsUser", pod_security["runAsUser"]) != 0, c["name"]
        assert "privileged" not in security
        for kind in ("requests", "limits"):
            assert set(c["resources"][kind]) == {"cpu", "memory"}, f"{c['name']}: {kind}"
    assert names == ["geoip-fetch", "resolver", "geoip-refresh", "ipintel"]


def test_python_containers_have_a_writable_tmp_and_the_data_volume(base: list[Doc]) -> None:
    spec = pod_spec(base)
    volumes = {v["name"]: v for v in spec["volumes"]}
    for name in ("geoip-fetch", "geoip-refresh", "ipintel"):
        mounts = {m["mountPath"]: m["name"] for m in container(spec, name)["volumeMounts"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], name
        assert mounts["/data"] == "geoip" and "emptyDir" in volumes["geoip"], name


def test_probes_and_graceful_termination(base: list[Doc]) -> None:
    spec = pod_spec(base)
    api = container(spec, "ipintel")
    assert api["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert api["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert api["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert [p["containerPort"] for p in api["ports"] if p["name"] == "http"] == [8080]
    pre_stop = api["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    # The pod is killed only after the preStop sleep and hypercorn's whole drain.
    drain = hypercorn_config("0.0.0.0", 8080).graceful_timeout
    assert spec["terminationGracePeriodSeconds"] > int(pre_stop[1]) + drain
    # The sidecars are native sidecars: started before, stopped after the API container.
    for name in ("resolver", "geoip-refresh"):
        assert container(spec, name)["restartPolicy"] == "Always"
    assert "restartPolicy" not in container(spec, "geoip-fetch"), "a plain init container: it must finish"


def test_replicas_spread_budget_and_autoscaling(base: list[Doc], production: list[Doc]) -> None:
    deployment = find(base, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    keys = {c["topologyKey"] for c in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]}
    assert keys == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    assert find(base, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = find(base, "Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    hpa = find(base, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ipintel"}
    assert hpa["spec"]["minReplicas"] == 3
    assert (
        find(production, "Deployment")["spec"]["replicas"]
        == find(production, "HorizontalPodAutoscaler")["spec"]["minReplicas"]
    )


@pytest.mark.parametrize("overlay", ["base", "production"])
def test_network_policy_admits_8080_and_lets_out_only_dns_and_https(
    overlay: str, request: pytest.FixtureRequest
) -> None:
    docs = request.getfixturevalue(overlay)
    policy = find(docs, "NetworkPolicy")["spec"]
    labels = find(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    ingress_ports = {(p["port"], p["protocol"]) for rule in policy["ingress"] for p in rule["ports"]}
    assert ingress_ports == {(8080, "TCP")}
    assert all(rule.get("ports") for rule in policy["ingress"]), "no rule may open every port"
    egress_ports = {(p["port"], p["protocol"]) for rule in policy["egress"] for p in rule["ports"]}
    assert all(rule.get("ports") for rule in policy["egress"]), "no rule may open every port"
    if overlay == "base":
        assert egress_ports == {(53, "UDP"), (53, "TCP"), (443, "TCP")}
        return
    # Production adds Valkey's port, towards the Valkey pods only.
    assert egress_ports == {(53, "UDP"), (53, "TCP"), (443, "TCP"), (6379, "TCP")}
    (to_redis,) = [r for r in policy["egress"] if any(p["port"] == 6379 for p in r["ports"])]
    assert to_redis["ports"] == [{"port": 6379, "protocol": "TCP"}]
    redis_labels = find(docs, "Deployment", "ipintel-redis")["spec"]["template"]["metadata"]["labels"]
    assert to_redis["to"] and all(
        set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"].items() <= redis_labels.items()
        for peer in to_redis["to"]
    )
    assert not labels.items() <= redis_labels.items(), "the selector of the Valkey pods must not match the API pods"


# Configuration -------------------------------------------------------------------------------


class _Recording(dict[str, str]):
    """An environment that remembers which variables were asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)


def test_config_map_sets_every_variable_and_parses(base: list[Doc], production: list[Doc]) -> None:
    recording = _Recording()
    Settings.from_env(recording)
    every_variable = {name for name in recording.asked if name.startswith("IPINTEL_")}
    api = container(pod_spec(base), "ipintel")
    from_secret = {e["name"] for e in api["env"] if e["valueFrom"]["secretKeyRef"].get("optional") is True}
    assert from_secret == {"IPINTEL_ABUSEIPDB_KEY", "IPINTEL_SPAMHAUS_DQS_KEY"}
    assert api["envFrom"] == [{"configMapRef": {"name": "ipintel-config"}}]
    # IPINTEL_REDIS_URL (shared state) is set by the manifests before every version of the settings
    # parser reads it; once it does, it is part of every_variable anyway.
    every_variable |= {"IPINTEL_REDIS_URL"}
    for docs in (base, production):
        data = find(docs, "ConfigMap", "ipintel-config")["data"]
        assert set(data) | from_secret == every_variable
        settings = Settings.from_env(data)  # production values are valid values
        assert settings.host == "0.0.0.0" and settings.port == 8080
        assert settings.city_db_path == Path("/data/dbip-city-lite.mmdb")
        assert settings.log_format == "json"
        assert settings.trusted_proxies and all(net.is_private for net in settings.trusted_proxies)
    production_proxies = Settings.from_env(find(production, "ConfigMap", "ipintel-config")["data"]).trusted_proxies
    assert production_proxies == (ipaddress.ip_network("10.64.0.0/14"),)


def test_dns_goes_to_the_resolver_sidecar(base: list[Doc]) -> None:
    settings = Settings.from_env(find(base, "ConfigMap", "ipintel-config")["data"])
    resolver = container(pod_spec(base), "resolver")
    resolver_ports = {p["containerPort"] for p in resolver["ports"]}
    assert settings.dns_servers == (("127.0.0.1", 5353),) and resolver_ports == {5353}
    conf = find(base, "ConfigMap", "ipintel-resolver")["data"]["unbound.conf"]
    assert conf == (BASE / "resolver/unbound.conf").read_text(), "the ConfigMap is the file the image bakes in"
    assert re.search(r"^\s*port: 5353$", conf, re.M)
    assert re.search(r"^\s*access-control: 127\.0\.0\.0/8 allow$", conf, re.M)
    assert re.search(r"^\s*access-control: 0\.0\.0\.0/0 refuse$", conf, re.M)
    assert resolver["args"][-1] == "/etc/unbound/ipintel/unbound.conf"
    mounts = {m["mountPath"]: m["name"] for m in resolver["volumeMounts"]}
    assert mounts["/etc/unbound/ipintel"] == "resolver-config"


@pytest.mark.skipif(shutil.which("unbound-checkconf") is None, reason="unbound is not installed")
def test_unbound_accepts_the_resolver_config() -> None:
    result = subprocess.run(
        ["unbound-checkconf", str(BASE / "resolver/unbound.conf")], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_overlay(production: list[Doc]) -> None:
    assert all(d["metadata"].get("namespace") == "ipintel" for d in production if d["kind"] != "Namespace")
    namespace = find(production, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    images = {c["image"] for c in containers(pod_spec(production))}
    assert images == {
        "registry.example.com/ipintel/ipintel:0.1.0",
        "registry.example.com/ipintel/ipintel-resolver:0.1.0",
    }
    policy_sources = find(production, "NetworkPolicy")["spec"]["ingress"][0]["from"]
    # Issue 23, point 9: the pod network is trusted for X-Forwarded-For, so a whole namespace admitted (any pod
    # of monitoring) could forge client addresses: each source is a namespace AND its proxy or scraper pods.
    assert {
        (
            s["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            s["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        )
        for s in policy_sources
    } == {("envoy-gateway-system", "envoy"), ("monitoring", "prometheus")}


def test_production_is_published_through_the_gateway_api(production: list[Doc]) -> None:
    assert not any("nginx.ingress.kubernetes.io" in str(d["metadata"].get("annotations", {})) for d in production)
    gateway = find(production, "Gateway")
    assert gateway["apiVersion"] == "gateway.networking.k8s.io/v1" and gateway["spec"]["gatewayClassName"]
    listeners = {listener["name"]: listener for listener in gateway["spec"]["listeners"]}
    # TLS as the Ingress had it: terminated at the Gateway, the certificate in Secret ipintel-tls.
    https = listeners["https"]
    assert (https["protocol"], https["port"]) == ("HTTPS", 443)
    assert https["tls"]["mode"] == "Terminate"
    assert https["tls"]["certificateRefs"] == [{"kind": "Secret", "name": "ipintel-tls"}]
    for listener in listeners.values():
        assert listener["hostname"] == "ipintel.example.com"
        assert listener["allowedRoutes"] == {"namespaces": {"from": "Same"}}

    service = find(production, "Service")
    service_ports = {p["port"] for p in service["spec"]["ports"]}
    route = find(production, "HTTPRoute")
    assert route["spec"]["parentRefs"] == [{"name": "ipintel", "sectionName": "https"}]
    paths = {m["path"]["value"] for rule in route["spec"]["rules"] for m in rule["matches"]}
    assert {"/ip", "/asn", "/dns", "/whois", "/blacklist", "/cidr", "/mcp", "/openapi.json", "/docs"} <= paths
    assert not paths & {"/", "/metrics", "/healthz", "/readyz", "/page"}, "operations endpoints stay inside"
    for rule in route["spec"]["rules"]:
        assert [(b["name"], b["port"]) for b in rule["backendRefs"]] == [("ipintel", 80)]
    # The references the CRD schemas cannot check resolve inside the overlay.
    assert service["metadata"]["name"] == "ipintel" and 80 in service_ports
    for ref in (
        route["spec"]["parentRefs"] + find(production, "HTTPRoute", "ipintel-https-redirect")["spec"]["parentRefs"]
    ):
        assert ref["name"] == gateway["metadata"]["name"] and ref["sectionName"] in listeners
    # Plain HTTP only redirects.
    redirect = find(production, "HTTPRoute", "ipintel-https-redirect")
    assert redirect["spec"]["parentRefs"] == [{"name": "ipintel", "sectionName": "http"}]
    (rule,) = redirect["spec"]["rules"]
    assert "backendRefs" not in rule
    assert rule["filters"] == [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301}}]

    # Client-address affinity (Envoy Gateway), on the API route.
    policy = find(production, "BackendTrafficPolicy")
    assert policy["apiVersion"] == "gateway.envoyproxy.io/v1alpha1"
    assert policy["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "ipintel"}
    ]
    assert policy["spec"]["loadBalancer"] == {"type": "ConsistentHash", "consistentHash": {"type": "SourceIP"}}
    assert policy["spec"]["targetRefs"][0]["name"] == route["metadata"]["name"]


def test_production_shares_state_in_valkey(production: list[Doc]) -> None:
    """A Valkey Deployment that the API pods (and only they) reach through IPINTEL_REDIS_URL."""
    url = urlsplit(find(production, "ConfigMap", "ipintel-config")["data"]["IPINTEL_REDIS_URL"])
    service = find(production, "Service", "ipintel-redis")
    deployment = find(production, "Deployment", "ipintel-redis")
    assert url.scheme == "redis" and url.hostname == service["metadata"]["name"]
    assert url.port in {p["port"] for p in service["spec"]["ports"]}
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    api_labels = find(production, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= api_labels.items(), "the Valkey Service must not select API pods"

    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 1
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    (valkey,) = spec["containers"]
    security = valkey["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    for kind in ("requests", "limits"):
        assert set(valkey["resources"][kind]) == {"cpu", "memory"}
    # Caches and buckets only: no persistence, and a memory cap below the container's limit.
    args = valkey["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory-policy") + 1] == "allkeys-lru"
    maxmemory_mb = int(args[args.index("--maxmemory") + 1].removesuffix("mb"))
    assert valkey["resources"]["limits"]["memory"] == "256Mi" and maxmemory_mb < 256
    volumes = {v["name"]: v for v in spec["volumes"]}
    (data,) = valkey["volumeMounts"]
    assert data["mountPath"] == "/data" and "emptyDir" in volumes[data["name"]]
    assert [p["containerPort"] for p in valkey["ports"]] == [6379]
    for probe in ("readinessProbe", "livenessProbe"):
        assert "ping" in " ".join(valkey[probe]["exec"]["command"]), probe
    assert valkey["startupProbe"]["tcpSocket"]["port"] == "redis"

    policy = find(production, "NetworkPolicy", "ipintel-redis")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"] and not policy.get("egress")
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": 6379, "protocol": "TCP"}]
    (peer,) = rule["from"]
    assert set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"].items() <= api_labels.items()


def test_autoscaling_needs_no_limit_arithmetic_with_shared_state(base: list[Doc], production: list[Doc]) -> None:
    """The limits are shared in Valkey, so the HPA scales on CPU alone, whatever its maxReplicas."""
    data = find(production, "ConfigMap", "ipintel-config")["data"]
    assert data["IPINTEL_REDIS_URL"]
    assert data["IPINTEL_RATE_LIMITS"] == find(base, "ConfigMap", "ipintel-config")["data"]["IPINTEL_RATE_LIMITS"]
    hpa = find(production, "HorizontalPodAutoscaler")["spec"]
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    assert hpa["minReplicas"] < hpa["maxReplicas"]


# The image -----------------------------------------------------------------------------------


def _final_stage(containerfile: str) -> str:
    return re.split(r"^FROM ", containerfile, flags=re.M)[-1]


def test_containerfile() -> None:
    text = (ROOT / "Containerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?", text, re.M)
    assert len(stages) == 2 and stages[0][1] == "builder", "multi-stage: builder, then final"
    final = _final_stage(text)
    assert "python:3.11-slim" in re.search(r"ARG PYTHON_IMAGE=(\S+)", text).group(1)  # type: ignore[union-attr]
    assert "pip wheel" in text.split("FROM ${PYTHON_IMAGE}\n")[0], "wheels are built in the builder"
    assert "build-essential" not in final and "gcc" not in final, "no compiler in the final stage"
    assert "--no-index" in final, "the final stage installs only the builder's wheels"
    user = re.findall(r"^USER (\S+)", final, re.M)
    assert user and user[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*\n?.*CMD \[\"python\"", final, re.M), "the health check uses python, not curl"
    assert "/healthz" in final
    assert "IPINTEL_HOST=0.0.0.0" in final and "IPINTEL_DATA_DIR=/data" in final
    assert re.search(r'^VOLUME \["/data"\]', final, re.M)
    assert re.search(r"^EXPOSE 8080", final, re.M)
    assert "org.opencontainers.image.title" in final and "DB-IP" in final and "CC BY 4.0" in final
    for script in ("fetch-geoip", "refresh-geoip"):
        assert script in final
        assert (ROOT / "scripts" / script).stat().st_mode & 0o111, f"{script} is executable"


def test_dockerignore_keeps_the_context_small() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*", "an allow-list"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert not allowed & {".venv", "data", ".git", "tests"}
    # Everything the two recipes COPY is allowed in.
    for recipe in (ROOT / "Containerfile", BASE / "resolver/Containerfile"):
        for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", recipe.read_text(), re.M):
            for source in sources.split():
                assert any(source == a or source.startswith(a + "/") for a in allowed), f"{recipe.name}: {source}"
                assert (ROOT / source).exists()


def test_make_image_says_clearly_when_there_is_no_container_engine(tmp_path: Path) -> None:
    path = "/usr/bin:/bin"
    if shutil.which("docker", path=path) or shutil.which("podman", path=path) or not shutil.which("make"):
        pytest.skip("a container engine is installed in /usr/bin: `make image` would really build")
    result = subprocess.run(
        ["make", "-s", "image"], cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PATH": path}
    )
    assert result.returncode != 0
    assert "no usable container engine" in result.stderr


def test_production_valkey_requires_a_password_the_api_reads_from_a_secret(production: list[Doc]) -> None:
    """Issue 23, point 12: the production Valkey ran without a password, protected by the NetworkPolicy alone."""
    (valkey,) = find(production, "Deployment", "ipintel-redis")["spec"]["template"]["spec"]["containers"]
    args = valkey["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in valkey["env"]}
    assert env["REDIS_PASSWORD"] == env["REDISCLI_AUTH"] == {"name": "ipintel-redis", "key": "password"}
    config = find(production, "ConfigMap", "ipintel-config")["data"]
    assert "@" not in config["IPINTEL_REDIS_URL"]  # no password in the config map
    path = config["IPINTEL_REDIS_PASSWORD_FILE"]
    api = find(production, "Deployment", "ipintel")["spec"]["template"]["spec"]
    (mount,) = [
        m for c in api["containers"] for m in c.get("volumeMounts", []) if path.startswith(m["mountPath"] + "/")
    ]
    (volume,) = [v for v in api["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "ipintel-redis" and mount["readOnly"] is True
