"""``GET /health``: the service is up (no token needed, nothing else said); ``GET /cluster``: what it runs, and where
the cluster's dashboard is (a caller's)."""

from __future__ import annotations

from fastapi import APIRouter

from service.admission.auth import Caller
from service.schemas import ClusterInfo, Health
from service.state import State

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
async def health() -> Health:
    """Report that the service is up: for probes, so it needs no token and names nothing of the server."""
    return Health(status="ok")


@router.get("/cluster", response_model=ClusterInfo)
async def cluster(state: State, caller: Caller) -> ClusterInfo:
    """How many experiments the service runs now, and the Dask dashboard of its cluster (null without one)."""
    return ClusterInfo(running=len(state.submitter.active()), dashboard_link=state.dashboard_link)
