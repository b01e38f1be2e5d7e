"""The engine as the control plane sees it: the one module of the engine that ``service`` imports from.

Beside it, ``service`` imports only the engine's value modules, which its HTTP client shares and which
pull in neither Dask nor DuckDB: :mod:`engine.errors`, :mod:`engine.run_status` and
:mod:`engine.run_progress` (``tests/test_layers.py`` holds the rule). Whatever else the service needs
of the engine is added here, by name, so the seam between them stays one list.
"""

from __future__ import annotations

from engine.engine_loop import EngineLoop
from engine.env.input_files import InputRoots, input_roots, resolve_input_file
from engine.env.registry import resolve_env_module
from engine.fidelity import fidelity, regression_fidelity
from engine.grid_files import locate_grid_files
from engine.grid_keys import check_grid_keys
from engine.network.files import check_network, locate_network_files
from engine.network.spec import count_expected_edges
from engine.population import read_population_files
from engine.results.agents import list_agent_files, read_agent, read_agent_file
from engine.results.datasets import check_dataset_name, export_dataset, list_datasets
from engine.results.report import ReportData, is_run_dir, load_report
from engine.results.series import Panel
from engine.settings import EngineSettings
from engine.society.fork.as_of import check_as_of_kept
from engine.society.fork.materialize import find_fork_point, materialize_fork, plan_fork
from engine.society.fork.plan import ForkSpec, completed_steps_at
from engine.society.run.cluster import open_client
from engine.society.run.dashboard import cluster_dashboard, experiment_page
from engine.society.run.extend import extend_spec
from engine.society.run.runner import RunSummary
from engine.society.run.sweep import run_spec
from engine.society.shells import open_shell
from engine.society.status import has_society_step, read_society_step
from engine.spec import (
    BudgetSpec,
    ExperimentSpec,
    LLMClientSpec,
    LLMSpec,
    QuestionnaireStep,
    RunStep,
    StepSpec,
    format_validation_error,
    parse_spec,
)
from engine.storage.atomic import atomic_write_json, atomic_write_text, read_json
from engine.storage.query_limits import QueryLimits
from engine.storage.reader import CappedResult, ReplayReader
from engine.storage.run_layout import as_location, is_url, run_child, run_store
from engine.storage.sweep_layout import SWEEP_FILE
from engine.sweep import MAX_CELLS, SweepCell, check_sweep_values
from engine.tiers.plan import count_llm_callers

__all__ = [
    "MAX_CELLS",
    "SWEEP_FILE",
    "BudgetSpec",
    "CappedResult",
    "EngineLoop",
    "EngineSettings",
    "ExperimentSpec",
    "ForkSpec",
    "InputRoots",
    "LLMClientSpec",
    "LLMSpec",
    "Panel",
    "QueryLimits",
    "QuestionnaireStep",
    "ReplayReader",
    "ReportData",
    "RunStep",
    "RunSummary",
    "StepSpec",
    "SweepCell",
    "as_location",
    "atomic_write_json",
    "atomic_write_text",
    "check_as_of_kept",
    "check_dataset_name",
    "check_network",
    "count_expected_edges",
    "check_sweep_values",
    "check_grid_keys",
    "cluster_dashboard",
    "completed_steps_at",
    "count_llm_callers",
    "experiment_page",
    "fidelity",
    "export_dataset",
    "extend_spec",
    "find_fork_point",
    "format_validation_error",
    "has_society_step",
    "input_roots",
    "locate_grid_files",
    "locate_network_files",
    "is_run_dir",
    "is_url",
    "list_agent_files",
    "list_datasets",
    "load_report",
    "materialize_fork",
    "open_client",
    "open_shell",
    "parse_spec",
    "plan_fork",
    "read_agent",
    "read_agent_file",
    "read_json",
    "read_population_files",
    "read_society_step",
    "regression_fidelity",
    "resolve_env_module",
    "resolve_input_file",
    "run_child",
    "run_spec",
    "run_store",
]
