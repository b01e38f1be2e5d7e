"""PersonAgent: the default agent for simulating people, on the base ReAct loop."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.agent.base import AgentBase
from engine.agent.outcome import StepOutcome
from engine.agent.prompts import PERSON_ASK, PERSON_CONTEXT, PERSON_STEP, PERSON_SYSTEM

__all__ = ["PersonAgent"]

_RECENT = 5


class PersonAgent(AgentBase):
    """A person: profile-driven prompts, inbox observations, a short memory of recent steps."""

    react_prompt = PERSON_STEP

    def _memory_text(self) -> str:
        recent = self.state.get("recent", [])
        return "\n".join(f"- {item}" for item in recent) or "- (nothing yet)"

    def build_react_messages(
        self, *, tick: int, t: datetime, observations: list[str], question: str | None = None, readonly: bool = False
    ) -> list[dict[str, Any]]:
        tools = self.react_tools(readonly=readonly)
        system = PERSON_SYSTEM.render(  # what stays the same call after call, so a prefix cache reuses it
            name=self.name,
            profile="\n".join(f"- {k}: {v}" for k, v in self.profile.items()) or "- (no profile)",
            world=self._env.get_world_description() if self._env is not None else "",
            skills=self.skills.catalog_text() or "(none)",
            tools="\n".join(f"- {name}: {tool.description}" for name, tool in tools.items()),
        )
        context = PERSON_CONTEXT.render(
            time=t.isoformat(),
            memory=self._memory_text(),
            long_memory=self.thread.summary().strip() or "(nothing yet)",
            active_skills=f"\n\nActive skills:\n{self.skills.active_text()}" if self.skills.active else "",
        )
        if question is not None:
            user = PERSON_ASK.render(question=question)
        else:
            user = PERSON_STEP.render(tick_minutes=tick // 60, observations="\n".join(observations) or "(nothing new)")
        return [{"role": "system", "content": system}, {"role": "user", "content": context}, {"role": "user", "content": user}]

    async def step(self, tick: int, t: datetime) -> StepOutcome:
        self._current_time = t
        observation = await self._env.observe(self.id)
        hooks = await self.skills.run_hooks("pre_step", observations=[observation])
        observations = [observation, *(f"[{name}] {out}" for name, out in hooks.items() if out)]
        outcome = await self.run_react_loop(tick=tick, t=t, observations=observations)
        await self.skills.run_hooks("post_step")
        room = self.thread_room()
        await self.thread.maybe_compact(t=t, max_chars=room, keep_chars=room // 2 if room is not None else None)
        outcome.env_calls += 1
        self._step_count += 1
        if outcome.summary:
            self.state["recent"] = [*self.state.get("recent", []), f"{t.isoformat()}: {outcome.summary}"][-_RECENT:]
        return outcome

    async def ask(self, message: str, readonly: bool = True, *, t: datetime | None = None) -> str:
        t = t or self._current_time or datetime.now()
        outcome = await self.run_react_loop(tick=0, t=t, question=message, readonly=readonly)
        if outcome.status != "finished":
            return f"[{outcome.status}] {outcome.error or 'no answer within the turn limit'}"
        return outcome.summary or ""
