"""MobilitySpace: agents live in a small city of regions and places and travel between them.

Updates are synchronous: a ``move_to`` made during a tick is queued and the trip starts when the
tick's env step runs (in agent-id order), as if the agent had left at the start of the tick (a move
an intervention settles between ticks sets off at once and travels during the next tick). A trip
takes its shortest road distance divided by the speed; at each env step a trip that has used up its
travel time arrives, otherwise it reports its progress. Agents start at home, a residence picked
from the seed and the agent id alone.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from engine.env.base import EnvBase
from engine.env.modules.city import City, Place
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["MobilitySpace"]

_NEARBY_LIMIT = 10
_STEP, _T = (Column(name="step", type="int64", description="society step (1-based) that just ended"),
             Column(name="t", type="timestamp", description="simulated time at the end of the step"))
_STATE = DatasetSchema(name="mobility_state", kind="env", description="MobilitySpace totals after each env step", columns=(
    _STEP, _T,
    Column(name="travelling", type="int64", description="agents in transit after the step"),
    Column(name="departures", type="int64", description="trips that started in this step"),
    Column(name="arrivals", type="int64", description="trips that ended in this step"),
    Column(name="trips_completed", type="int64", description="trips completed since the start"),
))
_POSITIONS = DatasetSchema(name="mobility_positions", kind="env", description="each agent's position after each env step", columns=(
    _STEP, _T,
    Column(name="agent_id", type="int64", description="the agent"),
    Column(name="status", type="string", description="at (at a place) | travelling"),
    Column(name="place", type="string", description="place id where the agent is (travelling: where it left from)"),
    Column(name="region", type="string", description="region id of that place"),
    Column(name="destination", type="string", description="place id of the trip's end (travelling only)"),
    Column(name="progress", type="float64", description="share of the trip's distance covered, 0-1 (travelling only)"),
    Column(name="x_km", type="float64", description="km east of the city origin"),
    Column(name="y_km", type="float64", description="km north of the city origin"),
))
_TRIPS = DatasetSchema(name="mobility_trips", kind="env", description="each trip's departure and arrival", columns=(
    _STEP, _T,
    Column(name="agent_id", type="int64", description="the travelling agent"),
    Column(name="event", type="string", description="depart | arrive"),
    Column(name="origin", type="string", description="place id the trip started from"),
    Column(name="destination", type="string", description="place id the trip goes to"),
    Column(name="distance_km", type="float64", description="shortest road distance"),
    Column(name="travel_minutes", type="float64", description="travel time at the module's speed"),
))


class MobilitySpace(EnvBase):
    """A city of regions and places: agents see where they are, find places nearby and travel to them.

    An agent can ``move_to`` a place or region (by id or name, or ``home``): the trip takes the
    shortest road distance at the city's speed, and the agent arrives at a later env step.
    ``where_am_i`` tells the agent where it is or how far its trip has got; ``nearby`` lists places
    within a radius, optionally of one category; ``list_regions`` describes the city.

    Args:
        seed: builds the synthetic city and picks each agent's home.
        regions: number of regions of a synthetic city.
        pois_per_region: places per region of a synthetic city (the first is a residence).
        city_file: a city JSON file instead of a synthetic city: a path under the run's ``inputs/``
            directory or a ``POLIS_INPUT_DIRS`` directory, or ``small_city.json`` (bundled); any other
            path is refused (:mod:`engine.env.input_files`).
        city: the same JSON shape inline.
        speed_kmh: travel speed.
        nearby_radius_km: default radius of ``nearby``.
        homes: agent id -> home place id, overriding the seeded choice.

    Raises:
        SpecError: an unusable city (a file outside the allowed roots, a bad file, unreachable
            places), speed or home.
    """

    METRICS = {
        "departures": "trips that started in this step",
        "arrivals": "trips that ended in this step",
        "travelling": "agents in transit after this step",
        "km_departed": "road km of the trips that started in this step",
    }

    @classmethod
    def check_inputs(cls, kwargs: Mapping[str, Any]) -> None:
        if isinstance(kwargs.get("city_file"), str):
            try:
                City.load(kwargs["city_file"])
            except SpecError as error:
                error.path = "city_file"
                raise

    def __init__(self, seed: int = 0, regions: int = 6, pois_per_region: int = 4, city_file: str | None = None,
                 city: dict[str, Any] | None = None, speed_kmh: float = 20.0, nearby_radius_km: float = 1.5,
                 homes: dict[int, str] | None = None) -> None:
        super().__init__()
        if city_file is not None and city is not None:
            raise SpecError("MobilitySpace takes city_file or city, not both")
        if speed_kmh <= 0:
            raise SpecError("MobilitySpace speed_kmh must be positive")
        if city is not None:
            self.city = City.from_dict(city)
        elif city_file is not None:
            self.city = City.load(city_file)
        else:
            self.city = City.generate(seed, regions, pois_per_region)
        self._seed, self._speed, self._radius = seed, speed_kmh, nearby_radius_km
        self._homes_pool = [p.id for p in self.city.pois("home")] or [p.id for p in self.city.pois()] or [self.city.regions()[0].id]
        try:
            self._homes = {int(k): self.city.find(v).id for k, v in (homes or {}).items()}
        except LookupError as error:
            raise SpecError(f"MobilitySpace homes: {error}") from None
        self._positions: dict[int, str] = {}
        self._trips: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []  #: the last step's departures and arrivals
        self._events_unreported: list[dict[str, Any]] = []  #: since the last step
        self._completed = 0
        #: how long a trip that sets off now travels before the step ends: the tick during a step, 0 at a settle
        self._departing_tick = 0

    @classmethod
    def is_concurrency_safe(cls) -> bool:
        """True: a tool reads the static city and queues or reads the caller's own position and trip."""
        return True

    # ---- helpers -----------------------------------------------------------------------------
    def home(self, agent_id: int) -> Place:
        """The agent's home: from ``homes``, else a residence picked from the seed and the agent id."""
        if agent_id not in self._homes:
            pick = random.Random(f"polis-home:{self._seed}:{agent_id}").randrange(len(self._homes_pool))
            self._homes[agent_id] = self._homes_pool[pick]
        return self.city.places[self._homes[agent_id]]

    def _position(self, agent_id: int) -> Place:
        """Where the agent is (travelling: where it left from)."""
        self.check_agent(agent_id)
        return self.city.places[self._positions.get(agent_id) or self.home(agent_id).id]

    def _label(self, place: Place) -> str:
        if place.category == "region":
            return f"the centre of {place.name} ({place.id})"
        return f"{place.name} ({place.category}, {place.id}) in {self.city.places[place.region].name}"

    def _minutes(self, km: float) -> float:
        return km / self._speed * 60

    def _queued_destination(self, agent_id: int) -> str | None:
        queued = self.updates.of(agent_id)
        return queued[-1]["destination"] if queued else None

    # ---- tools -------------------------------------------------------------------------------
    @tool(readonly=False)
    def move_to(self, agent_id: int, destination: str) -> str:
        """Travel to a place or region, given by id, name or 'home'; the trip starts at the end of this step."""
        origin = self._position(agent_id)
        if agent_id in self._trips:
            trip = self._trips[agent_id]
            raise ValueError(f"you are already travelling to {self.city.places[trip['destination']].name}; wait until you arrive")
        if (queued := self._queued_destination(agent_id)) is not None:
            raise ValueError(f"you already set off for {self.city.places[queued].name} this step")
        target = self.home(agent_id) if destination.strip().lower() == "home" else self.city.find(destination)
        if target.id == origin.id:
            raise ValueError(f"you are already at {target.name}")
        km, _ = self.city.route(origin.id, target.id)
        self.updates.queue(agent_id, destination=target.id)
        return (f"you will set off for {self._label(target)} at the end of this step: {km:.1f} km, "
                f"about {math.ceil(self._minutes(km))} minutes at {self._speed:g} km/h")

    @tool(readonly=True, kind="observe")
    def where_am_i(self, agent_id: int) -> str:
        """Where agent_id is, or how far its trip has got, and where its home is."""
        here = self._position(agent_id)
        trip = self._trips.get(agent_id)
        if trip is not None:
            done = trip["elapsed"] / trip["seconds"]
            left = math.ceil((trip["seconds"] - trip["elapsed"]) / 60)
            text = (f"You are travelling from {here.name} to {self._label(self.city.places[trip['destination']])}: "
                    f"{done * trip['km']:.1f} of {trip['km']:.1f} km ({done:.0%}), arriving in about {left} minutes.")
        else:
            text = f"You are at {self._label(here)}."
        if (queued := self._queued_destination(agent_id)) is not None:
            text += f" You set off for {self.city.places[queued].name} at the end of this step."
        return text + f" Your home is {self.home(agent_id).name} ({self.home(agent_id).id})."

    @tool(readonly=True)
    def nearby(self, agent_id: int, category: str | None = None, radius_km: float | None = None) -> str:
        """List places within radius_km by road of where agent_id is, nearest first, optionally of one category."""
        here = self._position(agent_id)
        if agent_id in self._trips:
            raise ValueError("you are travelling; look around when you have arrived")
        categories = sorted({p.category for p in self.city.pois()})
        if category is not None and category not in categories:
            raise ValueError(f"unknown category {category!r}; categories: {', '.join(categories)}")
        radius = self._radius if radius_km is None else radius_km
        dist, _ = self.city.shortest(here.id)
        found = sorted((dist[p.id], p.id) for p in self.city.pois(category) if p.id != here.id)
        within = [(km, pid) for km, pid in found if km <= radius][:_NEARBY_LIMIT]
        kind = f"{category} places" if category else "places"
        if not within:
            nearest = f"; the nearest is {self.city.places[found[0][1]].name} at {found[0][0]:.1f} km" if found else ""
            return f"No {kind} within {radius:g} km of {here.name}{nearest}."
        lines = [f"- {self._label(self.city.places[pid])}: {km:.1f} km" for km, pid in within]
        return f"{kind.capitalize()} within {radius:g} km of {here.name}, nearest first:\n" + "\n".join(lines)

    @tool(readonly=True)
    def list_regions(self) -> str:
        """Describe the city: each region with its id and how many places of each category it has."""
        lines = []
        for region in self.city.regions():
            counts: dict[str, int] = {}
            for p in self.city.pois():
                if p.region == region.id:
                    counts[p.category] = counts.get(p.category, 0) + 1
            lines.append(f"- {region.name} ({region.id}): " + (", ".join(f"{n} {c}" for c, n in sorted(counts.items())) or "no places"))
        return f"{self.city.name} has {len(lines)} regions:\n" + "\n".join(lines)

    @tool(readonly=True, kind="statistics")
    def mobility_statistics(self) -> str:
        """Agents per region, trips in progress and trips completed."""
        per_region: dict[str, int] = {}
        for agent_id in self._known_agents():
            if agent_id not in self._trips:
                region = self.city.places[self._position(agent_id).region].name
                per_region[region] = per_region.get(region, 0) + 1
        regions = ", ".join(f"{name} {n}" for name, n in sorted(per_region.items())) or "none"
        return f"Agents per region: {regions}; {len(self._trips)} trips in progress; {self._completed} trips completed"

    # ---- the env step ------------------------------------------------------------------------
    def _known_agents(self) -> list[int]:
        return sorted({*(self._agent_ids or []), *self._positions, *self._trips})

    def _event(self, kind: str, agent_id: int, trip: dict[str, Any]) -> None:
        self._events_unreported.append({"agent_id": agent_id, "event": kind, "origin": trip["origin"], "destination": trip["destination"],
                             "distance_km": trip["km"], "travel_minutes": round(trip["seconds"] / 60, 3)})

    def _advance(self, agent_id: int, trip: dict[str, Any], tick: int) -> None:
        trip["elapsed"] = min(trip["elapsed"] + tick, trip["seconds"])
        if trip["elapsed"] >= trip["seconds"]:
            del self._trips[agent_id]
            self._positions[agent_id] = trip["destination"]
            self._completed += 1
            self._event("arrive", agent_id, trip)

    def apply_update(self, update: Update) -> None:
        """Set off on a queued trip (during a step it travels the whole tick: it left at its start)."""
        agent_id = update.agent_id
        origin = self._position(agent_id).id
        km, path = self.city.route(origin, update["destination"])
        trip = {"origin": origin, "destination": path[-1], "path": path, "km": round(km, 6),
                "seconds": max(1, math.ceil(km / self._speed * 3600)), "elapsed": 0}
        self._positions[agent_id] = origin
        self._trips[agent_id] = trip
        self._event("depart", agent_id, trip)
        if self._departing_tick:
            self._advance(agent_id, trip, self._departing_tick)

    async def step(self, tick: int, t: datetime) -> None:
        for agent_id in sorted(self._trips):
            self._advance(agent_id, self._trips[agent_id], tick)
        self._departing_tick = tick
        try:
            self.apply_pending()
        finally:
            self._departing_tick = 0
        self._events, self._events_unreported = self._events_unreported, []
        self.t = t

    def metrics(self) -> dict[str, float]:
        departed = [e["distance_km"] for e in self._events if e["event"] == "depart"]
        return {"departures": float(len(departed)), "arrivals": float(len(self._events) - len(departed)),
                "travelling": float(len(self._trips)), "km_departed": round(sum(departed), 6)}

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_STATE, _POSITIONS, _TRIPS]

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        positions = []
        for agent_id in self._known_agents():
            here, trip = self._position(agent_id), self._trips.get(agent_id)
            progress = trip["elapsed"] / trip["seconds"] if trip else None
            x, y = self.city.point_along(trip["path"], progress * trip["km"]) if trip else (here.x, here.y)
            positions.append({"step": step, "t": t, "agent_id": agent_id, "status": "travelling" if trip else "at",
                              "place": here.id, "region": here.region, "destination": trip["destination"] if trip else None,
                              "progress": progress, "x_km": round(x, 6), "y_km": round(y, 6)})
        arrivals = sum(1 for e in self._events if e["event"] == "arrive")
        state = {"step": step, "t": t, "travelling": len(self._trips), "departures": len(self._events) - arrivals,
                 "arrivals": arrivals, "trips_completed": self._completed}
        trips = [{"step": step, "t": t, **e} for e in self._events]
        return {_STATE.name: [state], _POSITIONS.name: positions, _TRIPS.name: trips}

    # ---- persistence -------------------------------------------------------------------------
    def dump_state(self) -> dict[str, Any]:
        return {
            "city": self.city.digest(),
            "positions": {str(k): v for k, v in self._positions.items()},
            "trips": {str(k): v for k, v in self._trips.items()},
            "events_unreported": self._events_unreported,
            "completed": self._completed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if state["city"] != self.city.digest():
            raise SpecError("the saved MobilitySpace state belongs to a different city (seed, size or city file changed)")
        self._positions = {int(k): v for k, v in state["positions"].items()}
        self._trips = {int(k): v for k, v in state["trips"].items()}
        self._events_unreported = list(state.get("events_unreported", []))
        self._completed = state["completed"]
