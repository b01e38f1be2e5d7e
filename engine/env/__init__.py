"""The environment layer: EnvBase modules with @tool methods, routers, and the env actor."""

from engine.env.base import EnvBase
from engine.env.handle import EnvHandle
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.router_base import RouterBase
from engine.env.routers import ReActRouter
from engine.env.scripted import ScriptedEnv
from engine.env.tool import ToolInfo, tool

__all__ = ["EnvBase", "EnvHandle", "EnvReply", "EnvRequest", "ReActRouter", "RouterBase", "ScriptedEnv", "ToolCall", "ToolInfo", "tool"]
