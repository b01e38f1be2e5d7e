"""Every module declares ``__all__``; it names real objects and every public definition of the module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import engine
import polis
import service


def _modules():
    for package in (engine, service, polis):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            yield info.name


@pytest.mark.parametrize("name", sorted(_modules()))
def test_module_all_is_complete(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    for exported in module.__all__:
        assert hasattr(module, exported), f"{name}.__all__ names missing {exported!r}"
    defined = {
        attr for attr, value in vars(module).items()
        if not attr.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == name
    }
    # FastAPI handlers are reached through the module's router, not imported by name.
    router = getattr(module, "router", None)
    endpoints = {getattr(route, "endpoint", None) for route in getattr(router, "routes", [])}
    missing = {attr for attr in defined - set(module.__all__) if getattr(module, attr) not in endpoints}
    assert not missing, f"{name} defines public {sorted(missing)} but leaves them out of __all__"
