"""Errors of the CodeGen sandbox.

    EnvError                           (engine.errors)
    └── SandboxError                   the sandbox
        ├── CodeRejectedError          the guard refused the code before it ran (names construct and line)
        └── SandboxUnavailableError    no sandbox process can take the code (none starts, pool closed or full)

Failures while generated code runs (an exception, a limit, a failing tool, a sandbox process
killed at its deadline or stopped by its memory limit) are not raised: the executor returns them
as text in :class:`~engine.env.sandbox.executor.ExecutionResult`, because they are fed back to the LLM.
"""

from __future__ import annotations

from engine.errors import EnvError

__all__ = ["CodeRejectedError", "SandboxError", "SandboxUnavailableError"]


class SandboxError(EnvError):
    """The CodeGen sandbox."""


class CodeRejectedError(SandboxError):
    """Generated code the guard refuses to run.

    Args:
        problems: one line per refused construct, each starting with ``line N:``.
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("code refused: " + "; ".join(problems))
        self.problems = problems


class SandboxUnavailableError(SandboxError):
    """No sandbox process could take the code: none would start, the pool is closed, or too many wait."""
