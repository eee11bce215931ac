"""Whether the suite runs under CI, and what a missing prerequisite (Chromium, redis-server, node) does then.

CI is ``CI`` set to ``true``, ``1`` or ``yes`` (any case), as GitHub Actions, GitLab and most runners set it.
There .ci/run has installed every system package, so a missing one fails the test instead of skipping it:
CI cannot pass without running them.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(why: str) -> NoReturn:
    """Skip the test for ``why``; fail it under CI, where nothing may be missing."""
    if under_ci():
        pytest.fail(f"CI={os.environ['CI']} but {why}")
    pytest.skip(why)
