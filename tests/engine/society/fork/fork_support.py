"""Shared by the fork tests: a seeded 4-tick spec, a simulated LLM whose intervention helper always acts, file hashes."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.llm.sim.background import serving
from engine.llm.sim.model import SimLLM

AGENTS = 6
#: the agents the scripted intervention messages
TOLD = [0, 1, 2]
NOTICE = "The street market is cancelled tomorrow."


def fork_parent_spec(llm: dict[str, Any] | None = None, *, keep: int | None = None, ticks: int = 4) -> dict[str, Any]:
    """6 people messaging for ``ticks`` seeded ticks (codegen router), keeping ``keep`` past ticks."""
    return {
        "name": "parent",
        "seed": 5,
        "start_time": "2026-03-02T08:00:00",
        "llm": {"default": llm or {"model": "sim/default"}},
        "population": [{"count": AGENTS, "profile_template": {"name": "Resident {i}", "occupation": ["teacher", "nurse", "baker"]},
                        "config": {"max_react_turns": 3}}],
        "environment": {"router": "codegen", "modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"street": [0, 1, 2, 3]}}}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
        "snapshots": {"keep": keep},
        "batch_size": 2,
    }


def intervention_patch(at_step: int = 2, ticks: int = 4) -> dict[str, Any]:
    """Steps that insert an intervention after tick ``at_step`` of a ``ticks``-tick run."""
    return {"steps": [{"type": "run", "num_steps": at_step, "tick": 3600},
                      {"type": "intervene", "instruction": f"Tell residents {TOLD} that the street market is cancelled."},
                      {"type": "run", "num_steps": ticks - at_step, "tick": 3600}]}


class InterveningSim(SimLLM):
    """The simulated LLM, except that an intervention's plan messages :data:`TOLD` (the sim's own plans
    pick random agent ids); every other request gets the sim's answer."""

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = super().complete(body)
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
        properties = schema.get("properties") or {}
        mapping = ((properties.get("steps") or {}).get("items") or {}).get("discriminator", {}).get("mapping", {})
        if "message_agents" in mapping:  # only an intervention's plan is offered a mutating tool
            plan = {"reasoning": "tell them", "steps": [
                {"description": "message", "tool": "message_agents", "args": {"agent_ids": TOLD, "content": NOTICE},
                 "expected_output": "sent"}]}
            reply["choices"][0]["message"]["content"] = json.dumps(plan)
        return reply


@contextlib.contextmanager
def intervening_llm() -> Iterator[dict[str, Any]]:
    """:class:`InterveningSim` on a real uvicorn server on 127.0.0.1; yields the spec's ``llm.default``."""
    with serving(InterveningSim(seed=1)) as url:
        yield {"model": "openai/sim", "base_url": f"{url}/v1"}


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (symlinks by target), by relative path."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = "-> " + str(path.readlink())
        elif path.is_file():
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
