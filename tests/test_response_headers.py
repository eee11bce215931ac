"""Issue 23, points 11 and 12: the headers that keep answers out of other people's caches, browsers' guesses
and other sites' frames (docs/API.md#conventions)."""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

from ipintel.settings import Settings
from tests.support.app import running_app

KEY = secrets.token_urlsafe(32)


async def test_every_answer_says_nosniff_and_per_caller_answers_are_private(settings: Settings, tmp_path: Path) -> None:
    async with running_app(settings, client=("8.8.8.8", 1)) as client:
        for path in ("/ip/8.8.8.8", "/cidr?range=10.0.0.0/8", "/nowhere", "/healthz", "/openapi.json", "/ip"):
            answer = await client.get(path)
            assert answer.headers["x-content-type-options"] == "nosniff", path
        own = await client.get("/ip")  # the caller's own address: an answer for this caller only
        assert own.status_code == 200 and own.json()["data"]["ip"] == "8.8.8.8"
        assert own.headers["cache-control"] == "private, no-store"
        assert "cache-control" not in (await client.get("/ip/8.8.8.8")).headers  # the same for everyone
    keys = tmp_path / "keys.txt"
    keys.write_text(f"alice sha256:{hashlib.sha256(KEY.encode()).hexdigest()}\n")
    async with running_app(settings.replace(api_keys_file=keys)) as client:
        keyed = await client.get("/ip/8.8.8.8", headers={"Authorization": f"Bearer {KEY}"})
        assert keyed.status_code == 200
        assert keyed.headers["cache-control"] == "private, no-store"
        assert keyed.headers["vary"] == "Authorization, X-API-Key"


async def test_the_docs_page_cannot_be_framed_and_runs_only_its_own_scripts(settings: Settings) -> None:
    async with running_app(settings) as client:
        for path in ("/docs", "/docs/init.js"):
            answer = await client.get(path)
            assert answer.status_code == 200, path
            csp = answer.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "default-src 'none'" in csp
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["referrer-policy"] == "no-referrer"
        init = (await client.get("/docs/init.js")).text
        assert "persistAuthorization: false" in init
