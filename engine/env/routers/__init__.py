"""Routers selectable in the spec (``environment.router``), by name in :data:`ROUTERS`; each one's ``Config`` is what
``environment.router_config`` may set for it."""

from engine.env.router_base import RouterBase, RouterConfig
from engine.env.routers.codegen import CodeGenRouter
from engine.env.routers.plan_execute import PlanExecuteRouter
from engine.env.routers.react import ReActRouter
from engine.env.routers.search_tool import SearchToolRouter
from engine.env.routers.two_tier import TwoTierPlanExecuteRouter, TwoTierReActRouter
from engine.plugins import PluginRegistry

__all__ = [
    "ROUTERS",
    "CodeGenRouter",
    "PlanExecuteRouter",
    "ReActRouter",
    "RouterConfig",
    "SearchToolRouter",
    "TwoTierPlanExecuteRouter",
    "TwoTierReActRouter",
]

#: The router class for each name a spec may give (``engine.router_names.RouterName`` lists the same names, for the spec).
ROUTERS: PluginRegistry[RouterBase] = PluginRegistry("router", {
    "codegen": "engine.env.routers.codegen:CodeGenRouter",
    "react": "engine.env.routers.react:ReActRouter",
    "plan_execute": "engine.env.routers.plan_execute:PlanExecuteRouter",
    "two_tier_react": "engine.env.routers.two_tier:TwoTierReActRouter",
    "two_tier_plan_execute": "engine.env.routers.two_tier:TwoTierPlanExecuteRouter",
    "search_tool": "engine.env.routers.search_tool:SearchToolRouter",
})
