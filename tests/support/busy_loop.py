"""``python -m tests.support.busy_loop``: ``python -m ipintel`` under a CPU-bound load on its event loop.

Issue 23, point 3: the loop of a flooded process is held for ``BUSY_LOOP_BLOCK`` seconds (100 ms by default)
at a time by CPU-bound work (other requests'), and the Redis answers a request waits for arrive while it is:

- a task of the server's own loop computes for 100 ms without yielding, then yields for ``BUSY_LOOP_PAUSE``
  (100 ms: three such processes leave part of the machine to Redis), as long as the server runs;
- and each rate-limit operation sent to Redis is followed at once by 100 ms of such work (a callback queued
  as the operation starts, which runs as soon as it waits for its answer), so that every one of them meets
  the delay, not only those that happen to.

Only the test of the shared limit under load (tests/test_shared_state.py) uses it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from ipintel.__main__ import main
from ipintel.infra.shared import SharedStore
from ipintel.service import Intel

BLOCK = float(os.environ.get("BUSY_LOOP_BLOCK", "0.1"))
PAUSE = float(os.environ.get("BUSY_LOOP_PAUSE", "0.1"))


def compute() -> None:
    until = time.perf_counter() + BLOCK
    while time.perf_counter() < until:
        pass


async def hog() -> None:
    while True:
        compute()
        await asyncio.sleep(PAUSE)


_start = Intel.start
_take = SharedStore.take
_tasks: set[asyncio.Task[None]] = set()


async def _start_with_load(self: Intel) -> None:
    await _start(self)
    _tasks.add(asyncio.get_running_loop().create_task(hog()))


async def _take_under_load(self: SharedStore, *args: Any, **kwargs: Any) -> tuple[bool, float]:
    asyncio.get_running_loop().call_soon(compute)
    return await _take(self, *args, **kwargs)


Intel.start = _start_with_load  # type: ignore[method-assign]
SharedStore.take = _take_under_load  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
