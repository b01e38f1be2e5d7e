"""WeatherSpace: per-location weather that evolves from a seed, which agents read and can change.

The weather of each location (a condition and a temperature) evolves at every env step from the
module's seed alone: the draw of location ``L`` at step ``n`` comes from ``Random(seed, L, n)``,
so the same seed gives the same series whatever the agents did, and a restored module continues
the series without carrying a generator state. Agents' changes are synchronous, as in the other
modules: ``change_weather`` and ``set_agent_location`` queue updates that the env step applies
after the step's natural evolution, in (agent id, call order) order.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any, Literal, get_args

from engine.env.base import EXPERIMENTER_ID, EnvBase
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["WEATHER_CONDITIONS", "WeatherCondition", "WeatherSpace"]

#: The conditions a location's weather can be in (the seeded evolution picks among them); a tool
#: argument of this type shows them to the routing LLM as an enum.
WeatherCondition = Literal["sunny", "cloudy", "rainy", "stormy", "snowy", "foggy", "windy"]
WEATHER_CONDITIONS: tuple[str, ...] = get_args(WeatherCondition)

_SERIES = DatasetSchema(
    name="weather_series",
    kind="env",
    description="WeatherSpace: each location's weather after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="location", type="string", description="the location"),
        Column(name="weather", type="string", description="its condition"),
        Column(name="temperature", type="float64", description="its temperature in degrees Celsius"),
        Column(name="changed_by_agents", type="int64", description="agents' changes applied to it since the last row"),
        Column(name="agents_here", type="int64", description="agents located there"),
    ),
)
_CHANGES = DatasetSchema(
    name="weather_changes",
    kind="env",
    description="WeatherSpace: every change of weather an agent (or the experimenter) made, in the step it took effect",
    columns=(
        Column(name="step", type="int64", description="step in which it took effect"),
        Column(name="t", type="timestamp", description="simulated time at the end of that step"),
        Column(name="agent_id", type="int64", description="who changed it (-1: the experimenter)"),
        Column(name="location", type="string", description="the location changed"),
        Column(name="weather", type="string", description="the new condition"),
        Column(name="temperature", type="float64", description="the new temperature"),
    ),
)


def _per_location(value: Any, locations: list[str], name: str) -> dict[str, Any]:
    """One value for every location, or a mapping location -> value (locations it skips get the default)."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(locations))
        if unknown:
            raise SpecError(f"WeatherSpace {name} names unknown locations {unknown}; locations are {locations}")
        return dict(value)
    return {location: value for location in locations}


