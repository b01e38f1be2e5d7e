"""Interviewing agents: rebuild chosen agents in this process from their workspaces and ask them a question.

External questions are rare and touch few agents, so they run in-process (no batch task). The ask is
read-only: agents are offered read-only tools only, remember nothing from it (``PersonAgent.ask``
with ``readonly=True`` stores no episode) and are never written back, so the workspaces stay
byte-for-byte as they were.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from engine.agent.base import AgentBase
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.errors import WorkspaceError
from engine.llm.budget import BudgetGate
from engine.llm.meter import CallRecord
from engine.society.workspaces.manifest import AgentSource
from engine.storage.run_layout import RunLocation

__all__ = ["ask_agents"]


async def ask_agents(
    run_dir: RunLocation, proxy: ServiceProxy, agent_ids: list[int], question: str, t: datetime, *, max_concurrency: int = 8,
    records: list[CallRecord] | None = None, budget: BudgetGate | None = None, agents: AgentSource | None = None,
    on_answer: Callable[[], None] | None = None,
) -> dict[int, str]:
    """Ask each agent ``question`` at simulated time ``t``; returns each agent's answer by id.

    An agent whose reasoning fails answers with its failure status (``[llm_error] ...``), as
    ``AgentBase.ask`` reports it; nothing is invented in its place.

    Args:
        run_dir: the run directory (workspaces under ``agents/``).
        proxy: the service handles the agents bind (env router, LLM clients).
        agent_ids: who to ask (duplicates are asked once).
        question: the question.
        t: the simulated time the agents see.
        max_concurrency: agents reasoning at once.
        records: when given, every LLM call the agents make is appended here (for ``llm_calls``).
        budget: the run's remaining budget; the agents' calls count against it.
        agents: where the workspaces are (None: the run's own, packed or in folders; or an as-of ask's copies).
        on_answer: called as each agent has answered (progress reporting).

    Raises:
        WorkspaceError: an agent without a workspace (checked before anyone is asked), or a corrupt one.
        SpecError: a workspace naming an unknown agent type.
    """
    source = agents or AgentSource.of_run(run_dir)
    opened = {agent_id: source.opener()(agent_id) for agent_id in dict.fromkeys(agent_ids)}
    missing = [agent_id for agent_id, ws in opened.items() if ws is None]
    if missing:
        raise WorkspaceError(f"no workspace for agents {missing} under {source.where}")
    limit = asyncio.Semaphore(max_concurrency)

    async def one(agent_id: int) -> tuple[int, str]:
        async with limit:
            ws = opened[agent_id]
            assert ws is not None  # checked above
            type_name = ws.read_json("config.json").get("type")
            if not type_name:
                raise WorkspaceError(f"{ws.name}/config.json names no agent type")
            agent_type: type[AgentBase] = resolve_agent(type_name)
            agent = await agent_type.from_workspace(ws, proxy, budget=budget)
            try:
                answer = await agent.ask(question, readonly=True, t=t)
            finally:
                if records is not None:
                    records.extend(agent.meter.records)
            if on_answer is not None:
                on_answer()
            return agent_id, answer

    return dict(await asyncio.gather(*(one(agent_id) for agent_id in opened)))
