"""The deployment surface: k8s/ manifests rendered and validated offline, their security and
consistency with the code; the image recipe; the GeoIP refresh script.

Rendering uses ``kubectl kustomize`` when it is installed and the built-in
renderer of scripts/k8s-validate otherwise; when kubectl is there, both are
compared, so the fallback is known to render the same objects.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import maxminddb
import mmdb_writer
import pytest

from ipintel.__main__ import hypercorn_config
from ipintel.settings import Settings
from tests.support.mmdb import write_city_db

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "k8s/base"
PRODUCTION = ROOT / "k8s/overlays/production"

Doc = dict[str, Any]


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
    return find(docs, "Deployment")["spec"]["template"]["spec"]  # type: ignore[no-any-return]


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
    versions = k8s_validate.kubernetes_versions()
    assert versions[0] == "1.29" and len(versions) == 2
    assert k8s_validate.validate(docs, versions) == []


def test_schema_validation_is_strict(base: list[Doc]) -> None:
    """A misspelt field is an error, not silently dropped by the API server."""
    deployment = find(base, "Deployment")
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 3}}
    errors = k8s_validate.validate([broken], ["1.29"])
    assert len(errors) == 1 and "replica" in errors[0]


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
    assert egress_ports == {(53, "UDP"), (53, "TCP"), (443, "TCP")}
    assert all(rule.get("ports") for rule in policy["egress"]), "no rule may open every port"


# Configuration -------------------------------------------------------------------------------


class _Recording(dict[str, str]):
    """An environment that remembers which variables were asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
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
    ingress = find(production, "Ingress")
    paths = {p["path"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert {"/ip", "/dns", "/whois", "/blacklist", "/cidr", "/mcp"} <= paths
    assert not paths & {"/", "/metrics", "/healthz", "/readyz"}, "operations endpoints stay inside the cluster"
    assert "upstream-hash-by" in " ".join(ingress["metadata"]["annotations"])
    policy_sources = find(production, "NetworkPolicy")["spec"]["ingress"][0]["from"]
    assert {s["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for s in policy_sources} == {
        "ingress-nginx",
        "monitoring",
    }


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


# GeoIP refresh --------------------------------------------------------------------------------


def _db_built_at(path: Path, epoch: int, city: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(mmdb_writer.time, "time", lambda: float(epoch))
    return write_city_db(path, {"8.8.8.0/24": {"city": {"names": {"en": city}}}})


def _city(path: Path) -> str:
    with maxminddb.open_database(str(path)) as reader:
        record = reader.get("8.8.8.8")
    assert isinstance(record, dict)
    return str(record["city"]["names"]["en"])


def test_refresh_installs_only_a_newer_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refresh = load_script("refresh-geoip")
    live = _db_built_at(tmp_path / "live.mmdb", 1_700_000_000, "Current", monkeypatch)

    older = _db_built_at(tmp_path / "older.mmdb", 1_600_000_000, "Older", monkeypatch)
    assert refresh.install_if_newer(older, live) is False
    assert _city(live) == "Current" and not older.exists()

    broken = tmp_path / "broken.mmdb"
    broken.write_bytes(b"not a database")
    assert refresh.install_if_newer(broken, live) is False
    assert _city(live) == "Current" and not broken.exists()

    newer = _db_built_at(tmp_path / "newer.mmdb", 1_800_000_000, "Newer", monkeypatch)
    assert refresh.install_if_newer(newer, live) is True
    assert _city(live) == "Newer" and not newer.exists()

    missing = tmp_path / "missing.mmdb"
    first = _db_built_at(tmp_path / "first.mmdb", 1_600_000_000, "First", monkeypatch)
    assert refresh.install_if_newer(first, missing) is True, "anything readable beats no database"