class WeatherSpace(EnvBase):
    """Weather: each location has its own weather (a condition and a temperature) that changes from step to step.

    Agents see the weather where they are, can move to another location, and can change a
    location's weather; a move or a change takes effect at the end of the current step.

    Args:
        locations: the locations' names (default one location, ``city``).
        initial_weather: the starting condition, for all locations or per location.
        initial_temperature: the starting temperature (degrees Celsius), for all or per location;
            temperatures drift around it.
        seed: drives the weather's evolution (same seed, same series).
        change_probability: chance per step that a location's condition changes by itself.
        temperature_variability: standard deviation of a step's temperature change.
        agent_locations: agent id -> starting location (others start at the first location).

    Raises:
        SpecError: no locations, an unknown condition or location, or a probability outside [0, 1].
    """

    METRICS = {
        "mean_temperature": "temperature averaged over the locations after this step, in degrees Celsius",
        "changes": "changes of weather agents (or the experimenter) made that took effect in this step",
    }

    def __init__(
        self,
        locations: list[str] | None = None,
        initial_weather: str | dict[str, str] = "sunny",
        initial_temperature: float | dict[str, float] = 20.0,
        seed: int = 0,
        change_probability: float = 0.2,
        temperature_variability: float = 1.5,
        agent_locations: dict[int, str] | None = None,
    ) -> None:
        super().__init__()
        self._locations = [str(name) for name in (locations if locations is not None else ["city"])]
        if not self._locations or len(set(self._locations)) != len(self._locations):
            raise SpecError("WeatherSpace locations must be a non-empty list of distinct names")
        if not 0.0 <= change_probability <= 1.0 or temperature_variability < 0:
            raise SpecError("WeatherSpace change_probability must be in [0, 1] and temperature_variability not negative")
        weather = _per_location(initial_weather, self._locations, "initial_weather")
        base = _per_location(initial_temperature, self._locations, "initial_temperature")
        self._seed, self._p_change, self._sigma = seed, float(change_probability), float(temperature_variability)
        self._base = {loc: float(base.get(loc, 20.0)) for loc in self._locations}
        self._weather: dict[str, dict[str, Any]] = {}  #: location -> its weather and temperature now
        try:
            for loc in self._locations:
                self._weather[loc] = {"weather": self._condition(weather.get(loc, "sunny")), "temperature": self._base[loc]}
        except ValueError as error:
            raise SpecError(f"WeatherSpace initial_weather: {error}") from None
        try:
            self._agent_locations = {int(k): self._location(v) for k, v in (agent_locations or {}).items()}
        except ValueError as error:
            raise SpecError(f"WeatherSpace agent_locations: {error}") from None
        self._steps = 0  #: env steps run so far (the index of the seeded draws)
        self._changes_unreported: list[dict[str, Any]] = []  #: changes applied since the last env step
        self._changes: list[dict[str, Any]] = []  #: the changes the last env step reports

    # ---- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _condition(weather: str) -> str:
        name = str(weather).strip().lower()
        if name not in WEATHER_CONDITIONS:
            raise ValueError(f"unknown weather {weather!r}; one of {', '.join(WEATHER_CONDITIONS)}")
        return name

    def _location(self, location: str) -> str:
        if location not in self._locations:
            raise ValueError(f"unknown location {location!r}; locations are {', '.join(self._locations)}")
        return location

    def _where(self, agent_id: int) -> str:
        """The agent's location, its own queued move included (an agent reads back its own move)."""
        moves = [u["location"] for u in self.updates.of(agent_id) if u["kind"] == "move"]
        return moves[-1] if moves else self._agent_locations.get(agent_id, self._locations[0])

    def _render(self, location: str) -> str:
        now = self._weather[location]
        return f"{now['weather']}, {now['temperature']:.1f} °C"

    def _evolve(self) -> None:
        """One step of seeded weather: each location's draw depends on (seed, location, step) only."""
        self._steps += 1
        for location in self._locations:
            rng = random.Random(f"polis-weather:{self._seed}:{location}:{self._steps}")
            now = self._weather[location]
            if rng.random() < self._p_change:
                now["weather"] = rng.choice([c for c in WEATHER_CONDITIONS if c != now["weather"]])
            pull = 0.2 * (self._base[location] - now["temperature"])  # drifts back towards its base temperature
            now["temperature"] = round(now["temperature"] + pull + rng.gauss(0.0, self._sigma), 1)

    # ---- tools -------------------------------------------------------------------------------
    @tool(readonly=True, kind="observe")
    def get_weather(self, agent_id: int) -> str:
        """Show the weather (condition and temperature) where you are."""
        self.check_agent(agent_id)
        location = self._agent_locations.get(agent_id, self._locations[0])
        return f"Weather in {location}: {self._render(location)}"

    @tool(readonly=False)
    def change_weather(self, agent_id: int, weather: WeatherCondition, temperature: float | None = None, location: str | None = None) -> str:
        """Change the weather of a location (default: where you are) from the end of this step; the temperature is optional."""
        if agent_id != EXPERIMENTER_ID:  # the experimenter changes weather anywhere without being an agent
            self.check_agent(agent_id)
        place = self._location(location) if location is not None else self._where(agent_id)
        if temperature is not None and not -90.0 <= temperature <= 60.0:
            raise ValueError("temperature must be between -90 and 60 degrees Celsius")
        self.updates.queue(agent_id, kind="change", location=place, weather=weather, temperature=temperature)
        return f"the weather in {place} becomes {weather} at the end of this step"

    @tool(readonly=False)
    def set_agent_location(self, agent_id: int, location: str) -> str:
        """Move yourself to another location; you are there from the end of this step."""
        self.check_agent(agent_id)
        place = self._location(location)
        self.updates.queue(agent_id, kind="move", location=place)
        return f"you will be in {place} from the end of this step"

    @tool(readonly=True, kind="statistics")
    def get_average_temperature(self) -> str:
        """The average temperature over all locations, and each location's weather."""
        mean = sum(w["temperature"] for w in self._weather.values()) / len(self._weather)
        each = "; ".join(f"{loc}: {self._render(loc)}" for loc in self._locations)
        return f"average temperature {mean:.1f} °C over {len(self._locations)} locations ({each})"

    # ---- the step ----------------------------------------------------------------------------
    def apply_update(self, update: Update) -> None:
        """Apply a queued move or change of weather (a change overrides the step's own evolution)."""
        if update["kind"] == "move":
            self._agent_locations[update.agent_id] = update["location"]
            return
        now = self._weather[update["location"]]
        now["weather"] = update["weather"]
        if update["temperature"] is not None:
            now["temperature"] = round(float(update["temperature"]), 1)
        self._changes_unreported.append({"agent_id": update.agent_id, "location": update["location"], **now})

    async def step(self, tick: int, t: datetime) -> None:
        self.t = t
        self._evolve()
        self.apply_pending()
        self._changes, self._changes_unreported = self._changes_unreported, []

    # ---- replay and persistence --------------------------------------------------------------
    def metric_descriptions(self) -> dict[str, str]:
        """The class's metrics and each location's temperature (``temperature_<location>``)."""
        return {**self.METRICS, **{f"temperature_{loc}": f"temperature in {loc} after this step, in degrees Celsius"
                                   for loc in self._locations}}

    def metrics(self) -> dict[str, float]:
        temperatures = {f"temperature_{loc}": float(self._weather[loc]["temperature"]) for loc in self._locations}
        return {"mean_temperature": round(sum(temperatures.values()) / len(temperatures), 6),
                "changes": float(len(self._changes)), **temperatures}

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_SERIES, _CHANGES]

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        here = {loc: 0 for loc in self._locations}
        for agent_id in self._agent_ids or self._agent_locations:
            here[self._agent_locations.get(agent_id, self._locations[0])] += 1
        changed = {loc: sum(1 for c in self._changes if c["location"] == loc) for loc in self._locations}
        series = [{"step": step, "t": t, "location": loc, **self._weather[loc], "changed_by_agents": changed[loc],
                   "agents_here": here[loc]} for loc in self._locations]
        changes = [{"step": step, "t": t, **c} for c in self._changes]
        return {_SERIES.name: series, _CHANGES.name: changes}

    def dump_state(self) -> dict[str, Any]:
        return {
            "steps": self._steps,
            "weather": {loc: dict(w) for loc, w in self._weather.items()},
            "agent_locations": {str(k): v for k, v in self._agent_locations.items()},
            "changes": self._changes,
            "changes_unreported": self._changes_unreported,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if sorted(state["weather"]) != sorted(self._locations):
            raise SpecError("the saved WeatherSpace state has other locations than this module")
        self._steps = int(state["steps"])
        self._weather = {str(loc): dict(w) for loc, w in state["weather"].items()}
        self._agent_locations = {int(k): v for k, v in state["agent_locations"].items()}
        self._changes = list(state["changes"])
        self._changes_unreported = list(state["changes_unreported"])
