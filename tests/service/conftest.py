"""Fixtures for the service tests: small spec dicts. The services they start run experiments in-process
(``scheduler=IN_PROCESS``); a test of what only a Dask cluster has takes the session-wide LocalCluster, ``cluster_address``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def small_spec_data(name: str = "service-smoke") -> dict[str, Any]:
    """Four person agents with varied profiles, a messaging space, the simulated LLM, two ticks."""
    return {
        "name": name,
        "agents": [
            {"id": 0, "type": "PersonAgent", "profile": {"name": "Ada", "age": 34, "occupation": "engineer"}},
            {"id": 1, "type": "PersonAgent", "profile": {"name": "Bo", "age": 61, "occupation": "farmer"}},
            {"id": 2, "type": "PersonAgent", "profile": {"name": "Cy", "age": 19, "occupation": "student"}},
            {"id": 3, "type": "PersonAgent", "profile": {"name": "Di", "age": 45, "occupation": "nurse"}},
        ],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "llm": {"default": {"model": "sim/default"}},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}],
    }


@pytest.fixture(scope="session")
def make_spec_data() -> Callable[..., dict[str, Any]]:
    """A factory of fresh small spec dicts: ``make_spec_data(name="...")``."""
    return small_spec_data
