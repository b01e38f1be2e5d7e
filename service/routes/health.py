"""``GET /health``: the service is up."""

from __future__ import annotations

from fastapi import APIRouter

from service.schemas import Health
from service.state import State

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
async def health(state: State) -> Health:
    """Report that the service is up, how many experiments it runs, and the cluster's dashboard."""
    return Health(status="ok", running=len(state.submitter.active()), dashboard_link=state.dashboard_link)
