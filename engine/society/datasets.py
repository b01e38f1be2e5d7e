"""The replay datasets the society and agent batches write."""

from __future__ import annotations

from engine.storage.catalog import Column, DatasetSchema

__all__ = ["ACTIONS", "LLM_CALLS"]

ACTIONS = DatasetSchema(
    name="actions",
    kind="agent",
    description="one row per agent per step: what the agent did and what it cost",
    columns=(
        Column(name="agent_id", type="int64", description="the agent"),
        Column(name="agent_type", type="string", description="registered agent type"),
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="status", type="string", description="finished | turn_limit | llm_error | error"),
        Column(name="tools_called", type="list<string>", description="tools the agent called, in order"),
        Column(name="summary", type="string", description="the agent's own summary of the step (null if none)"),
        Column(name="turns", type="int64", description="ReAct turns used"),
        Column(name="env_calls", type="int64", description="environment requests (observe + ask_env)"),
        Column(name="llm_calls", type="int64", description="LLM calls made by the agent"),
        Column(name="llm_failures", type="int64", description="LLM calls that failed"),
        Column(name="input_tokens", type="int64", description="prompt tokens"),
        Column(name="output_tokens", type="int64", description="completion tokens"),
        Column(name="llm_latency_ms", type="float64", description="summed LLM latency"),
        Column(name="cost_usd", type="float64", description="provider cost of the step's calls where the price is known"),
        Column(name="duration_ms", type="float64", description="wall-clock time of the agent-step"),
        Column(name="error", type="string", description="error text when status is llm_error or error"),
    ),
)

LLM_CALLS = DatasetSchema(
    name="llm_calls",
    kind="llm",
    description="one row per LLM call",
    columns=(
        Column(name="run", type="string", description="run id"),
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="caller", type="string", description="agent:<id> or router"),
        Column(name="role", type="string", description="client role"),
        Column(name="prompt_name", type="string", description="prompt template name"),
        Column(name="prompt_hash", type="string", description="prompt template hash"),
        Column(name="model", type="string", description="model that answered"),
        Column(name="input_tokens", type="int64", description="prompt tokens"),
        Column(name="output_tokens", type="int64", description="completion tokens"),
        Column(name="latency_ms", type="float64", description="call latency"),
        Column(name="attempt", type="int64", description="structured-output attempt (1 = first answer)"),
        Column(name="cached", type="bool", description="served from the response cache, no provider call"),
        Column(name="cost_usd", type="float64", description="provider cost where the price is known"),
        Column(name="status", type="string", description="ok | error"),
        Column(name="error", type="string", description="error text"),
    ),
)
