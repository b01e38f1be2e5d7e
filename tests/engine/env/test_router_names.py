"""Router names have one definition (``engine.router_names.RouterName``): every one has a router, and the defaults agree."""

from __future__ import annotations

from typing import get_args

from engine.env.actor import EnvRouterConfig
from engine.env.routers import ROUTERS
from engine.router_names import DEFAULT_ROUTER, ROUTER_NAMES, RouterName
from engine.spec import EnvironmentSpec


def test_every_router_name_the_spec_allows_has_a_router_and_no_other_router_is_registered() -> None:
    assert set(ROUTERS.names()) == set(ROUTER_NAMES) == set(get_args(RouterName))


def test_a_config_built_without_a_router_gets_the_specs_default() -> None:
    assert EnvRouterConfig(modules=()).router == EnvironmentSpec().router == DEFAULT_ROUTER == "codegen"
