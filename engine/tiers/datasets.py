"""The dataset the non-LLM tiers keep their members' state in (and analyses read it from)."""

from __future__ import annotations

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["AGENT_STATE", "ARCHETYPE_DECISIONS"]

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

ARCHETYPE_DECISIONS = DatasetSchema(
    name="archetype_decisions",
    kind="agent",
    description="one row per archetype group per step: the group's decision (its probabilities and text), its call, "
    "and the print of its prompt (the next tick's call is measured against it)",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="group_id", type="string", description="<population>.<n>"),
        Column(name="key", type="json", description="the key fields' values the members share, or their cluster's "
               "representative traits (with its number, cluster)"),
        Column(name="members", type="int64", description="members in the group"),
        Column(name="call_id", type="string", description="the llm_calls row of the decision (its last attempt)"),
        Column(name="status", type="string", description="ok | failed (no valid answer: members are llm_error) | stopped (the budget ran out)"),
        Column(name="probabilities", type="json", description="each option's probability, scaled to sum to 1 (null: no decision)"),
        Column(name="text", type="string", description="the text the group would write (null: no option writes text)"),
        Column(name="error", type="string", description="why there is no decision"),
        Column(name="prompt_print", type="json", description="the last prompt's (hash, characters) per message (engine.llm.prefix)"),
    ),
)
