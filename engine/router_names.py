"""The names of the env routers a spec may choose (``environment.router``), and the default one.

Values only, shared by the spec (:mod:`engine.spec`, which validates a spec's choice and puts the names in its
schema) and the env actor (``EnvRouterConfig``), which builds the router :data:`engine.env.routers.ROUTERS` has
for the name.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["DEFAULT_ROUTER", "ROUTER_NAMES", "RouterName"]

#: The env routers a spec may name (``environment.router``); ``engine.env.routers.ROUTERS`` implements each.
RouterName = Literal["codegen", "react", "plan_execute", "two_tier_react", "two_tier_plan_execute", "search_tool"]
ROUTER_NAMES: tuple[RouterName, ...] = get_args(RouterName)
#: The router of a spec that names none, and of an ``EnvRouterConfig`` built without one.
DEFAULT_ROUTER: RouterName = "codegen"
