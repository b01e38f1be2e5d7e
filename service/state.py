"""What the routes share: the registry, the submitter and the cluster's dashboard link."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from service.registry import ExperimentRegistry
from service.submission import Submitter

__all__ = ["ServiceState", "State", "get_state"]


@dataclass(frozen=True)
class ServiceState:
    """The live parts of one running service, set up by the app's lifespan."""

    registry: ExperimentRegistry  #: experiment records
    submitter: Submitter  #: runs experiments on the shared Dask client
    dashboard_link: str | None  #: the shared client's Dask dashboard, if it has one


def get_state(request: Request) -> ServiceState:
    """The service state of the app handling ``request`` (a FastAPI dependency)."""
    state: ServiceState = request.app.state.polis
    return state


#: Route parameter type that injects the service state.
State = Annotated[ServiceState, Depends(get_state)]
