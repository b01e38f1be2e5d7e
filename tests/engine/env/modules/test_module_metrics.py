"""Each built-in module's summary series after scripted tool calls: per-step counts reset, stocks and means are right."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from engine.env.base import EXPERIMENTER_ID, EnvBase
from engine.env.metrics import metric_rows
from engine.env.modules.economy import EconomySpace
from engine.env.modules.events import EventSpace
from engine.env.modules.games import PrisonersDilemmaGame, PublicGoodsGame, TrustGame
from engine.env.modules.global_info import GlobalInformationSpace
from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.mobility import MobilitySpace
from engine.env.modules.reference_economy import PersonEconomySpace
from engine.env.modules.social_media import SocialMediaSpace
from engine.env.modules.weather import WeatherSpace
from engine.env.registry import env_module_names, resolve_env_module

T0 = datetime(2024, 1, 1, 8, 0)
AGENTS = [1, 2, 3, 4]


async def ready(module: EnvBase) -> EnvBase:
    await module.init(T0)
    module.bind_agents(AGENTS)
    return module


async def call(module: EnvBase, tool: str, **arguments: Any) -> Any:
    return await module.call_tool(tool, arguments)


async def step(module: EnvBase, tick: int = 3600) -> dict[str, float]:
    """Run one env step and return the metrics it reports (checked against the declaration, as the actor does)."""
    await module.step(tick, (module.t or T0) + timedelta(seconds=tick))
    metric_rows("test", 1, module.t or T0, [module])  # raises on an undeclared name or a non-finite value
    return module.metrics()


async def test_messaging_counts_this_steps_messages_and_senders() -> None:
    space = await ready(MessagingSpace())
    await call(space, "send_message", agent_id=1, to_agent_id=2, content="hi")
    await call(space, "send_message", agent_id=2, to_agent_id=3, content="hello")
    await call(space, "post_to_group", agent_id=1, group="club", content="all")
    await call(space, "send_system_message", agent_id=EXPERIMENTER_ID, to_agent_id=4, content="notice")
    assert await step(space) == {"messages_sent": 3.0, "direct_messages": 2.0, "group_posts": 1.0, "system_messages": 1.0,
                                 "active_senders": 2.0}
    assert await step(space) == {"messages_sent": 0.0, "direct_messages": 0.0, "group_posts": 0.0, "system_messages": 0.0,
                                 "active_senders": 0.0}


async def test_social_media_counts_this_steps_actions_and_likes_per_post() -> None:
    space = await ready(SocialMediaSpace())
    assert "likes_per_post" not in space.metrics()  # no post yet: no ratio
    await call(space, "create_post", agent_id=1, text="first")
    await call(space, "create_post", agent_id=2, text="second")
    first = await step(space)
    assert (first["posts"], first["active_agents"], first["likes"], first["likes_per_post"]) == (2.0, 2.0, 0.0, 0.0)
    await call(space, "like_post", agent_id=2, post_id=1)
    await call(space, "like_post", agent_id=3, post_id=1)
    await call(space, "comment", agent_id=3, post_id=1, text="nice")
    await call(space, "repost", agent_id=3, post_id=2)
    await call(space, "follow", agent_id=1, target_agent_id=2)
    assert await step(space) == {"posts": 0.0, "reposts": 1.0, "comments": 1.0, "likes": 2.0, "follows": 1.0, "unfollows": 0.0,
                                 "active_agents": 3.0, "likes_per_post": pytest.approx(2 / 3)}
    await call(space, "unfollow", agent_id=1, target_agent_id=2)
    third = await step(space)
    assert (third["unfollows"], third["follows"], third["likes"], third["active_agents"]) == (1.0, 0.0, 0.0, 1.0)


async def test_economy_reports_inequality_money_flows_work_and_prices_after_adjustment() -> None:
    space = await ready(EconomySpace(accounts={1: 100.0, 2: 50.0, 3: 0.0}, goods={"bread": 2.5, "coat": 40.0},
                                     price_adjustment=0.5, target_demand=1.0))
    await call(space, "buy", agent_id=1, good="bread", quantity=4)
    await call(space, "work", agent_id=3, hours=2)
    await call(space, "work", agent_id=4, hours=1)
    values = await step(space)
    # wealth after the step: 30, 50, 90, 115 (agent 4 opened with the default 100 and earned 15):
    # Gini = 2 * (1*30 + 2*50 + 3*90 + 4*115) / (4 * 285) - 5/4
    assert values == {
        "gini_wealth": pytest.approx(2 * 860 / 1140 - 1.25), "median_wealth": 70.0, "mean_wealth": 71.25, "total_money": 285.0,
        "spending": 10.0, "income": 45.0, "units_sold": 4.0, "workers": 2.0, "employment_rate": 0.5, "hours_worked": 3.0,
        # bread sold 4 against a target of 1: up by half; no coat sold: down by half
        "mean_price": pytest.approx((3.75 + 20.0) / 2), "price_bread": 3.75, "price_coat": 20.0,
    }
    quiet = await step(space)
    assert (quiet["spending"], quiet["income"], quiet["units_sold"], quiet["workers"], quiet["hours_worked"]) == (0, 0, 0, 0, 0)
    assert quiet["total_money"] == 285.0 and quiet["price_bread"] == 1.88


async def test_economy_declares_one_price_per_good_of_its_kwargs() -> None:
    space = EconomySpace(goods={"tea": 1.0})
    assert {"price_tea", "gini_wealth"} <= set(space.metric_descriptions()) and "price_food" not in space.metric_descriptions()


async def test_an_economy_without_accounts_leaves_out_what_is_undefined() -> None:
    space = EconomySpace(goods={"tea": 1.0})
    await space.init(T0)
    space.bind_agents([])
    values = await step(space)
    assert "gini_wealth" not in values and "median_wealth" not in values and values["total_money"] == 0.0


async def test_person_economy_counts_currency_changes_in_wealth() -> None:
    space = PersonEconomySpace(people=[{"id": 1, "currency": 10.0}, {"id": 2, "currency": 30.0}])
    await space.init(T0)
    space.bind_agents([1, 2])
    await call(space, "add_currency", agent_id=1, amount=20.0)
    values = await step(space)
    assert (values["gini_wealth"], values["median_wealth"], values["total_money"]) == (0.0, 30.0, 60.0)


async def test_events_count_attendance_while_an_event_runs() -> None:
    space = await ready(EventSpace(events=[{"title": "fair", "start": "2024-01-01T08:00", "end": "2024-01-01T10:00"}]))
    await call(space, "attend", agent_id=1, event_id=1)
    await call(space, "attend", agent_id=2, event_id=1)
    await call(space, "announce_event", agent_id=3, title="talk", start="2024-01-02T08:00", end="2024-01-02T09:00")
    assert await step(space) == {"attendance": 2.0, "attendees": 2.0, "events_active": 1.0, "announced": 1.0, "signups": 2.0,
                                 "cancellations": 0.0}
    await call(space, "cancel_attendance", agent_id=2, event_id=1)
    second = await step(space)
    assert (second["attendance"], second["cancellations"], second["signups"], second["announced"]) == (1.0, 1.0, 0.0, 0.0)
    assert (await step(space))["attendance"] == 0.0  # the fair ended at 10:00


TRIANGLE: dict[str, Any] = {
    "name": "Triangle",
    "regions": [{"id": "A", "name": "Alpha", "x": 0, "y": 0}, {"id": "B", "name": "Beta", "x": 3, "y": 0},
                {"id": "C", "name": "Gamma", "x": 1.5, "y": 1}],
    "roads": [["A", "B", 5.0], ["A", "C", 1.5], ["C", "B", 1.5]],
    "pois": [{"id": "home_a", "name": "Alpha Homes", "category": "home", "region": "A", "x": 0, "y": 0},
             {"id": "shop_b", "name": "Beta Shop", "category": "shop", "region": "B", "x": 3, "y": 0.5},
             {"id": "park_c", "name": "Gamma Park", "category": "park", "region": "C", "x": 1.5, "y": 1.3}],
}


async def test_mobility_counts_departures_arrivals_and_agents_in_transit() -> None:
    space = await ready(MobilitySpace(city=TRIANGLE, speed_kmh=10, homes={a: "home_a" for a in AGENTS}))
    await call(space, "move_to", agent_id=1, destination="shop_b")  # 1.5 + 1.5 + 0.5 km: 21 minutes
    await call(space, "move_to", agent_id=2, destination="park_c")  # 1.5 + 0.3 km: 10.8 minutes
    assert await step(space, tick=600) == {"departures": 2.0, "arrivals": 0.0, "travelling": 2.0, "km_departed": pytest.approx(5.3)}
    assert await step(space, tick=700) == {"departures": 0.0, "arrivals": 2.0, "travelling": 0.0, "km_departed": 0.0}


async def test_weather_reports_each_locations_temperature_their_mean_and_changes() -> None:
    space = await ready(WeatherSpace(locations=["north", "south"], initial_temperature={"north": 10.0, "south": 20.0},
                                     change_probability=0.0, temperature_variability=0.0))
    await call(space, "change_weather", agent_id=1, weather="rainy", temperature=15.0, location="north")
    assert await step(space) == {"mean_temperature": 17.5, "changes": 1.0, "temperature_north": 15.0, "temperature_south": 20.0}
    # north drifts a fifth of the way back to its base of 10
    assert await step(space) == {"mean_temperature": 17.0, "changes": 0.0, "temperature_north": 14.0, "temperature_south": 20.0}


async def test_global_information_counts_facts_published_in_the_step() -> None:
    space = await ready(GlobalInformationSpace(facts=["opening", {"text": "later", "time": "2024-01-01T10:00"}]))
    await call(space, "broadcast", agent_id=1, text="news")
    assert await step(space) == {"published": 2.0, "broadcasts": 1.0, "facts_public": 2.0}
    assert await step(space) == {"published": 1.0, "broadcasts": 0.0, "facts_public": 3.0}  # 10:00: "later" is out


async def test_prisoners_dilemma_reports_the_rounds_cooperation_rate_and_mean_payoff() -> None:
    game = await ready(PrisonersDilemmaGame(pairs=[[1, 2], [3, 4]]))
    await call(game, "play", agent_id=1, move="cooperate")
    await call(game, "play", agent_id=2, move="cooperate")
    await call(game, "play", agent_id=3, move="defect")  # agent 4 makes no move: the pair earns nothing
    assert await step(game) == {"players": 4.0, "moves": 3.0, "cooperation_rate": pytest.approx(2 / 3), "mean_payoff": 3.0}
    assert await step(game) == {"players": 4.0, "moves": 0.0}  # no move, no rate and no payoff this round


async def test_public_goods_reports_the_rounds_contributions() -> None:
    game = await ready(PublicGoodsGame(endowment=10, multiplier=2.0, groups=[[1, 2]]))
    await call(game, "contribute", agent_id=1, amount=10)
    await call(game, "contribute", agent_id=2, amount=0)
    assert await step(game) == {"players": 2.0, "moves": 2.0, "mean_contribution": 5.0, "contribution_rate": 0.5, "mean_payoff": 15.0}


async def test_trust_game_reports_what_was_sent_and_returned_each_round() -> None:
    game = await ready(TrustGame(endowment=10, multiplier=3.0, pairs=[[1, 2]]))
    await call(game, "invest", agent_id=1, amount=4)
    assert await step(game) == {"players": 2.0, "moves": 1.0, "invested": 4.0, "returned": 0.0, "trust_ratio": 0.4, "mean_payoff": 9.0}
    await call(game, "invest", agent_id=1, amount=0)
    await call(game, "return_tokens", agent_id=2, amount=6)
    second = await step(game)
    assert (second["invested"], second["returned"], second["return_ratio"], second["trust_ratio"]) == (0.0, 6.0, 0.5, 0.0)


@pytest.mark.parametrize("name", env_module_names())
async def test_every_registered_module_reports_only_declared_finite_metrics_after_a_quiet_step(name: str) -> None:
    module = await ready(resolve_env_module(name)())
    await module.step(3600, T0 + timedelta(hours=1))
    rows = metric_rows("test", 1, T0, [module])
    assert rows, f"{name} reports no metric"
    assert {r["metric"] for r in rows} <= set(module.metric_descriptions())
