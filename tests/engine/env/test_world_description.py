"""The world description: written by the LLM once per run, cached in the run directory, the listing's on failure."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndConsult
from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.weather import WeatherSpace
from engine.env.prompts import WORLD_DESCRIPTION
from engine.env.world import describe_world, listing_description, load_or_describe, tool_listing
from engine.errors import LLMCallError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatResult
from engine.llm.wrappers.retry import RetryingModel
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import WORLD_DESCRIPTION_FILE, RunLayout
from engine.storage.store import MemoryStore

START = datetime(2026, 1, 1, 8, 0)
WORLD_ROWS = "SELECT caller, status, count(*) AS n FROM llm_calls WHERE prompt_name = 'env.world_description' GROUP BY ALL"


class FailingModel:
    """A model whose every call fails, as a provider that stays down after the stack's retries."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.calls += 1
        raise LLMCallError("provider down", status=503)


def modules() -> list[Any]:
    return [MessagingSpace(), WeatherSpace(locations=["north", "south"])]


async def test_the_llm_writes_it_from_the_tool_listing_under_the_named_prompt() -> None:
    meter = Meter()
    llm = MeteredModel(ScriptedModel(["  You live in a small town.\n You can message neighbours and watch the weather. "]), meter, caller="router")
    described = await describe_world(modules(), llm)
    assert (described.text, described.source, described.error) == (
        "You live in a small town. You can message neighbours and watch the weather.", "llm", None)
    assert [(r.prompt_name, r.prompt_hash, r.status) for r in meter.records] == [(WORLD_DESCRIPTION.name, WORLD_DESCRIPTION.hash, "ok")]
    listing = tool_listing(modules())
    assert "change_weather(weather, temperature=None, location=None): Change the weather" in listing and "send_message" in listing


async def test_a_failed_call_falls_back_to_the_listing_and_says_so() -> None:
    meter, failing = Meter(), FailingModel()
    stack = MeteredModel(RetryingModel(failing, max_attempts=3, base_delay=0.0), meter, caller="router")
    described = await describe_world(modules(), stack)
    assert described.text == listing_description(modules())
    assert "WeatherSpace: Weather:" in described.text and "change_weather" not in described.text  # no tool names for readonly asks
    assert (described.source, described.error) == ("fallback", "LLMCallError: provider down")
    # the stack retried the 503s; the one logical call that failed is an error row of llm_calls
    assert failing.calls == 3 and [r.status for r in meter.records] == ["error"]
    empty = await describe_world(modules(), ScriptedModel([""]))
    assert (empty.source, empty.error) == ("fallback", "the LLM answered with no text")
    assert (await describe_world(modules(), None)).source == "listing"


async def test_the_cached_file_is_reused_for_the_same_tools_only(tmp_path: Path) -> None:
    run = MemoryStore()
    first = await load_or_describe(run, modules(), ScriptedModel(["A town of letters and weather."]))
    assert run.get_json(WORLD_DESCRIPTION_FILE)["source"] == "llm"
    assert await load_or_describe(run, modules(), FailingModel()) == first  # no call: the model would fail
    other = await load_or_describe(run, [MessagingSpace()], ScriptedModel(["Only letters here."]))
    assert other.text == "Only letters here."


async def test_a_run_asks_once_and_a_recovered_actor_reads_the_runs_file(shell, tmp_path: Path) -> None:
    spec = parse_spec({
        "name": "world", "seed": 2,
        "population": [{"count": 3, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"router": "react", "modules": [{"type": "MessagingSpace"}, {"type": "WeatherEnvironment"}],
                        "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
    })
    run = tmp_path / "run"
    summary = await run_experiment(spec, run, shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(run) as reader:
        assert reader.query(WORLD_ROWS).to_pylist() == [{"caller": "router", "status": "ok", "n": 1}]
    saved = json.loads(RunLayout(run).world_description.read_text())
    assert saved["source"] == "llm" and saved["text"] and saved["text"] != listing_description(modules())

    # An actor rebuilt for this run (after its worker died, or on resume) reads the file: no LLM call.
    config = EnvRouterConfig(modules=(("MessagingSpace", {}), ("WeatherEnvironment", {})), router="react", run_dir=run)
    handle = EnvRouterActor(config)
    info = await handle.init(START, [0, 1, 2])
    assert info["world_description"] == saved["text"]
    assert [r for r in (await handle.end_consult(EndConsult(1))).records if r.prompt_name == WORLD_DESCRIPTION.name] == []
    await handle.close()
