"""The limits of one execution of generated code (stdlib only: the sandbox process reads them too)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["SandboxLimits"]


@dataclass(frozen=True)
class SandboxLimits:
    """Per-execution limits."""

    timeout_s: float = 2.0  #: wall clock, tool calls included
    max_steps: int = 100_000  #: loop iterations + function calls
    max_tool_calls: int = 20
    max_output_chars: int = 10_000  #: printed text kept
    max_result_chars: int = 50_000  #: ``results`` as JSON
    #: memory the code may add: the sandbox process's address space above its start-up size
    #: (``RLIMIT_AS``); in-thread, the actor process's RSS growth (checked at ticks only)
    max_memory_growth_mb: int = 512

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
