"""Reading a run: its datasets, one agent as of a step, and what its results page shows.

Everything here reads through the engine's read-only :class:`~engine.storage.reader.ReplayReader`
(committed rows only) and writes nothing but the file :func:`export_dataset` is given. The CLI, the
``polis`` front door and the REST service all read runs through these functions; the service adds its
sandbox (query limits, owners), not another reader.
"""

from __future__ import annotations

from engine.results.agents import list_agent_files, read_agent, read_agent_file
from engine.results.datasets import DATASET_NAME, check_dataset_name, export_dataset, list_datasets
from engine.results.models import AgentFile, AgentFiles, AgentMemory, ColumnInfo, DatasetInfo
from engine.results.report import DatasetEntry, ReportData, is_run_dir, load_report

__all__ = [
    "DATASET_NAME",
    "AgentFile",
    "AgentFiles",
    "AgentMemory",
    "ColumnInfo",
    "DatasetEntry",
    "DatasetInfo",
    "ReportData",
    "check_dataset_name",
    "export_dataset",
    "is_run_dir",
    "list_agent_files",
    "list_datasets",
    "load_report",
    "read_agent",
    "read_agent_file",
]
