"""Upstream documents kept as files under ``tests/fixtures/`` (RDAP answers, ...), not pasted into tests.

load_json("rdap/arin_v4_2024.json")   # a fresh copy on every call: a test may change it
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def load_json(name: str) -> Any:
    """``tests/fixtures/<name>``, parsed afresh."""
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))
