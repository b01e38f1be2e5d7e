"""Routers selectable in the spec (``environment.router``)."""

from engine.env.router_base import RouterBase
from engine.env.routers.codegen import CodeGenRouter
from engine.env.routers.plan_execute import PlanExecuteRouter
from engine.env.routers.react import ReActRouter
from engine.env.routers.search_tool import SearchToolRouter
from engine.env.routers.two_tier import TwoTierPlanExecuteRouter, TwoTierReActRouter
from engine.spec import RouterName

__all__ = [
    "ROUTERS",
    "CodeGenRouter",
    "PlanExecuteRouter",
    "ReActRouter",
    "SearchToolRouter",
    "TwoTierPlanExecuteRouter",
    "TwoTierReActRouter",
]

#: The router class for each name a spec may give (``engine.spec.RouterName``, the names' one definition).
ROUTERS: dict[RouterName, type[RouterBase]] = {
    "codegen": CodeGenRouter,
    "react": ReActRouter,
    "plan_execute": PlanExecuteRouter,
    "two_tier_react": TwoTierReActRouter,
    "two_tier_plan_execute": TwoTierPlanExecuteRouter,
    "search_tool": SearchToolRouter,
}
