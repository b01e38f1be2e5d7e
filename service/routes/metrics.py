"""``GET /metrics``: the service's metrics for Prometheus (no token needed)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.metrics import CONTENT_TYPE, exposition
from service.state import State

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                     "description": "Prometheus text exposition format, version 0.0.4"}},
)
async def metrics(state: State) -> Response:
    """Experiments by status, the queue length, LLM calls and tokens, and a histogram of tick durations."""
    return Response(exposition(state.registry.records(), state.metrics), media_type=CONTENT_TYPE)
