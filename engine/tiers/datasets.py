"""The dataset the non-LLM tiers keep their members' state in (and analyses read it from)."""

from __future__ import annotations

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["AGENT_STATE"]

AGENT_STATE = DatasetSchema(
    name="agent_state",
    kind="agent",
    description="archetype and rule members: one row per member per step, its state as the step left it (a rule "
    "policy's state, an archetype member's draws); the next tick's batch reads it back",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="agent_id", type="int64", description="the member"),
        Column(name="tier", type="string", description="archetype | rule"),
        Column(name="state", type="json", description="the member's state, as JSON"),
    ),
)
