"""The society: batching agents over Dask each tick as transactions, the env actor, questionnaires,
ask/intervene, sweeps and whole-experiment runs."""

from engine.society.batch import BatchResult, step_agent_batch
from engine.society.experimenter.helper import AgentSocietyHelper, HelperResult, PlanStep
from engine.society.lease import RunLease, effective_status
from engine.society.questionnaire.items import QuestionItem, Questionnaire, QuestionnaireAnswer, QuestionnaireResponse
from engine.society.run.cluster import open_client
from engine.society.run.runner import RunProgress, RunSummary, run_experiment
from engine.society.run.sweep import SweepSummary, run_spec, run_sweep
from engine.society.shells import DaskShell, EnvHost, InProcessShell
from engine.society.society import AgentSociety, plan_batches
from engine.society.workspaces.common import BatchJob
from engine.sweep import SweepCell, expand_sweep

__all__ = [
    "AgentSociety",
    "AgentSocietyHelper",
    "BatchJob",
    "BatchResult",
    "DaskShell",
    "EnvHost",
    "HelperResult",
    "InProcessShell",
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
