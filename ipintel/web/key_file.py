"""The API key file (docs/API.md#authentication): one key a line, ``<name> sha256:<hex digest of the key>
[general=N,dns=N,registry=N]``, ``#`` starting a comment. It stores digests, never keys; a refusal names the
line, never its text (it may hold a digest, or a key pasted by mistake).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ipintel.infra.limiter import Quota
from ipintel.settings import ConfigError

NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")  # fullmatch
_DIGEST = re.compile(r"sha256:([0-9a-fA-F]{64})")  # fullmatch
MAX_FILE_BYTES = 1 << 20  # a key file is a few lines; a larger file is a mistake, not a key list
MAX_LIMIT = 1_000_000  # per minute, as IPINTEL_RATE_LIMITS


class KeyFileError(ConfigError):
    """A key file that cannot be used. The message names the file and the line, never a line's text."""


@dataclass(frozen=True, slots=True)
class KeyLine:
    """One key of the file: its name, the SHA-256 digest of the key, the limits it sets (only those given)."""

    name: str
    digest: bytes
    limits: Mapping[Quota, int] | None
    line: int


def parse_key_file(text: str, source: str = "IPINTEL_API_KEYS_FILE") -> list[KeyLine]:
    """The keys of a key file's text; a :class:`KeyFileError` naming ``source`` and the line number for the
    first line that cannot be used (the message never repeats the line: it may hold a digest, or a key pasted
    by mistake)."""
    keys: list[KeyLine] = []
    names: dict[str, int] = {}
    digests: dict[bytes, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.partition("#")[0].split()
        if not fields:
            continue

        def fail(reason: str, number: int = number) -> KeyFileError:
            return KeyFileError(f"{source} line {number}: {reason}")

        # No message repeats a field: a key pasted alone on a line is its first field (issue 23, point 4).
        if len(fields) > 3:
            raise fail("a line is <name> sha256:<hex digest> [general=N,dns=N,registry=N], with no more fields")
        if not NAME.fullmatch(fields[0]):
            raise fail("the name must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
        name = fields[0]
        if len(fields) < 2:
            raise fail(
                "a name without a digest: give sha256:<64 hexadecimal digits> after it (make api-key); if this "
                "line is a key pasted by mistake, remove it and revoke that key"
            )
        if looks_like_a_key(name):
            raise fail(
                "the name looks like a key (40 or more characters mixing upper case, lower case and digits): names "
                "are labels shown in logs and metrics; a key never belongs in this file (make api-key)"
            )
        digest_match = _DIGEST.fullmatch(fields[1])
        if digest_match is None:
            raise fail("the digest must be sha256: followed by 64 hexadecimal digits (make api-key)")
        digest = bytes.fromhex(digest_match.group(1))
        limits = _parse_limits(fields[2], name, fail) if len(fields) == 3 else None
        if name in names:
            raise fail(f"the name is already used on line {names[name]}")
        if digest in digests:
            raise fail(f"the key is the same key as on line {digests[digest]}")
        names[name] = digests[digest] = number
        keys.append(KeyLine(name, digest, limits, number))
    # A name whose SHA-256 is a digest of the file is that key itself, written where its name goes.
    for line in keys:
        if hashlib.sha256(line.name.encode()).digest() in digests:
            raise KeyFileError(f"{source} line {line.line}: the name is a key of this file: never write a key here")
    return keys


def looks_like_a_key(name: str) -> bool:
    """A name of 40+ characters mixing upper case, lower case and digits: what ``make api-key`` prints (43
    characters of URL-safe base64), not what anyone names a client."""
    return (
        len(name) >= 40
        and any(c.isupper() for c in name)
        and any(c.islower() for c in name)
        and any(c.isdigit() for c in name)
    )


def _parse_limits(text: str, name: str, fail: Any) -> dict[Quota, int]:
    limits: dict[Quota, int] = {}
    for item in text.split(","):
        quota, sep, value = item.partition("=")
        if not sep or quota.lower() not in tuple(Quota) or not value.isdigit():
            raise fail(f"the limits must be scope=N items, comma separated, scopes {', '.join(Quota)}")
        if Quota(quota.lower()) in limits:
            raise fail(f"the limits name the {quota.lower()} scope twice")
        number = int(value)
        if not 1 <= number <= MAX_LIMIT:
            raise fail(f"the {quota.lower()} limit must be 1 to {MAX_LIMIT} per minute")
        limits[Quota(quota.lower())] = number
    return limits


def read_key_file(path: Path) -> list[KeyLine]:
    """The keys of the file at ``path``; a :class:`KeyFileError` when it cannot be read or used."""
    source = f"IPINTEL_API_KEYS_FILE {path}"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise KeyFileError(f"{source}: is over {MAX_FILE_BYTES} bytes; a key file holds a line per key")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise KeyFileError(f"{source} line {line}: is not UTF-8 text") from None
    return parse_key_file(text, source)
