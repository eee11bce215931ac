"""A package's files from the npm registry, without npm: its metadata, its tarball, checked against its integrity.

Machines without the internet often still reach a package registry; ip-location-db publishes DB-IP's
Lite databases and the RouteViews/DB-IP AS table there, so the registry is the fallback source. The registry
is configuration (``IPINTEL_NPM_REGISTRY``, else npm's own ``npm_config_registry``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tarfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ipintel.geodata.http import download, get_bytes

DEFAULT_REGISTRY = "https://registry.npmjs.org"


class PackageError(Exception):
    """The registry's answer is not a usable package (missing fields, wrong integrity, missing file)."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    tarball: str
    integrity: str  # "sha512-<base64>", as the registry states it


def latest(registry: str, name: str, *, timeout: float) -> Package:
    """The metadata of the package's ``latest`` version."""
    url = f"{registry.rstrip('/')}/{urllib.parse.quote(name, safe='@')}/latest"
    try:
        doc = json.loads(get_bytes(url, timeout=timeout, max_bytes=1 << 20))
        dist = doc["dist"]
        return Package(name, str(doc["version"]), str(dist["tarball"]), str(dist["integrity"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise PackageError(f"{url}: not a package document ({exc})") from None


def _check_integrity(path: Path, integrity: str) -> None:
    algorithm, _, expected = integrity.partition("-")
    if algorithm not in ("sha512", "sha384", "sha256"):
        raise PackageError(f"unsupported integrity {algorithm!r}")
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if base64.b64encode(digest.digest()).decode() != expected:
        raise PackageError(f"the tarball does not match its {algorithm} integrity")


def fetch_files(package: Package, names: list[str], into: Path, *, timeout: float, max_bytes: int) -> dict[str, Path]:
    """Download the tarball, check its integrity, and extract ``names`` (paths inside ``package/``) into ``into``."""
    tarball = into / "package.tgz"
    download(package.tarball, tarball, timeout=timeout, max_bytes=max_bytes)
    _check_integrity(tarball, package.integrity)
    found: dict[str, Path] = {}
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            for member in archive:
                name = member.name.removeprefix("package/")
                if name in names and member.isfile():
                    source = archive.extractfile(member)
                    if source is None:
                        continue
                    target = into / Path(name).name
                    with source, target.open("wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                    found[name] = target
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise PackageError(f"{package.tarball}: not a readable tarball ({exc})") from None
    finally:
        tarball.unlink(missing_ok=True)
    missing = [n for n in names if n not in found]
    if missing:
        raise PackageError(f"{package.name}@{package.version} has no {', '.join(missing)}")
    return found
