"""City: the road graph of regions and points of interest (POIs) that MobilitySpace moves agents on.

A city is plain data: regions (road junctions at a district's centre), POIs (each linked to its
region by a short road) and roads between regions, with coordinates in kilometres. It is built
deterministically from a seed, or read from a small JSON file or dict of the same shape as
:meth:`City.to_dict`. Shortest paths are Dijkstra's, in pure Python, ties broken by place id.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from engine.env.input_files import resolve_input_file
from engine.errors import SpecError

__all__ = ["POI_CATEGORIES", "City", "Place"]

#: Categories of generated POIs; every generated region has at least one ``home``.
POI_CATEGORIES = ("home", "workplace", "shop", "restaurant", "cafe", "park", "school", "hospital")
_LABELS = {"home": "Residences", "workplace": "Offices", "shop": "Market", "restaurant": "Restaurant",
           "cafe": "Cafe", "park": "Park", "school": "School", "hospital": "Clinic"}
_REGION_NAMES = ("Old Town", "Riverside", "Harbour", "Northgate", "Westfield", "Hillcrest", "Eastbrook",
                 "Market Square", "Southbank", "Greenway", "Stonebridge", "Lakeside")
_SPACING_KM = 2.0


@dataclass(frozen=True)
class Place:
    """A region centre or a POI."""

    id: str  #: ``r<n>`` for generated regions, ``p<n>`` for generated POIs
    name: str
    category: str  #: ``region`` for regions, else the POI category
    region: str  #: the region id (a region's own id)
    x: float  #: km east
    y: float  #: km north


def _km(a: Place, b: Place) -> float:
    return math.hypot(a.x - b.x, a.y - b.y)


class City:
    """A road graph of regions and POIs.

    Args:
        name: the city's name.
        places: regions and POIs (ids unique; every POI's ``region`` is a region id).
        roads: ``(region id, region id, km)`` links; each POI is linked to its region by its
            straight-line distance.

    Raises:
        SpecError: duplicate ids, unknown regions, or a city whose places are not all connected.
    """

    def __init__(self, name: str, places: list[Place], roads: list[tuple[str, str, float]]) -> None:
        self.name = name
        self.places: dict[str, Place] = {}
        for place in places:
            if place.id in self.places:
                raise SpecError(f"city {name!r}: place id {place.id!r} appears twice")
            self.places[place.id] = place
        self.adjacency: dict[str, list[tuple[str, float]]] = {pid: [] for pid in self.places}
        self.roads = [(a, b, float(km)) for a, b, km in roads]
        for place in places:
            if self.places.get(place.region, place).category != "region":
                raise SpecError(f"city {name!r}: {place.id} is in unknown region {place.region!r}")
            if place.category != "region":
                self._link(place.id, place.region, _km(place, self.places[place.region]))
        for a, b, km in self.roads:
            if a not in self.places or b not in self.places:
                raise SpecError(f"city {name!r}: road {a}-{b} names an unknown place")
            self._link(a, b, km)
        self._paths: dict[str, tuple[dict[str, float], dict[str, str]]] = {}
        if places and len(self.shortest(places[0].id)[0]) != len(self.places):
            raise SpecError(f"city {name!r}: not every place can be reached by road")

    def _link(self, a: str, b: str, km: float) -> None:
        if km < 0:
            raise SpecError(f"city {self.name!r}: road {a}-{b} has negative length")
        self.adjacency[a].append((b, km))
        self.adjacency[b].append((a, km))

    # ---- building ----------------------------------------------------------------------------
    @classmethod
    def generate(cls, seed: int, regions: int = 6, pois_per_region: int = 4) -> City:
        """A synthetic city: regions on a jittered grid joined to their grid neighbours, POIs around each centre.

        Raises:
            SpecError: fewer than one region or one POI per region.
        """
        if regions < 1 or pois_per_region < 1:
            raise SpecError("a generated city needs regions >= 1 and pois_per_region >= 1")
        rng = random.Random(f"polis-city:{seed}")  # a str seed hashes the same in every process
        cols = math.ceil(math.sqrt(regions))
        names = rng.sample(_REGION_NAMES, len(_REGION_NAMES))
        centres = []
        for i in range(regions):
            row, col = divmod(i, cols)
            name = names[i] if i < len(names) else f"District {i + 1}"
            x, y = col * _SPACING_KM + rng.uniform(-0.4, 0.4), row * _SPACING_KM + rng.uniform(-0.4, 0.4)
            centres.append(Place(f"r{i}", name, "region", f"r{i}", round(x, 3), round(y, 3)))
        roads = []
        for i, centre in enumerate(centres):
            neighbours = ([i + 1] if (i + 1) % cols and i + 1 < regions else []) + ([i + cols] if i + cols < regions else [])
            for j in neighbours:
                roads.append((centre.id, f"r{j}", round(_km(centre, centres[j]) * rng.uniform(1.05, 1.35), 3)))
        pois: list[Place] = []
        for centre in centres:
            others = rng.sample(POI_CATEGORIES[1:], len(POI_CATEGORIES) - 1)
            seen: dict[str, int] = {}
            for j in range(pois_per_region):
                category = "home" if j == 0 else others[(j - 1) % len(others)]
                seen[category] = seen.get(category, 0) + 1
                label = _LABELS[category] + ("" if seen[category] == 1 else f" {seen[category]}")
                angle, radius = rng.uniform(0, 2 * math.pi), rng.uniform(0.1, 0.6)
                pois.append(Place(f"p{len(pois)}", f"{centre.name} {label}", category, centre.id,
                                  round(centre.x + radius * math.cos(angle), 3), round(centre.y + radius * math.sin(angle), 3)))
        return cls(f"city-{seed}", [*centres, *pois], roads)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> City:
        """Read the :meth:`to_dict` shape (road ``km`` may be left out: straight-line length).

        Raises:
            SpecError: a malformed city.
        """
        try:
            regions = [Place(r["id"], r["name"], "region", r["id"], float(r["x"]), float(r["y"])) for r in data["regions"]]
            pois = [Place(p["id"], p["name"], p["category"], p["region"], float(p["x"]), float(p["y"])) for p in data.get("pois", [])]
            where = {p.id: p for p in regions}
            roads = [(r[0], r[1], float(r[2]) if len(r) > 2 else _km(where[r[0]], where[r[1]])) for r in data.get("roads", [])]
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise SpecError(f"malformed city description: {error!r}") from None
        return cls(str(data.get("name", "city")), [*regions, *pois], roads)

    @classmethod
    def load(cls, city_file: str) -> City:
        """Read a city JSON file from the allowed input roots (:mod:`engine.env.input_files`).

        ``city_file`` is a path relative to the run's ``inputs/`` directory or a ``POLIS_INPUT_DIRS``
        directory, an absolute path under one of them, or the name of a file bundled in
        ``engine/env/modules/data`` (``small_city.json``).

        Raises:
            SpecError: the file is not under an allowed root (the same message whether or not it
                exists), or it is not a valid city.
        """
        path = resolve_input_file("city_file", city_file, bundled=Path(str(resources.files("engine.env.modules.data"))))
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise SpecError(f"city_file {city_file!r} cannot be read as UTF-8 text: {type(error).__name__}") from None
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as error:
            raise SpecError(f"city_file {city_file!r} is not JSON: {error}") from None

    def to_dict(self) -> dict[str, Any]:
        """The city as JSON-able data (the shape :meth:`from_dict` reads)."""
        regions = [p for p in self.places.values() if p.category == "region"]
        return {
            "name": self.name,
            "regions": [{"id": p.id, "name": p.name, "x": p.x, "y": p.y} for p in regions],
            "pois": [{"id": p.id, "name": p.name, "category": p.category, "region": p.region, "x": p.x, "y": p.y}
                     for p in self.places.values() if p.category != "region"],
            "roads": [list(r) for r in self.roads],
        }

    def digest(self) -> str:
        """A short fingerprint of the city (saved with state, so state is never loaded onto another city)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    # ---- queries -----------------------------------------------------------------------------
    def regions(self) -> list[Place]:
        return [p for p in self.places.values() if p.category == "region"]

    def pois(self, category: str | None = None) -> list[Place]:
        return [p for p in self.places.values() if p.category != "region" and category in (None, p.category)]

    def find(self, query: str) -> Place:
        """The place whose id or name is ``query`` (case-insensitive).

        Raises:
            LookupError: no place, or several places, answer to that name.
        """
        key = query.strip().lower()
        if key in self.places:
            return self.places[key]
        matches = [p for p in self.places.values() if key in (p.id.lower(), p.name.lower())]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise LookupError(f"{query!r} is ambiguous: " + ", ".join(f"{p.name} ({p.id})" for p in matches))
        raise LookupError(f"there is no place called {query!r}; use nearby or list_regions to find places")

    def shortest(self, source: str) -> tuple[dict[str, float], dict[str, str]]:
        """Dijkstra from ``source``: distance (km) to every place and each place's predecessor."""
        if source not in self._paths:
            dist, prev = {source: 0.0}, {}
            heap = [(0.0, source)]
            done: set[str] = set()
            while heap:
                d, node = heapq.heappop(heap)
                if node in done:
                    continue
                done.add(node)
                for nxt, km in self.adjacency[node]:
                    if nxt not in done and d + km < dist.get(nxt, math.inf):
                        dist[nxt], prev[nxt] = d + km, node
                        heapq.heappush(heap, (d + km, nxt))
            self._paths[source] = (dist, prev)
        return self._paths[source]

    def route(self, a: str, b: str) -> tuple[float, list[str]]:
        """The shortest road distance (km) from ``a`` to ``b`` and the places on the way (both ends included)."""
        dist, prev = self.shortest(a)
        path = [b]
        while path[-1] != a:
            path.append(prev[path[-1]])
        return dist[b], path[::-1]

    def point_along(self, path: list[str], km: float) -> tuple[float, float]:
        """The coordinates ``km`` along ``path`` (interpolated within a road)."""
        for a, b in zip(path, path[1:], strict=False):
            length = min(w for n, w in self.adjacency[a] if n == b)
            if km <= length:
                f = km / length if length else 1.0
                pa, pb = self.places[a], self.places[b]
                return pa.x + f * (pb.x - pa.x), pa.y + f * (pb.y - pa.y)
            km -= length
        last = self.places[path[-1]]
        return last.x, last.y
