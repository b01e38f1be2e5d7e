"""The CodeGen sandbox: an AST guard, then OS-limited processes, for code an LLM wrote (a security boundary)."""

from engine.env.sandbox.broker import SandboxTool, ToolBroker
from engine.env.sandbox.errors import CodeRejectedError, SandboxError, SandboxUnavailableError
from engine.env.sandbox.executor import ExecutionResult, Executor, ThreadExecutor, execute
from engine.env.sandbox.guard import check_code, compile_guarded
from engine.env.sandbox.limits import SandboxLimits
from engine.env.sandbox.namespace import ToolError
from engine.env.sandbox.pool import SandboxPool

__all__ = [
    "CodeRejectedError",
    "ExecutionResult",
    "Executor",
    "SandboxError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxTool",
    "SandboxUnavailableError",
    "ThreadExecutor",
    "ToolBroker",
    "ToolError",
    "check_code",
    "compile_guarded",
    "execute",
]
