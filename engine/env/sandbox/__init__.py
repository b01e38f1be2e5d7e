"""The CodeGen sandbox: an AST guard and an executor for code an LLM wrote (a security boundary)."""

from engine.env.sandbox.errors import CodeRejectedError, SandboxError
from engine.env.sandbox.executor import ExecutionResult, SandboxLimits, SandboxTool, execute
from engine.env.sandbox.guard import check_code, compile_guarded
from engine.env.sandbox.namespace import ToolError

__all__ = [
    "CodeRejectedError",
    "ExecutionResult",
    "SandboxError",
    "SandboxLimits",
    "SandboxTool",
    "ToolError",
    "check_code",
    "compile_guarded",
    "execute",
]
