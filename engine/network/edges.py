"""A layer's edges: read from its file and checked against the agents, or generated; as int64 arrays.

Every problem with a file is found before the run starts, with the row (1-based, the header not counted)
and the column: a file that is missing or does not parse, no ``source`` or ``target`` column, an id that
is not an integer or no agent's, a self-loop where the layer allows none, a repeated edge (in an
undirected layer ``a, b`` repeats ``b, a``), a ``weight`` that is not a finite number.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import NetworkFileError
from engine.network.generators import (
    barabasi_albert,
    block_model,
    block_probabilities,
    configuration,
    erdos_renyi,
    group_codes,
    watts_strogatz,
)
from engine.network.spec import BarabasiAlbert, BlockModel, Configuration, ErdosRenyi, LayerSpec, WattsStrogatz

__all__ = ["EDGE_SUFFIXES", "LayerEdges", "layer_edges", "read_edge_file"]

#: The edge files a layer may name, lower-cased endings.
EDGE_SUFFIXES = (".csv", ".parquet", ".jsonl")


@dataclass(frozen=True)
class LayerEdges:
    """One layer's edges, each from ``source`` to ``target`` (an undirected edge once)."""

    source: np.ndarray
    target: np.ndarray
    weight: np.ndarray | None = None
    kind: np.ndarray | None = None  #: the ``type`` column, where the file has one
    asked: np.ndarray | None = None  #: a configuration model's degrees as asked, over the agents in id order


def _first(mask: np.ndarray) -> int | None:
    found = np.flatnonzero(mask)
    return int(found[0]) if found.size else None


def read_edge_file(path: Path, *, field: str, label: str, agent_ids: Sequence[int] | np.ndarray, layer: LayerSpec) -> LayerEdges:
    """The edges of ``path``, checked against the agents and the layer's rules.

    Raises:
        NetworkFileError: what is wrong, with ``field`` as its path and the row and column where one is at fault.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    def fail(message: str, *, row: int | None = None, column: str | None = None) -> NetworkFileError:
        where = f"row {row}" + (f", column {column!r}" if column else "") + ": " if row is not None else ""
        return NetworkFileError(f"{label!r}: {where}{message}", field, row=row, column=column)

    suffix = path.suffix.lower()
    if suffix not in EDGE_SUFFIXES:
        raise fail(f"is not an edge file Polis reads: name a {', '.join(EDGE_SUFFIXES)} file")
    if not path.is_file():
        raise fail(f"is not a file ({path})")
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
        else:
            import pyarrow.json as pjson

            table = pjson.read_json(path)
    except (pa.ArrowException, OSError) as error:
        raise fail(f"cannot be read as {suffix[1:].upper()}: {error}") from None
    for column in ("source", "target"):
        if column not in table.column_names:
            raise fail(f"has no {column!r} column; its columns: {', '.join(table.column_names)}", column=column)
    ends = {}
    for column in ("source", "target"):
        values = table.column(column)
        if not pa.types.is_integer(values.type):
            try:
                values = pc.cast(values, pa.int64())
            except pa.ArrowInvalid:
                text = values.to_pylist()
                at = next(i for i, v in enumerate(text) if not str(v).lstrip("-").isdigit())
                raise fail(f"{text[at]!r} is not an agent id (an integer)", row=at + 1, column=column) from None
        if (row := _first(np.asarray(values.is_null()))) is not None:
            raise fail("has no agent id", row=row + 1, column=column)
        ends[column] = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    source, target = ends["source"], ends["target"]
    known = np.asarray(sorted(agent_ids), dtype=np.int64)
    for column, values in ends.items():
        if (row := _first(~np.isin(values, known))) is not None:
            raise fail(f"{int(values[row])} is no agent's id", row=row + 1, column=column)
    if not layer.self_loops and (row := _first(source == target)) is not None:
        raise fail(f"a self-loop ({int(source[row])} to itself): the layer allows none (self_loops: true allows them)",
                   row=row + 1)
    low, high = (source, target) if layer.directed else (np.minimum(source, target), np.maximum(source, target))
    order = np.lexsort((np.arange(len(low)), high, low))  # by pair, then by row: a repeat stands after its first
    repeated = np.flatnonzero((low[order][1:] == low[order][:-1]) & (high[order][1:] == high[order][:-1]))
    if repeated.size:
        at = int(order[1:][repeated].min())
        raise fail(f"the edge {int(source[at])} -> {int(target[at])} is there twice" +
                   ("" if layer.directed else " (in an undirected layer, b -> a repeats a -> b)"), row=at + 1)
    weight = None
    if "weight" in table.column_names:
        try:
            weight = np.asarray(pc.cast(table.column("weight"), pa.float64()).to_numpy(zero_copy_only=False), dtype=float)
        except pa.ArrowInvalid:
            text = table.column("weight").to_pylist()
            at = next(i for i, v in enumerate(text) if _not_number(v))
            raise fail(f"{text[at]!r} is not a number", row=at + 1, column="weight") from None
        if (row := _first(~np.isfinite(weight))) is not None:
            raise fail(f"{weight[row]!r} is not a finite number", row=row + 1, column="weight")
    kind = np.asarray(table.column("type").to_pylist(), dtype=object) if "type" in table.column_names else None
    return LayerEdges(source, target, weight, kind)


def _generate(model: object, n: int, rng: np.random.Generator,
              persona: Callable[[str], Sequence[object]]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The generated edges as node indexes, and a configuration model's degrees as asked."""
    if isinstance(model, BarabasiAlbert):
        return *barabasi_albert(n, model.m, rng), None
    if isinstance(model, ErdosRenyi):
        return *erdos_renyi(n, model.p, rng), None
    if isinstance(model, WattsStrogatz):
        return *watts_strogatz(n, model.k, model.p, rng), None
    if isinstance(model, Configuration):
        asked = _configuration_degrees(model, n, rng)
        return *configuration(asked, rng), asked
    assert isinstance(model, BlockModel)
    groups = group_codes(persona(model.attribute))
    return *block_model(groups, *block_probabilities(groups, model.mean_degree, model.homophily), rng), None


