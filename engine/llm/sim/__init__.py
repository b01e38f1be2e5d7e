"""The simulated LLM: a deterministic, OpenAI-compatible model, in-process and over HTTP.

``SimLLM`` answers chat completions (schema-valid JSON, tool calls, short text) and embeddings;
``create_app`` / ``run_server`` put it behind HTTP with the faults ``SimFaults`` describes. The
server module (and uvicorn with it) is imported on first use, so in-process use stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.llm.sim.faults import FaultPlan, SimFaults
from engine.llm.sim.model import SimLLM, request_kind
from engine.llm.sim.schema_instance import generate_instance

if TYPE_CHECKING:
    from engine.llm.sim.server import create_app, run_server

__all__ = ["FaultPlan", "SimFaults", "SimLLM", "create_app", "generate_instance", "request_kind", "run_server"]

_LAZY = {"create_app", "run_server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from engine.llm.sim import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
