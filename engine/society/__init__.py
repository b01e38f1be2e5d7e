"""The society: batching agents over Dask each tick as transactions, the env actor, questionnaires,
ask/intervene, sweeps and whole-experiment runs."""

from engine.society.batch import BatchJob, BatchResult, step_agent_batch
from engine.society.cluster import open_client
from engine.society.env_host import EnvHost
from engine.society.helper import AgentSocietyHelper, HelperResult, PlanStep
from engine.society.lease import RunLease, effective_status
from engine.society.questionnaire import QuestionItem, Questionnaire, QuestionnaireAnswer, QuestionnaireResponse
from engine.society.runner import RunProgress, RunSummary, run_experiment
from engine.society.society import AgentSociety, plan_batches
from engine.society.sweep import SweepCell, expand_sweep
from engine.society.sweep_run import SweepSummary, run_spec, run_sweep

__all__ = [
    "AgentSociety",
    "AgentSocietyHelper",
    "BatchJob",
    "BatchResult",
    "EnvHost",
    "HelperResult",
    "PlanStep",
    "QuestionItem",
    "Questionnaire",
    "QuestionnaireAnswer",
    "QuestionnaireResponse",
    "RunLease",
    "RunProgress",
    "RunSummary",
    "SweepCell",
    "SweepSummary",
    "effective_status",
    "expand_sweep",
    "open_client",
    "plan_batches",
    "run_experiment",
    "run_spec",
    "run_sweep",
    "step_agent_batch",
]
