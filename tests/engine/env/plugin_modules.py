"""Plugin env modules for the tests: one that keeps to the update queue and two that break the rule.

Importable by Dask workers (``tests.engine.env.plugin_modules``); :func:`register_plugin_modules`
makes their names resolvable in a process, as a ``polis.env_modules`` entry point would, and
:class:`PluginModulesOnWorkers` does it on every worker, replacements of dead ones included.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime
from typing import Any

from distributed import WorkerPlugin

from engine.env.base import EnvBase
from engine.env.tool import tool
from engine.env.update_queue import Update

PLUGIN_MODULES = {
    "TallySpace": "tests.engine.env.plugin_modules:TallySpace",
    "EagerTallySpace": "tests.engine.env.plugin_modules:EagerTallySpace",
    "ForgetfulStepTallySpace": "tests.engine.env.plugin_modules:ForgetfulStepTallySpace",
    "SlowSharedSpace": "tests.engine.env.plugin_modules:SlowSharedSpace",
    "SlowPrivateSpace": "tests.engine.env.plugin_modules:SlowPrivateSpace",
}


def register_plugin_modules() -> None:
    """Make the plugin modules' names resolvable in this process (the registry caches its table)."""
    import importlib

    from engine.env.registry import ENV_MODULES

    for name, target in PLUGIN_MODULES.items():
        module, _, attr = target.partition(":")
        ENV_MODULES.register(getattr(importlib.import_module(module), attr), name)


def unregister_plugin_modules() -> None:
    from engine.env.registry import ENV_MODULES

    for name in PLUGIN_MODULES:
        ENV_MODULES.unregister(name)


class PluginModulesOnWorkers(WorkerPlugin):
    """Registers the plugin modules on each worker as it starts (``client.register_plugin``)."""

    name = "polis-test-plugin-env-modules"

    def setup(self, worker: Any) -> None:
        register_plugin_modules()

    def teardown(self, worker: Any) -> None:
        unregister_plugin_modules()


class TallySpace(EnvBase):
    """A tally per agent: agents add points, applied at the end of the step.

    It queues its updates and overrides ``apply_update`` and its own state's persistence, nothing of
    the queue (no ``discard_pending``, ``apply_pending`` or ``step``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.totals: dict[int, int] = {}

    @tool(readonly=False)
    def add(self, agent_id: int, points: int) -> str:
        """Add points to agent_id's tally at the end of this step."""
        self.check_agent(agent_id)
        self.updates.queue(agent_id, points=points)
        return f"{points} points queued"

    @tool(readonly=True, kind="observe")
    def tally(self, agent_id: int) -> str:
        """agent_id's tally."""
        return f"tally {self.totals.get(agent_id, 0)}"

    def apply_update(self, update: Update) -> None:
        self.totals[update.agent_id] = self.totals.get(update.agent_id, 0) + update["points"]

    def dump_state(self) -> dict[str, Any]:
        return {"totals": {str(k): v for k, v in self.totals.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.totals = {int(k): v for k, v in state["totals"].items()}


class EagerTallySpace(TallySpace):
    """Breaks the rule: ``add`` changes the tally at once, so a re-run agent-step adds twice."""

    @tool(readonly=False)
    def add(self, agent_id: int, points: int) -> str:
        """Add points to agent_id's tally now."""
        self.totals[agent_id] = self.totals.get(agent_id, 0) + points
        return f"{points} points added"


class ForgetfulStepTallySpace(TallySpace):
    """Breaks the rule: its ``step`` override never applies the queue."""

    async def step(self, tick: int, t: datetime) -> None:
        self.t = t


class SlowSharedSpace(EnvBase):
    """A lookup that awaits before it answers, and logs when each call starts and ends.

    It declares nothing, so it is not concurrency-safe: the router runs one of its tools at a time.
    """

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int, float]] = []

    @tool(readonly=True)
    async def lookup(self, agent_id: int, seconds: float) -> str:
        """Look something up for agent_id, taking ``seconds``."""
        self.log.append(("start", agent_id, time.monotonic()))
        await asyncio.sleep(seconds)
        self.log.append(("end", agent_id, time.monotonic()))
        return "found"

    @tool(readonly=True, kind="statistics")
    def lookup_log(self) -> str:
        """The calls' starts and ends in the order they happened, as JSON."""
        return json.dumps([[event, agent_id] for event, agent_id, _ in sorted(self.log, key=lambda e: e[2])])


class SlowPrivateSpace(SlowSharedSpace):
    """The same lookup, declared concurrency-safe: its calls may run side by side."""

    @classmethod
    def is_concurrency_safe(cls) -> bool:
        return True
