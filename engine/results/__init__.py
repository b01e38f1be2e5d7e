"""Reading a run: what it gives back (this package's models), and the readers that give it.

The readers live in the modules: :mod:`.datasets` (the catalogue with row counts, one dataset exported as a
Parquet file), :mod:`.agents` (one agent's profile, config and memory as of a step; its workspace's files)
and :mod:`.report` (everything the results page shows). They read through the engine's read-only
:class:`~engine.storage.reader.ReplayReader` (committed rows only) and write nothing but the file an export
is given. The CLI, the ``polis`` front door and the REST service all read runs through them; the service
adds its sandbox (query limits, owners), not another reader.

This package's top level holds only the models (pydantic, no Dask, no DuckDB), so an HTTP client that
answers with them stays light.
"""

from __future__ import annotations

from engine.results.models import AgentFile, AgentFiles, AgentMemory, ColumnInfo, DatasetInfo

__all__ = ["AgentFile", "AgentFiles", "AgentMemory", "ColumnInfo", "DatasetInfo"]
