"""WeatherSpace: seeded per-location weather, changes and moves at the step, replay, state, registry and reference format."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.env.base import EXPERIMENTER_ID
from engine.env.modules.weather import WEATHER_CONDITIONS, WeatherSpace
from engine.env.registry import resolve_env_module
from engine.env.testing import ToolCall, check_update_discipline
from engine.errors import SpecError, ToolCallError
from engine.reference import reference_to_spec

T0 = datetime(2024, 1, 1, 8, 0)
HOUR = 3600
PLACES = ["north", "south", "harbour"]


async def call(space: WeatherSpace, name: str, **arguments: Any) -> Any:
    return await space.call_tool(name, arguments, readonly=space.tools()[name].readonly)


async def run(space: WeatherSpace, steps: int) -> list[dict[str, Any]]:
    """Step ``steps`` hours; the weather series rows of every step."""
    rows = []
    for n in range(1, steps + 1):
        t = T0 + timedelta(hours=n)
        await space.step(HOUR, t)
        rows += space.replay_rows(n, t)["weather_series"]
    return rows


async def space_of(**kwargs: Any) -> WeatherSpace:
    space = WeatherSpace(**{"locations": PLACES, **kwargs})
    await space.init(T0)
    space.bind_agents([1, 2, 3])
    return space


async def test_empty_kwargs_give_one_sunny_location() -> None:
    space = WeatherSpace()
    await space.init(T0)
    assert await call(space, "get_weather", agent_id=1) == "Weather in city: sunny, 20.0 °C"
    assert await call(space, "get_average_temperature") == "average temperature 20.0 °C over 1 locations (city: sunny, 20.0 °C)"


async def test_the_same_seed_gives_the_same_series_and_another_seed_another() -> None:
    first, again, other = await space_of(seed=7), await space_of(seed=7), await space_of(seed=8)
    series = await run(first, 30)
    assert series == await run(again, 30)
    assert series != await run(other, 30)
    conditions = {r["weather"] for r in series}
    assert len(conditions) > 1 and conditions <= set(WEATHER_CONDITIONS)  # it does change, among known conditions
    temperatures = {r["location"]: r["temperature"] for r in series[-3:]}
    assert len(set(temperatures.values())) > 1  # each location has its own series


async def test_agents_changes_do_not_alter_the_seeded_series_of_other_locations() -> None:
    quiet, busy = await space_of(seed=3), await space_of(seed=3)
    await call(busy, "change_weather", agent_id=1, weather="snowy", temperature=-4, location="north")
    quiet_rows, busy_rows = await run(quiet, 5), await run(busy, 5)
    assert [r for r in quiet_rows if r["location"] != "north"] == [r for r in busy_rows if r["location"] != "north"]
    assert (busy_rows[0]["weather"], busy_rows[0]["temperature"], busy_rows[0]["changed_by_agents"]) == ("snowy", -4.0, 1)


async def test_a_change_and_a_move_take_effect_at_the_end_of_the_step() -> None:
    space = await space_of(initial_weather={"south": "rainy"}, initial_temperature={"south": 12.0}, change_probability=0.0,
                           temperature_variability=0.0)
    assert await call(space, "set_agent_location", agent_id=2, location="south") == "you will be in south from the end of this step"
    assert await call(space, "change_weather", agent_id=2, weather="stormy") == "the weather in south becomes stormy at the end of this step"
    assert await call(space, "get_weather", agent_id=2) == "Weather in north: sunny, 20.0 °C"  # nothing moved yet
    await run(space, 1)
    assert await call(space, "get_weather", agent_id=2) == "Weather in south: stormy, 12.0 °C"
    assert space.replay_rows(1, T0)["weather_changes"] == [
        {"step": 1, "t": T0, "agent_id": 2, "location": "south", "weather": "stormy", "temperature": 12.0}]


@pytest.mark.parametrize(("arguments", "message"), [
    ({"weather": "hail of frogs"}, "Input should be 'sunny', 'cloudy'"),
    ({"weather": "rainy", "location": "moon"}, "unknown location 'moon'"),
    ({"weather": "rainy", "temperature": 99}, "between -90 and 60"),
    ({"weather": "rainy", "agent_id": 9}, "there is no agent 9"),
])
async def test_a_refused_change_says_why_and_queues_nothing(arguments: dict[str, Any], message: str) -> None:
    space = await space_of()
    with pytest.raises(ToolCallError, match=message):
        await call(space, "change_weather", **{"agent_id": 1, **arguments})
    assert len(space.updates) == 0


async def test_the_experimenter_changes_any_locations_weather() -> None:
    space = await space_of(change_probability=0.0, temperature_variability=0.0)
    await space.call_tool("change_weather", {"agent_id": EXPERIMENTER_ID, "weather": "foggy", "location": "harbour"})
    assert space.apply_pending() == 1
    assert "harbour: foggy, 20.0 °C" in await call(space, "get_average_temperature")


async def test_weather_space_keeps_the_update_discipline() -> None:
    calls = [ToolCall(2, "set_agent_location", {"location": "harbour"}), ToolCall(2, "change_weather", {"weather": "windy"}),
             ToolCall(1, "change_weather", {"weather": "snowy", "temperature": -2.5, "location": "harbour"}),
             ToolCall(3, "get_weather"), ToolCall(1, "change_weather", {"weather": "lava"})]
    await check_update_discipline(lambda: WeatherSpace(locations=PLACES, seed=5), calls, agent_ids=[1, 2, 3])


async def test_replay_rows_fit_the_declared_datasets() -> None:
    space = await space_of(agent_locations={"3": "south"})
    await call(space, "change_weather", agent_id=1, weather="cloudy")
    await run(space, 1)
    rows = space.replay_rows(1, T0)
    schemas = {s.name: s for s in WeatherSpace.replay_datasets()}
    assert set(rows) == set(schemas) == {"weather_series", "weather_changes"}
    for name, schema in schemas.items():
        assert schema.to_table(rows[name]).num_rows == len(rows[name])
        assert all(list(r) == [c.name for c in schema.columns] for r in rows[name])
    assert [(r["location"], r["agents_here"]) for r in rows["weather_series"]] == [("north", 2), ("south", 1), ("harbour", 0)]


async def test_state_survives_a_workspace_round_trip_and_continues_the_series(tmp_path: Path) -> None:
    space = await space_of(seed=11)
    space.bind_workspace(tmp_path)
    await run(space, 3)
    await call(space, "set_agent_location", agent_id=1, location="harbour")  # still queued when saved
    await space.to_workspace()
    fresh = await WeatherSpace.from_workspace(tmp_path, locations=PLACES, seed=11)
    assert isinstance(fresh, WeatherSpace)
    fresh.bind_agents([1, 2, 3])  # as the router does at init
    assert fresh.dump_state() == space.dump_state() and len(fresh.updates) == 1
    assert await run(fresh, 4) == await run(space, 4)
    with pytest.raises(SpecError, match="other locations"):
        await WeatherSpace.from_workspace(tmp_path, locations=["elsewhere"])


@pytest.mark.parametrize("kwargs", [{"locations": []}, {"initial_weather": "plasma"}, {"initial_temperature": {"mars": 1.0}},
                                    {"change_probability": 2.0}, {"agent_locations": {1: "moon"}}])
def test_unusable_kwargs_are_refused_as_spec_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SpecError):
        WeatherSpace(**kwargs)


def test_the_registry_and_the_reference_format_know_it_as_weather_environment() -> None:
    assert resolve_env_module("WeatherEnvironment") is WeatherSpace is resolve_env_module("WeatherSpace")
    config = {"env_modules": [{"module_type": "WeatherEnvironment", "kwargs": {"locations": PLACES, "seed": 4}}],
              "agents": [{"agent_id": 1, "agent_type": "PersonAgent", "kwargs": {"id": 1, "name": "Ann"}}]}
    spec = reference_to_spec(config, {"steps": [{"type": "run", "num_steps": 1, "tick": 600}]})
    assert [(m.type, m.kwargs) for m in spec.environment.modules] == [("WeatherSpace", {"locations": PLACES, "seed": 4})]
