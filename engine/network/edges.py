"""A layer's edges: read from its file and checked against the agents, or generated; as int64 arrays.

Every problem with a file is found before the run starts, with the row (1-based, the header not counted)
and the column: a file that is missing or does not parse, no ``source`` or ``target`` column, an id that
is not an integer or no agent's, a self-loop where the layer allows none, a repeated edge (in an
undirected layer ``a, b`` repeats ``b, a``), a ``weight`` that is not a finite number, more than
:data:`MAX_EDGE_ROWS` edges. A file is read in a bounded child process (:mod:`engine.population.bounded_read`),
at admission and by the run alike: one that crashes its parser, or needs more than :data:`EDGE_LIMITS`, is refused.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from engine.population.bounded_read import DataFile, ReadLimits, read_bounded, read_parquet_within

__all__ = ["EDGE_LIMITS", "EDGE_SUFFIXES", "MAX_EDGE_BYTES", "MAX_EDGE_ROWS", "LayerEdges", "layer_edges", "read_edge_file"]

#: The edge files a layer may name, lower-cased endings.
EDGE_SUFFIXES = (".csv", ".parquet", ".jsonl")
#: The most edges one file may hold.
MAX_EDGE_ROWS = 10_000_000
#: The most bytes the columns Polis reads of an edge file (``source``, ``target``, ``weight``, ``type``) may decode
#: to: a Parquet file is checked against it by its footer and its dictionaries before any column is decoded.
MAX_EDGE_BYTES = 1024 * 2**20
#: What the process reading one edge file may use: the file's table, its id arrays and the checks' sort.
EDGE_LIMITS = ReadLimits(memory_mb=2048, cpu_s=120, wall_s=300.0, output_bytes=MAX_EDGE_BYTES)
_EDGE_COLUMNS = ("source", "target", "weight", "type")


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


def _edge_arrays(file: DataFile, agent_ids: np.ndarray, directed: bool, self_loops: bool) -> Iterator[Any]:
    """The file's ``source`` and ``target`` (int64 arrays), ``weight`` (a float64 array or None) and ``type`` (a list
    of text or None), checked (run in the reading process: see :func:`read_edge_file`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def fail(message: str, *, row: int | None = None, column: str | None = None) -> NetworkFileError:
        where = f"row {row}" + (f", column {column!r}" if column else "") + ": " if row is not None else ""
        return NetworkFileError(f"{file.label!r}: {where}{message}", file.field, row=row, column=column)

    suffix = file.path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            names = pq.read_schema(file.path).names
            _no_column_twice(names, fail)
            table = read_parquet_within(file.path, [name for name in _EDGE_COLUMNS if name in names],
                                        max_rows=MAX_EDGE_ROWS, max_bytes=MAX_EDGE_BYTES, fail=fail)
            table = table.cast(pa.schema([  # the dictionaries decoded, now that their size is known to fit
                field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field
                for field in table.schema]))
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(file.path, convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
        else:
            import pyarrow.json as pjson

            table = pjson.read_json(file.path)
    except (pa.ArrowException, OSError) as error:
        raise fail(f"cannot be read as {suffix[1:].upper()}: {error}") from None
    if table.num_rows > MAX_EDGE_ROWS:
        raise fail(f"has {table.num_rows} edges; an edge file has at most {MAX_EDGE_ROWS}")
    _no_column_twice(table.column_names, fail)
    for column in ("source", "target"):
        if column not in table.column_names:
            raise fail(f"has no {column!r} column; its columns: {', '.join(table.column_names)}", column=column)
    ends = {}
    for column in ("source", "target"):
        values = table.column(column)
        if not pa.types.is_integer(values.type):
            try:
                values = pc.cast(values, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                text = values.to_pylist()
                at = next((i for i, v in enumerate(text) if _not_id(v)), None)
                if at is None:
                    raise fail("holds a value that is not an agent id (an integer)", column=column) from None
                raise fail(f"{text[at]!r} is not an agent id (an integer)", row=at + 1, column=column) from None
        if (row := _first(np.asarray(values.is_null()))) is not None:
            raise fail("has no agent id", row=row + 1, column=column)
        try:
            ends[column] = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
        except OverflowError:  # an unsigned id past int64
            raise fail("has an agent id past the largest integer a dataset stores", column=column) from None
    source, target = ends["source"], ends["target"]
    known = np.unique(np.asarray(agent_ids, dtype=np.int64))
    for column, values in ends.items():
        if (row := _first(~np.isin(values, known))) is not None:
            raise fail(f"{int(values[row])} is no agent's id", row=row + 1, column=column)
    if not self_loops and (row := _first(source == target)) is not None:
        raise fail(f"a self-loop ({int(source[row])} to itself): the layer allows none (self_loops: true allows them)",
                   row=row + 1)
    low, high = (source, target) if directed else (np.minimum(source, target), np.maximum(source, target))
    order = np.lexsort((np.arange(len(low)), high, low))  # by pair, then by row: a repeat stands after its first
    repeated = np.flatnonzero((low[order][1:] == low[order][:-1]) & (high[order][1:] == high[order][:-1]))
    if repeated.size:
        at = int(order[1:][repeated].min())
        raise fail(f"the edge {int(source[at])} -> {int(target[at])} is there twice" +
                   ("" if directed else " (in an undirected layer, b -> a repeats a -> b)"), row=at + 1)
    del low, high, order, repeated
    yield source
    yield target
    weight = None
    if "weight" in table.column_names:
        try:
            weight = np.asarray(pc.cast(table.column("weight"), pa.float64()).to_numpy(zero_copy_only=False), dtype=float)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = table.column("weight").to_pylist()
            at = next((i for i, v in enumerate(text) if _not_number(v)), 0)
            raise fail(f"{text[at]!r} is not a number", row=at + 1, column="weight") from None
        if (row := _first(~np.isfinite(weight))) is not None:
            raise fail(f"{weight[row]!r} is not a finite number", row=row + 1, column="weight")
    yield weight
    kind = None
    if "type" in table.column_names:
        try:
            kind = pc.cast(table.column("type"), pa.string()).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            text = table.column("type").to_pylist()
            at = next((i for i, v in enumerate(text) if v is not None), 0)
            raise fail(f"{text[at]!r} is not text", row=at + 1, column="type") from None
    yield kind


def read_edge_file(path: Path, *, field: str, label: str, agent_ids: Sequence[int] | np.ndarray, layer: LayerSpec) -> LayerEdges:
    """The edges of ``path``, checked against the agents and the layer's rules.

    The file is parsed and checked in a bounded child process (:data:`EDGE_LIMITS`), at admission and when a run
    reads it alike: a file that crashes its parser, or needs more memory, time or output than the limits, is
    refused as any other.

    Raises:
        NetworkFileError: what is wrong, with ``field`` as its path and the row and column where one is at fault;
            the message names the file by ``label``, never by ``path``.
    """
    def fail(message: str) -> NetworkFileError:
        return NetworkFileError(f"{label!r}: {message}", field)

    suffix = path.suffix.lower()
    if suffix not in EDGE_SUFFIXES:
        raise fail(f"is not an edge file Polis reads: name a {', '.join(EDGE_SUFFIXES)} file")
    if not path.is_file():
        raise fail("is not a file")
    items = read_bounded(_edge_arrays, DataFile(path, field, label), np.asarray(agent_ids, dtype=np.int64),
                         layer.directed, layer.self_loops, error=NetworkFileError, limits=EDGE_LIMITS,
                         preload=("numpy", "pyarrow", "pyarrow.compute", "pyarrow.csv", "pyarrow.json", "pyarrow.parquet"))
    source, target, weight, kind = items if len(items) == 4 else (None,) * 4
    if not (isinstance(source, np.ndarray) and isinstance(target, np.ndarray) and source.dtype == target.dtype == np.int64
            and len(source) == len(target)
            and (weight is None or (isinstance(weight, np.ndarray) and weight.dtype == np.float64 and len(weight) == len(source)))
            and (kind is None or (isinstance(kind, list) and len(kind) == len(source)
                                  and all(k is None or isinstance(k, str) for k in kind)))):
        raise fail("cannot be read: its reading process answered something other than edges")
    return LayerEdges(source, target, weight, np.asarray(kind, dtype=object) if kind is not None else None)


def _generate(model: object, n: int, rng: np.random.Generator, persona: Callable[[str], Sequence[object]],
              directed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The generated edges as node indexes (``directed``: source to target), and a configuration model's degrees as asked."""
    if isinstance(model, BarabasiAlbert):
        return *barabasi_albert(n, model.m, rng, directed=directed), None
    if isinstance(model, ErdosRenyi):
        return *erdos_renyi(n, model.p, rng, directed=directed), None
    if isinstance(model, WattsStrogatz):
        return *watts_strogatz(n, model.k, model.p, rng, directed=directed), None
    if isinstance(model, Configuration):
        asked = _configuration_degrees(model, n, rng)
        return *configuration(asked, rng, directed=directed), asked
    assert isinstance(model, BlockModel)
    groups = group_codes(persona(model.attribute))
    return *block_model(groups, *block_probabilities(groups, model.mean_degree, model.homophily), rng, directed=directed), None


def _configuration_degrees(model: Configuration, n: int, rng: np.random.Generator) -> np.ndarray:
    """The degree each of the ``n`` agents asks for: as listed, or drawn from the distribution."""
    if model.degrees is not None:
        return np.asarray(model.degrees, dtype=np.int64)
    assert model.distribution is not None
    degrees = np.fromiter(model.distribution, dtype=np.int64)
    shares = np.fromiter(model.distribution.values(), dtype=float)
    return rng.choice(degrees, size=n, p=shares / shares.sum())


def _no_column_twice(names: Sequence[str], fail: Callable[..., NetworkFileError]) -> None:
    if twice := [name for name in _EDGE_COLUMNS if list(names).count(name) > 1]:
        raise fail(f"has the column {twice[0]!r} twice", column=twice[0])


def _not_id(value: object) -> bool:
    try:
        number = int(str(value))
    except ValueError:
        return True
    return not -(2**63) <= number < 2**63


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
    ``agent_ids``' order (a block model's groups).

    A generated undirected layer has each edge once (``source < target``); a ``directed`` one its directed edges
    (:mod:`engine.network.generators`), or with ``mutual`` each undirected edge both ways."""
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

    low, high, asked = _generate(layer.generate, len(ids), rng, sorted_persona, directed=layer.directed and not layer.mutual)
    source, target = ids[low], ids[high]
    if layer.mutual:
        source, target = np.concatenate([source, target]), np.concatenate([target, source])
    return LayerEdges(source, target, asked=asked)
