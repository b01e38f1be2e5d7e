"""The environment layer: EnvBase modules with @tool methods, routers, and the env actor."""

from engine.env.base import EnvBase
from engine.env.router_base import RouterBase
from engine.env.routers import ReActRouter
from engine.env.tool import ToolInfo, tool

__all__ = ["EnvBase", "ReActRouter", "RouterBase", "ToolInfo", "tool"]
