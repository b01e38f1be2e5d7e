"""The society: batching agents over Dask each tick, the env actor, and whole-experiment runs."""

from engine.society.batch import BatchJob, BatchResult, step_agent_batch
from engine.society.cluster import open_client
from engine.society.runner import RunProgress, RunSummary, run_experiment
from engine.society.society import AgentSociety, plan_batches

__all__ = [
    "AgentSociety",
    "BatchJob",
    "BatchResult",
    "RunProgress",
    "RunSummary",
    "open_client",
    "plan_batches",
    "run_experiment",
    "step_agent_batch",
]