def _configuration_degrees(model: Configuration, n: int, rng: np.random.Generator) -> np.ndarray:
    """The degree each of the ``n`` agents asks for: as listed, or drawn from the distribution."""
    if model.degrees is not None:
        return np.asarray(model.degrees, dtype=np.int64)
    assert model.distribution is not None
    degrees = np.fromiter(model.distribution, dtype=np.int64)
    shares = np.fromiter(model.distribution.values(), dtype=float)
    return rng.choice(degrees, size=n, p=shares / shares.sum())


def _not_number(value: object) -> bool:
    try:
        float(str(value))
    except ValueError:
        return True
    return False


def layer_edges(layer: LayerSpec, name: str, agent_ids: Sequence[int] | np.ndarray, seed: int, path: Path | None = None,
                field: str = "", persona: Callable[[str], Sequence[object]] | None = None) -> LayerEdges:
    """The layer's edges over ``agent_ids``: read from ``path`` (its file, located), or generated (seeded by ``seed``
    and ``name``) over the agents in id order. ``persona(field)`` gives each agent's value of a persona field, in
    ``agent_ids``' order (a block model's groups)."""
    if layer.generate is None:
        assert path is not None
        return read_edge_file(path, field=field, label=str(layer.from_), agent_ids=agent_ids, layer=layer)
    order = np.argsort(np.asarray(agent_ids, dtype=np.int64), kind="stable")
    ids = np.asarray(agent_ids, dtype=np.int64)[order]
    rng = np.random.default_rng(random.Random(f"network:{seed}:{name}").getrandbits(63))

    def sorted_persona(field: str) -> list[object]:
        assert persona is not None, "a block model needs the agents' persona"
        values = persona(field)
        return [values[i] for i in order]

    low, high, asked = _generate(layer.generate, len(ids), rng, sorted_persona)
    source, target = ids[low], ids[high]
    if layer.directed:  # a generated edge is mutual: both directions
        source, target = np.concatenate([source, target]), np.concatenate([target, source])
    return LayerEdges(source, target, asked=asked)
