"""Blocking HTTP GETs for the fetch command: a timeout on every connect and read, and a size cap.

The fetch runs once before the service (``make run``, the init container) or beside it (the refresh
sidecar), never in the event loop, so the standard library's client is enough and keeps the command free
of the service's session machinery.
"""

from __future__ import annotations

import gzip
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class FetchError(Exception):
    """A source that did not answer with a usable body: unreachable, an HTTP error, or too large."""


def _open(url: str, timeout: float) -> Any:
    if not url.startswith(("https://", "http://")):
        raise FetchError(f"{url}: only http(s) URLs are fetched")
    try:
        return urllib.request.urlopen(url, timeout=timeout)  # the scheme is checked above
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: unreachable ({getattr(exc, 'reason', exc)})") from None


def download(url: str, target: Path, *, timeout: float, max_bytes: int) -> None:
    """Stream ``url`` into ``target``; more than ``max_bytes`` is an error (the partial file is removed)."""
    with _open(url, timeout) as response, target.open("wb") as out:
        copied = 0
        try:
            while block := response.read(1 << 20):
                copied += len(block)
                if copied > max_bytes:
                    raise FetchError(f"{url}: larger than {max_bytes // (1 << 20)} MiB")
                out.write(block)
        except (OSError, TimeoutError) as exc:
            target.unlink(missing_ok=True)
            raise FetchError(f"{url}: the transfer broke ({exc})") from None
        except FetchError:
            target.unlink(missing_ok=True)
            raise


def get_bytes(url: str, *, timeout: float, max_bytes: int) -> bytes:
    with _open(url, timeout) as response:
        try:
            body: bytes = response.read(max_bytes + 1)
        except (OSError, TimeoutError) as exc:
            raise FetchError(f"{url}: the transfer broke ({exc})") from None
    if len(body) > max_bytes:
        raise FetchError(f"{url}: larger than {max_bytes} bytes")
    return body


def gunzip(source: Path, target: Path) -> None:
    try:
        with gzip.open(source, "rb") as packed, target.open("wb") as out:
            shutil.copyfileobj(packed, out, 1 << 20)
    except (OSError, EOFError) as exc:
        raise FetchError(f"{source.name}: not a gzip file ({exc})") from None
