"""``polis estimate``: a short dry run on the simulated LLM, projected to the whole spec."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from distributed import Client

from engine.env.prompts import WORLD_DESCRIPTION
from engine.run_status import is_finished
from engine.society.run.runner import run_experiment
from engine.spec import ExperimentSpec, LLMClientSpec, LLMSpec, RunStep
from engine.storage.reader import ReplayReader

__all__ = ["Estimate", "estimate"]


@dataclass(frozen=True)
class Estimate:
    """Projected LLM usage of a whole spec, from a sample run."""

    sample_agents: int
    sample_ticks: int
    agent_steps_total: int
    calls_per_agent_step: float  #: agents' and env router's calls, per agent-step
    calls_per_run: int  #: calls a run makes once whatever its size (the env's world description)
    tokens_per_agent_step: float
    projected_calls: int
    projected_tokens: int


def _sample_spec(spec: ExperimentSpec, agents: int, ticks: int) -> ExperimentSpec:
    """The spec cut to ``agents`` agents and ``ticks`` ticks of its first run step, on the sim."""
    sample = spec.all_agents()[:agents]
    first_run = next(s for s in spec.steps if isinstance(s, RunStep))
    # A spec already on the simulated LLM keeps its own model (and so its exact answers).
    sim = spec.llm.default if spec.llm.default.model.startswith("sim/") and not spec.llm.default.base_url else LLMClientSpec(model="sim/estimate")
    return spec.model_copy(update={
        "agents": sample, "population": [], "budget": None,
        "steps": [RunStep(num_steps=min(ticks, spec.total_ticks()), tick=first_run.tick)],
        "llm": LLMSpec(default=sim, coder=sim),
    })


async def estimate(spec: ExperimentSpec, client: Client, *, agents: int = 20, ticks: int = 2) -> Estimate:
    """Run a sample of ``spec`` on the simulated LLM and project calls and tokens.

    Args:
        spec: the spec to estimate (only its ``run`` steps cost LLM calls here).
        client: an asynchronous distributed Client.
        agents: how many of its agents the sample runs.
        ticks: how many ticks the sample runs.
    """
    sample = _sample_spec(spec, agents, ticks)
    with tempfile.TemporaryDirectory(prefix="polis-estimate-") as tmp:
        summary = await run_experiment(sample, Path(tmp) / "run", client)
        if not is_finished(summary.status):
            raise RuntimeError(f"the sample run did not complete: {summary.error}")
        with ReplayReader(Path(tmp) / "run") as reader:
            row = reader.query(
                "SELECT count(*) FILTER (WHERE prompt_name IS DISTINCT FROM ?) AS calls, "
                "count(*) FILTER (WHERE prompt_name = ?) AS once, "
                "coalesce(sum(input_tokens + output_tokens) FILTER (WHERE prompt_name IS DISTINCT FROM ?), 0) AS tokens, "
                "coalesce(sum(input_tokens + output_tokens) FILTER (WHERE prompt_name = ?), 0) AS once_tokens FROM llm_calls",
                [WORLD_DESCRIPTION.name] * 4,
            ).to_pylist()[0]
    sample_steps = max(1, summary.agent_steps)
    per_call = row["calls"] / sample_steps
    per_token = row["tokens"] / sample_steps
    total = spec.total_ticks() * len(spec.all_agents())
    return Estimate(
        sample_agents=len(sample.agents), sample_ticks=summary.ticks_done, agent_steps_total=total,
        calls_per_agent_step=per_call, calls_per_run=row["once"], tokens_per_agent_step=per_token,
        projected_calls=round(per_call * total) + row["once"], projected_tokens=round(per_token * total) + row["once_tokens"],
    )
