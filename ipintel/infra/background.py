"""The long-running task of a component: started once, cancelled and awaited when it closes.

The feed manager's refresh loops and the ``.mmdb`` watcher's polling each run
for the life of the app as one task. Starting twice must not run the work
twice, and closing must wait until the task has really ended, so that no
refresh or reload still runs after the app's lifespan is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundTask:
    """One named task, at most one at a time."""

    def __init__(self, name: str) -> None:
        self.name = name  # the asyncio task's name, seen in task dumps
        self._task: asyncio.Task[None] | None = None

    def start(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work()`` in the background, unless the task is already running
        (``work`` is then not even called, so no coroutine is left unawaited)."""
        if self._task is None:
            self._task = asyncio.create_task(work(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended; nothing to do when it was never started."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def poll(interval: float, check: Callable[[], Coroutine[Any, Any, Any]], what: str, log: logging.Logger) -> None:
    """Call ``check()`` every ``interval`` seconds for ever (a watcher's task). A failing check is logged
    and the polling goes on: the next check may work, and a watcher that died would watch nothing."""
    while True:
        await asyncio.sleep(interval)
        try:
            await check()
        except Exception:
            log.exception("checking %s for changes failed", what)
