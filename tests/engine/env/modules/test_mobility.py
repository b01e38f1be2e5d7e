"""MobilitySpace: a seeded or bundled city, Dijkstra travel times, trips resolved at the env step, replay and state."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.env.input_files import InputRoots, input_roots
from engine.env.modules.city import City
from engine.env.modules.mobility import MobilitySpace
from engine.env.requests import EnvRequest
from engine.env.routers.react import ReActRouter
from engine.errors import SpecError, ToolCallError
from engine.llm.backends.scripted import ScriptedModel

T0 = datetime(2024, 1, 1, 8, 0)

#: A triangle whose direct road A-B (5 km) is longer than the way through C (1.5 + 1.5 km).
TRIANGLE: dict[str, Any] = {
    "name": "Triangle",
    "regions": [{"id": "A", "name": "Alpha", "x": 0, "y": 0}, {"id": "B", "name": "Beta", "x": 3, "y": 0},
                {"id": "C", "name": "Gamma", "x": 1.5, "y": 1}],
    "roads": [["A", "B", 5.0], ["A", "C", 1.5], ["C", "B", 1.5]],
    "pois": [{"id": "home_a", "name": "Alpha Homes", "category": "home", "region": "A", "x": 0, "y": 0},
             {"id": "shop_b", "name": "Beta Shop", "category": "shop", "region": "B", "x": 3, "y": 0.5},
             {"id": "park_c", "name": "Gamma Park", "category": "park", "region": "C", "x": 1.5, "y": 1.3}],
}


def triangle(**kwargs: Any) -> MobilitySpace:
    return MobilitySpace(city=TRIANGLE, speed_kmh=10, homes={1: "home_a", 2: "home_a", 3: "shop_b"}, **kwargs)


async def call(space: MobilitySpace, name: str, **arguments: Any) -> Any:
    return await space.call_tool(name, arguments)


async def steps(space: MobilitySpace, *seconds: int) -> datetime:
    t = space.t or T0
    for tick in seconds:
        t += timedelta(seconds=tick)
        await space.step(tick, t)
    return t


# ---- the city ----------------------------------------------------------------------------------
def test_dijkstra_takes_the_shorter_two_road_route_over_the_long_direct_road() -> None:
    city = City.from_dict(TRIANGLE)
    assert city.route("home_a", "shop_b") == (3.5, ["home_a", "A", "C", "B", "shop_b"])
    assert city.route("A", "B")[0] == 3.0
    assert city.route("park_c", "park_c") == (0.0, ["park_c"])
    x, y = city.point_along(["home_a", "A", "C", "B", "shop_b"], 1.5)
    assert (x, y) == (1.5, 1.0)


def test_a_generated_city_is_the_same_for_a_seed_and_differs_between_seeds() -> None:
    first, again, other = City.generate(11, regions=5, pois_per_region=3), City.generate(11, 5, 3), City.generate(12, 5, 3)
    assert first.to_dict() == again.to_dict()
    assert first.to_dict() != other.to_dict()
    assert len(first.regions()) == 5 and len(first.pois()) == 15
    assert {p.region for p in first.pois("home")} == {r.id for r in first.regions()}  # a home in every region
    assert all(first.route("p0", p.id)[0] > 0 for p in first.pois()[1:])  # connected
    assert MobilitySpace(seed=11, regions=5, pois_per_region=3).city.digest() == first.digest()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"regions": 0}, "regions >= 1"),
    ({"city_file": "no_such_city.json"}, r"city_file: there is no file .no_such_city.json. under the bundled data \(small_city.json\)"),
    ({"city": TRIANGLE, "city_file": "small_city.json"}, "not both"),
    ({"city": {**TRIANGLE, "roads": []}}, "not every place can be reached"),
    ({"city": {"regions": [{"id": "A"}]}}, "malformed city"),
    ({"speed_kmh": 0}, "speed_kmh must be positive"),
    ({"homes": {1: "Atlantis"}}, "MobilitySpace homes: there is no place called 'Atlantis'"),
])
def test_an_unusable_city_is_a_spec_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        MobilitySpace(**kwargs)


def test_the_bundled_small_city_loads_by_name_and_a_city_file_by_path(tmp_path: Path) -> None:
    bundled = MobilitySpace(city_file="small_city.json")
    assert bundled.city.name == "Small City"
    assert (len(bundled.city.regions()), len(bundled.city.pois())) == (4, 12)
    path = tmp_path / "triangle.json"
    path.write_text(json.dumps(TRIANGLE))
    with input_roots(InputRoots((tmp_path,))):  # an allowed directory (a run's inputs/, POLIS_INPUT_DIRS)
        assert MobilitySpace(city_file=str(path)).city.to_dict() == City.from_dict(TRIANGLE).to_dict()
        assert MobilitySpace(city_file="triangle.json").city.to_dict() == City.from_dict(TRIANGLE).to_dict()


def test_homes_come_from_the_seed_and_the_agent_id_alone() -> None:
    one, two = MobilitySpace(seed=4), MobilitySpace(seed=4)
    one.bind_agents([1, 2, 3])
    two.bind_agents([3, 9])
    assert one.home(3) == two.home(3)
    assert one.home(3).category == "home"
    assert [MobilitySpace(seed=4).home(a).id for a in range(1, 30)] == [one.home(a).id for a in range(1, 30)]
    assert len({one.home(a).id for a in range(1, 30)}) > 1
    assert MobilitySpace(seed=4, homes={"3": "p5"}).home(3).id == "p5"  # type: ignore[dict-item]  # JSON keys are strings


# ---- tools ---------------------------------------------------------------------------------------
async def test_travel_time_is_the_shortest_road_distance_over_the_speed_and_arrival_waits_for_it() -> None:
    space = triangle()
    assert await call(space, "move_to", agent_id=1, destination="Beta Shop") == (
        "you will set off for Beta Shop (shop, shop_b) in Beta at the end of this step: 3.5 km, about 21 minutes at 10 km/h")
    assert await call(space, "where_am_i", agent_id=1) == (
        "You are at Alpha Homes (home, home_a) in Alpha. You set off for Beta Shop at the end of this step. "
        "Your home is Alpha Homes (home_a).")

    await steps(space, 600)  # 10 of 21 minutes
    assert await call(space, "where_am_i", agent_id=1) == (
        "You are travelling from Alpha Homes to Beta Shop (shop, shop_b) in Beta: 1.7 of 3.5 km (48%), arriving in about 11 minutes. "
        "Your home is Alpha Homes (home_a).")
    await steps(space, 600)  # 20 minutes: still 1 to go
    assert "arriving in about 1 minutes" in await call(space, "where_am_i", agent_id=1)
    await steps(space, 600)
    assert await call(space, "where_am_i", agent_id=1) == "You are at Beta Shop (shop, shop_b) in Beta. Your home is Alpha Homes (home_a)."


async def test_a_trip_shorter_than_the_tick_arrives_in_the_same_step_and_home_is_a_destination() -> None:
    space = triangle()
    await call(space, "move_to", agent_id=3, destination="gamma")  # a region, by name, any case
    await steps(space, 3600)
    assert (await call(space, "where_am_i", agent_id=3)).startswith("You are at the centre of Gamma (C).")
    assert [e["event"] for e in space.replay_rows(1, T0)["mobility_trips"]] == ["depart", "arrive"]
    await call(space, "move_to", agent_id=3, destination="home")
    await steps(space, 3600)
    assert (await call(space, "where_am_i", agent_id=3)).startswith("You are at Beta Shop")


async def test_nearby_lists_places_by_road_distance_filtered_by_category_and_radius() -> None:
    space = triangle()
    assert await call(space, "nearby", agent_id=1, radius_km=4) == (
        "Places within 4 km of Alpha Homes, nearest first:\n- Gamma Park (park, park_c) in Gamma: 1.8 km\n"
        "- Beta Shop (shop, shop_b) in Beta: 3.5 km")
    assert await call(space, "nearby", agent_id=1, category="shop") == (
        "No shop places within 1.5 km of Alpha Homes; the nearest is Beta Shop at 3.5 km.")
    with pytest.raises(ToolCallError, match="unknown category 'zoo'; categories: home, park, shop"):
        await call(space, "nearby", agent_id=1, category="zoo")


async def test_list_regions_and_statistics_describe_the_city_and_the_agents() -> None:
    space = triangle()
    space.bind_agents([1, 2, 3])
    assert await call(space, "list_regions") == (
        "Triangle has 3 regions:\n- Alpha (A): 1 home\n- Beta (B): 1 shop\n- Gamma (C): 1 park")
    await call(space, "move_to", agent_id=1, destination="shop_b")
    await steps(space, 60)
    assert await call(space, "mobility_statistics") == "Agents per region: Alpha 1, Beta 1; 1 trips in progress; 0 trips completed"


@pytest.mark.parametrize(("setup", "arguments", "message"), [
    ([], {"destination": "Nowhere"}, "there is no place called 'Nowhere'"),
    ([], {"destination": "home"}, "you are already at Alpha Homes"),
    ([{"destination": "park_c"}], {"destination": "shop_b"}, "you already set off for Gamma Park this step"),
    ([], {"agent_id": 7, "destination": "park_c"}, "there is no agent 7"),
])
async def test_a_refused_move_says_why_and_changes_nothing(setup: list[dict[str, Any]], arguments: dict[str, Any], message: str) -> None:
    space = triangle()
    space.bind_agents([1, 2, 3])
    for earlier in setup:
        await call(space, "move_to", agent_id=1, **earlier)
    before = space.dump_state()
    with pytest.raises(ToolCallError, match=message):
        await call(space, "move_to", **{"agent_id": 1, **arguments})
    assert space.dump_state() == before


async def test_travelling_agents_cannot_start_another_trip_or_look_around() -> None:
    space = triangle()
    await call(space, "move_to", agent_id=1, destination="shop_b")
    await steps(space, 60)
    with pytest.raises(ToolCallError, match="you are already travelling to Beta Shop; wait until you arrive"):
        await call(space, "move_to", agent_id=1, destination="park_c")
    with pytest.raises(ToolCallError, match="you are travelling; look around when you have arrived"):
        await call(space, "nearby", agent_id=1)


async def test_an_ambiguous_place_name_is_refused_with_the_candidates() -> None:
    city = {**TRIANGLE, "pois": [*TRIANGLE["pois"], {"id": "shop_c", "name": "Beta Shop", "category": "shop", "region": "C", "x": 1.5, "y": 0.8}]}
    space = MobilitySpace(city=city, homes={1: "home_a"})
    with pytest.raises(ToolCallError, match=r"'Beta Shop' is ambiguous: Beta Shop \(shop_b\), Beta Shop \(shop_c\)"):
        await call(space, "move_to", agent_id=1, destination="Beta Shop")
    assert "shop_c" in await call(space, "move_to", agent_id=1, destination="SHOP_C")


# ---- synchronous updates, replay, persistence -------------------------------------------------
async def test_a_steps_trips_do_not_depend_on_the_order_of_the_calls() -> None:
    moves = [(3, "park_c"), (1, "shop_b"), (2, "Gamma")]
    outcomes = []
    for order in (moves, moves[::-1]):
        space = triangle()
        space.bind_agents([1, 2, 3])
        for agent_id, destination in order:
            await call(space, "move_to", agent_id=agent_id, destination=destination)
        await steps(space, 600)
        outcomes.append((space.dump_state(), space.replay_rows(1, T0)))
    assert outcomes[0] == outcomes[1]
    assert [r["agent_id"] for r in outcomes[0][1]["mobility_trips"]] == [1, 2, 2, 3]  # agent 2 (1.5 km) arrived at once


async def test_replay_rows_each_step_fit_the_declared_datasets() -> None:
    space = triangle()
    space.bind_agents([1, 2])
    await call(space, "move_to", agent_id=1, destination="shop_b")
    schemas = {s.name: s for s in MobilitySpace.replay_datasets()}
    assert set(schemas) == {"mobility_state", "mobility_positions", "mobility_trips"}
    t1 = await steps(space, 600)
    rows = space.replay_rows(1, t1)
    assert set(rows) == set(schemas)
    for name, schema in schemas.items():
        assert schema.to_table(rows[name]).num_rows == len(rows[name])  # typed columns accept the rows
        assert all(list(r) == [c.name for c in schema.columns] for r in rows[name])
    assert rows["mobility_state"] == [{"step": 1, "t": t1, "travelling": 1, "departures": 1, "arrivals": 0, "trips_completed": 0}]
    first = rows["mobility_positions"][0]
    assert (first["agent_id"], first["status"], first["place"], first["destination"]) == (1, "travelling", "home_a", "shop_b")
    assert first["progress"] == pytest.approx(600 / 1260)
    # 1.67 km along home_a-A (0 km), A-C (1.5 km), then a ninth of C (1.5, 1) -> B (3, 0).
    assert (first["x_km"], first["y_km"]) == pytest.approx((1.5 + 1.5 / 9, 1 - 1 / 9), abs=1e-6)
    assert rows["mobility_positions"][1] == {"step": 1, "t": t1, "agent_id": 2, "status": "at", "place": "home_a", "region": "A",
                                             "destination": None, "progress": None, "x_km": 0.0, "y_km": 0.0}
    t3 = await steps(space, 600, 600)
    later = space.replay_rows(3, t3)
    assert later["mobility_trips"] == [{"step": 3, "t": t3, "agent_id": 1, "event": "arrive", "origin": "home_a",
                                        "destination": "shop_b", "distance_km": 3.5, "travel_minutes": 21.0}]
    assert later["mobility_state"][0]["trips_completed"] == 1


async def test_state_survives_to_workspace_and_from_workspace_mid_trip(tmp_path: Path) -> None:
    space = triangle()
    space.bind_workspace(tmp_path)
    await space.init(T0)
    await call(space, "move_to", agent_id=1, destination="shop_b")
    await steps(space, 600)
    await call(space, "move_to", agent_id=2, destination="park_c")  # still pending when saved
    await space.to_workspace()

    fresh = await MobilitySpace.from_workspace(tmp_path, city=TRIANGLE, speed_kmh=10, homes={1: "home_a", 2: "home_a", 3: "shop_b"})
    assert isinstance(fresh, MobilitySpace)
    assert fresh.dump_state() == space.dump_state() and fresh.t == space.t
    assert await call(fresh, "where_am_i", agent_id=1) == await call(space, "where_am_i", agent_id=1)
    for module in (space, fresh):
        await steps(module, 600, 600)
    assert fresh.dump_state() == space.dump_state()
    assert fresh.replay_rows(3, T0) == space.replay_rows(3, T0)


async def test_saved_state_is_not_loaded_onto_a_different_city(tmp_path: Path) -> None:
    space = MobilitySpace(seed=1)
    await space.to_workspace(tmp_path)
    with pytest.raises(SpecError, match="belongs to a different city"):
        await MobilitySpace.from_workspace(tmp_path, seed=2)


async def test_the_router_fills_the_callers_agent_id_and_observes_where_it_is() -> None:
    space = triangle()
    llm = ScriptedModel([{"thought": "go", "action": {"tool": "move_to", "arguments": {"destination": "Gamma Park"}}, "done": True}])
    router = ReActRouter([space], llm)
    await router.init(T0, agent_ids=[1, 2, 3])

    reply = await router.ask(EnvRequest("ask", 2, "walk to the park"))

    assert reply.status == "success" and reply.answer.startswith("move_to: you will set off for Gamma Park")
    await router.step(3600, T0 + timedelta(hours=1))
    assert (await router.observe(2)).startswith("You are at Gamma Park (park, park_c) in Gamma.")
