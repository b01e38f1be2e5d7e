"""A checker for env modules' tests, plugins' included: does a module keep the exactly-once rule?

The rule (see :mod:`engine.env.update_queue`): during an agent phase a mutating tool changes no
state, it only queues updates; the env step applies them through ``apply_update``; a re-run
agent-step's updates are discarded by agent id; the queue survives a snapshot. A module that
changes state inside a tool would apply that agent's change twice after its worker died, so the
checker runs the given tool calls on fresh modules and compares the states that result::

    from engine.env.testing import ToolCall, check_update_discipline

    async def test_my_space_keeps_the_update_discipline() -> None:
        await check_update_discipline(MySpace, [ToolCall(1, "plant", {"crop": "kale"})], agent_ids=[1, 2])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engine.env.base import EnvBase
from engine.errors import ToolCallError

__all__ = ["ToolCall", "UpdateDisciplineError", "check_update_discipline"]

_START = datetime(2026, 1, 1, 8, 0)


class UpdateDisciplineError(AssertionError):
    """A module breaks the exactly-once rule; the message says which part and how to fix it."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call an agent makes during the agent phase (``agent_id`` is passed to the tool)."""

    agent_id: int
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


def _state(module: EnvBase) -> str:
    return json.dumps(module.dump_state(), sort_keys=True, default=str)


def _fail(module: EnvBase, what: str) -> UpdateDisciplineError:
    return UpdateDisciplineError(f"{module.name}: {what}")


async def _fresh(make: Callable[[], EnvBase], agent_ids: Sequence[int]) -> EnvBase:
    module = make()
    await module.init(_START)
    module.bind_agents(list(agent_ids))
    return module


async def _call(module: EnvBase, call: ToolCall) -> None:
    readonly = module.tools()[call.tool].readonly
    try:
        await module.call_tool(call.tool, {"agent_id": call.agent_id, **call.arguments}, readonly=readonly)
    except ToolCallError:
        pass  # a refused call is part of an agent phase too: it must leave the state as it was


async def _agent_phase(module: EnvBase, calls: Sequence[ToolCall]) -> None:
    """Make ``calls``, failing when one changes the module's state instead of queueing."""
    before = _state(module)
    for call in calls:
        if call.tool not in module.tools():
            raise _fail(module, f"has no tool {call.tool!r}")
        queued = len(module.updates)
        await _call(module, call)
        if _state(module) != before:
            raise _fail(module, f"{call.tool} changed the state during the agent phase instead of queueing an update "
                                "(queue it with self.updates.queue and apply it in apply_update)")
        if module.tools()[call.tool].readonly and len(module.updates) != queued:
            raise _fail(module, f"the readonly tool {call.tool} queued an update")


async def _step(module: EnvBase, tick: int) -> str:
    await module.step(tick, _START + timedelta(seconds=tick))
    if len(module.updates):
        raise _fail(module, f"step left {len(module.updates)} updates queued (a step override must call apply_pending)")
    return _state(module)


async def check_update_discipline(
    make: Callable[[], EnvBase], calls: Sequence[ToolCall], *, agent_ids: Sequence[int], tick: int = 3600
) -> None:
    """Check that ``make()``'s modules keep the exactly-once rule for ``calls`` (made by agents ``agent_ids``).

    Each check starts from a fresh module (``make()``, initialised, agents bound): the calls change
    no state, only queue updates (readonly tools queue none); discarding every caller's updates
    restores the start state; an agent-step re-run after a discard ends the step in the state of a
    single run; the queue survives a JSON snapshot; ``apply_pending`` (settle) applies all of it.

    Args:
        make: builds the module under test, e.g. the class itself.
        calls: the agent phase: tool calls in order, at least one of which queues an update.
        agent_ids: the run's agents (bound before the calls).
        tick: the env step's length in seconds.

    Raises:
        UpdateDisciplineError: the module breaks the rule (the message names the broken part).
    """
    reference = await _fresh(make, agent_ids)
    start = _state(reference)
    await _agent_phase(reference, calls)
    if not len(reference.updates):
        raise _fail(reference, "the calls queued no update, so there is nothing to check: give calls that change the state")
    single = await _step(reference, tick)

    discarded = await _fresh(make, agent_ids)
    await _agent_phase(discarded, calls)
    for agent_id in sorted({c.agent_id for c in calls}):
        expected = len(discarded.updates.of(agent_id))
        if (dropped := discarded.discard_pending(agent_id)) != expected:
            raise _fail(discarded, f"discard_pending({agent_id}) dropped {dropped} updates, not the {expected} the agent queued")
    if len(discarded.updates) or _state(discarded) != start:
        raise _fail(discarded, "discarding every caller's updates did not bring back the start state")

    retried = await _fresh(make, agent_ids)
    await _agent_phase(retried, calls)
    for agent_id in sorted({c.agent_id for c in calls}):  # each agent-step is re-run once, as after a worker death
        retried.discard_pending(agent_id)
        await _agent_phase(retried, [c for c in calls if c.agent_id == agent_id])
    if await _step(retried, tick) != single:
        raise _fail(retried, "re-running agent-steps after discard_pending did not end the step as a single run does")

    saved = await _fresh(make, agent_ids)
    await _agent_phase(saved, calls)
    restored = await _fresh(make, agent_ids)
    # Encoded as the snapshot writer does (engine.storage.atomic): what JSON cannot encode becomes str.
    restored.load_snapshot(json.loads(json.dumps(saved.dump_snapshot(), default=str)))
    if await _step(restored, tick) != single:
        raise _fail(restored, "a module restored from a snapshot taken in the agent phase did not end the step as the "
                              "original (are its dump_state and its updates' fields JSON-able?)")

    settled = await _fresh(make, agent_ids)
    await _agent_phase(settled, calls)
    queued = len(settled.updates)
    if (applied := settled.apply_pending()) != queued or len(settled.updates):
        raise _fail(settled, f"apply_pending applied {applied} of {queued} queued updates")
    if _state(settled) == start:
        raise _fail(settled, "apply_pending applied the queued updates but the state did not change")
