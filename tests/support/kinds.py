"""The kinds of test, as pytest markers (registered in pyproject.toml), so that each kind runs alone:
``make test-fast`` is ``pytest -m unit``.

tests/conftest.py marks every test from what it uses, its fixtures' code and the test-module helpers it calls
included (:func:`kinds_of`): the real server (:func:`tests.support.app.server_process`) or another program
started by a test module makes ``process``; Chromium (:mod:`tests.support.browser`) ``browser``; redis-server
(:mod:`tests.support.redis`) ``redis``. test_k8s.py marks itself ``k8s``. A test with none of these is ``unit``.

The reading is checked as the tests run (:func:`check_spawn`): a unit test that starts a program fails, so a
test the reading missed cannot hide among the unit tests.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import subprocess
from collections.abc import Iterable
from types import CodeType, FunctionType, ModuleType
from typing import Any

import pytest

KINDS = {
    "unit": "runs in the pytest process alone: no other process, no system package, no network (make test-fast)",
    "process": "starts the real server (python -m ipintel, tests/support/app.py server_process) or another program",
    "browser": "renders pages in headless Chromium (tests/support/browser.py)",
    "redis": "runs a real redis-server (tests/support/redis.py)",
    "k8s": "reads and validates the Kubernetes manifests of k8s/ (tests/test_k8s.py)",
}


@functools.cache
def _leaves() -> dict[int, str]:
    """What makes a kind, wherever it is reached from. Imported when the first test is read, not with this module:
    tests/conftest.py imports it in every pytest process, and pytest-xdist's controller, which reads no test,
    would import the app (about 0.3 s) before it starts the workers."""
    from tests.support import app, browser, redis

    return {
        id(app.server_process): "process",
        id(browser.require_chromium): "browser",
        id(redis.require_redis): "redis",
    }


# Starting a program: a kind when a test module does it (the support modules start theirs through the leaves).
_SPAWN = {
    id(f)
    for f in (
        subprocess.Popen,
        subprocess.run,
        subprocess.call,
        subprocess.check_call,
        subprocess.check_output,
        asyncio.create_subprocess_exec,
        asyncio.create_subprocess_shell,
    )
}


def _codes(code: CodeType) -> Iterable[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def _ours(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "") or "").startswith("tests.")


def kinds_of(functions: Iterable[Any]) -> set[str]:
    """The kinds the given functions (a test and its fixtures) reach, through every function and class of
    tests/ they name, nested functions and lambdas included."""
    found: set[str] = set()
    for function in functions:
        if id(function) not in _known:
            _known[id(function)] = (function, _reached(function))  # the function kept: its id stays its own
        found |= _known[id(function)][1]
    return found


_known: dict[int, tuple[Any, frozenset[str]]] = {}


def _reached(root: Any) -> frozenset[str]:
    kinds: set[str] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if id(obj) in _leaves():
            kinds.add(_leaves()[id(obj)])
            continue
        if isinstance(obj, type):
            if _ours(obj):
                stack.extend(vars(obj).values())
            continue
        if isinstance(obj, staticmethod | classmethod):
            stack.append(obj.__func__)
            continue
        if isinstance(obj, property):
            stack.extend(f for f in (obj.fget, obj.fset) if f is not None)
            continue
        function = inspect.unwrap(obj) if callable(obj) else obj
        if function is not obj:
            stack.append(function)
            continue
        if not isinstance(function, FunctionType) or not _ours(function):
            continue
        in_test_module = function.__module__.startswith("tests.test_")
        names = {name for code in _codes(function.__code__) for name in code.co_names}
        found = [function.__globals__[name] for name in names if name in function.__globals__]
        # module.attribute: the attributes read anywhere in the function, on each module it names
        found += [getattr(m, name) for m in found if isinstance(m, ModuleType) for name in names if hasattr(m, name)]
        for target in found:
            if id(target) in _SPAWN:
                if in_test_module:
                    kinds.add("process")
            elif not isinstance(target, ModuleType):
                stack.append(target)
    return frozenset(kinds)


# The test running now (set by tests/conftest.py), for check_spawn.
current: pytest.Item | None = None


def check_spawn(args: Any) -> None:
    """Fail the running test if it is marked ``unit`` and starts the program ``args`` names."""
    if current is None or current.get_closest_marker("unit") is None:
        return
    program = args if isinstance(args, str | bytes | os.PathLike) else args[0]
    pytest.fail(
        f"{current.nodeid} is marked unit but started {os.fsdecode(program)}: it reaches a program through a "
        "helper tests/support/kinds.py does not see; mark the test (or its module) with pytest.mark.process"
    )
