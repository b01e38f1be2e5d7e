"""Models of the HTTP API: responses, and the few request bodies that are not an ``ExperimentSpec``.

They import pydantic and the engine's value modules only (statuses, the spec, the result models), not FastAPI
or Dask, so the HTTP client (:mod:`service.client`) answers with them and stays light.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from engine.results import AgentFile, AgentFiles, AgentMemory, ColumnInfo, DatasetInfo
from engine.run_status import RunStatus
from engine.spec import BudgetSpec
from engine.spec_regression import RegressionSpec

__all__ = [
    "AgentFile",
    "AgentFiles",
    "AgentMemory",
    "ClusterInfo",
    "ColumnInfo",
    "DatasetInfo",
    "DatasetList",
    "ExperimentAccepted",
    "ExperimentBrief",
    "ExperimentDetail",
    "ExperimentList",
    "ExperimentStatus",
    "FIDELITY_MAX_BOOTSTRAP",
    "FidelityFigure",
    "FidelityRequest",
    "FidelityResult",
    "ForkedFrom",
    "RegressionCoefficient",
    "RegressionFidelity",
    "RegressionRequest",
    "RegressionSpec",
    "Health",
    "Progress",
    "ResumeRequest",
    "SqlColumn",
    "SqlResult",
    "Usage",
    "without_server_paths",
]


#: The statuses an experiment record can hold (the JSON values are the strings).
ExperimentStatus = Literal[
    RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.FAILED,
    RunStatus.CANCELLED, RunStatus.INTERRUPTED, RunStatus.BUDGET_EXHAUSTED,
]


class ForkedFrom(BaseModel):
    """A fork's lineage: the experiment it was forked from, and the parent's committed tick it starts at."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    experiment: str  #: the parent experiment's id
    at_step: int  #: the parent's tick the fork starts from (its state as that tick committed it)


class Progress(BaseModel):
    """How far a run has got."""

    ticks_done: int
    ticks_total: int
    agent_steps_done: int
    agent_steps_total: int
    #: What the run is doing now (``loading model``, ``creating workspaces``, ``tick``, ``questionnaire`` ...;
    #: null before it starts and after it ends).
    phase: str | None = None
    #: The last committed tick's token telemetry by tier (``llm``, ``archetype``, ``router``, ``total`` ...): LLM calls,
    #: prompt and completion tokens (sum, p50, p95, max), cost and the reusable prefix share; null before the first tick.
    tokens: dict[str, dict[str, Any]] | None = None


class Usage(BaseModel):
    """LLM usage and wall time of a finished run."""

    llm_calls: int
    input_tokens: int
    output_tokens: int
    duration_s: float


class ExperimentBrief(BaseModel):
    """One experiment as listed."""

    id: str
    name: str
    owner: str
    status: ExperimentStatus
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    progress: Progress
    error: str | None
    #: How many times a service restart found it mid-run and resumed it.
    resumed_after_restart: int = 0
    #: A fork's lineage: the parent experiment and the parent's tick it starts from (null: not a fork).
    forked_from: ForkedFrom | None = None


class ExperimentAccepted(ExperimentBrief):
    """An experiment as a submit, fork, added steps, resume or cancel leaves it: its state and where to follow it.

    Not its spec, which may be large (``GET /experiments/{id}`` has it).
    """

    #: The Dask dashboard page that breaks the cluster's work down by span: pick this experiment's id
    #: under "Filter by span tag"; its tasks are ``polis_<id>_*`` there and in the task stream
    #: (``null`` when the cluster runs no dashboard).
    dashboard_link: str | None
    #: The experiment's results page (HTML, plots and SQL box), relative to the service.
    report: str
    #: Its live events (server-sent), relative to the service.
    events: str


class ExperimentDetail(ExperimentAccepted):
    """One experiment in full: its spec, its usage, and where to watch the cluster."""

    #: Known once the run has ended (``null`` before, and for runs that never reported it).
    usage: Usage | None
    spec: dict[str, Any]


class ResumeRequest(BaseModel):
    """``POST /experiments/{id}/resume``'s optional body."""

    model_config = ConfigDict(extra="forbid")

    #: Replaces the spec's budget (raise it to continue a ``budget_exhausted`` run); omitted = unchanged.
    budget: BudgetSpec | None = None
    #: Run options: agents per batch future from now on (the spec's ``batch_size``); omitted = unchanged.
    batch_size: int | None = Field(None, ge=1, le=100_000)
    #: Run options: batch futures running at once from now on (the spec's ``max_workers``); omitted = unchanged.
    max_workers: int | None = Field(None, ge=1)

    def run_options(self) -> dict[str, Any]:
        """The run options given, as the spec holds them."""
        return self.model_dump(mode="json", exclude_unset=True, exclude={"budget"})


class ExperimentList(BaseModel):
    """Every experiment, newest first."""

    experiments: list[ExperimentBrief]


class DatasetList(BaseModel):
    """The datasets of one experiment (empty before the run has catalogued any)."""

    experiment_id: str
    datasets: list[DatasetInfo]


#: The most bootstrap resamples one ``POST /experiments/{id}/fidelity`` asks for (the scoring's time grows with them).
FIDELITY_MAX_BOOTSTRAP = 2000


class FidelityRequest(BaseModel):
    """What to score of a survey experiment (see ``polis fidelity``)."""

    model_config = ConfigDict(extra="forbid")

    by: list[str] = Field(default_factory=list, max_length=20,
                          description="persona fields to report subgroups of, each at most once")
    questionnaire_id: str | None = Field(None, description="score this questionnaire; default: each item's last")
    bootstrap: int = Field(200, ge=1, le=FIDELITY_MAX_BOOTSTRAP, description="bootstrap resamples behind each interval")
    seed: int = Field(0, description="the resampling's seed")
    retest: dict[str, float] = Field(default_factory=dict, description="item -> people's test-retest accuracy on it")
    regression: RegressionSpec | None = Field(
        None, description="also fit this regression on the real and on the simulated answers and compare each "
                          "coefficient (the regression_fidelity dataset); what cannot be fitted is a 422 at "
                          "regression.formula or regression.family")

    @field_validator("by")
    @classmethod
    def _each_field_once(cls, by: list[str]) -> list[str]:
        # A field named again would be scored again: the same figures, at the cost of another pass of resamples.
        for position, name in enumerate(by):
            if name in by[:position]:
                error = PydanticCustomError("repeated_field", "'{field}' is named again: group by each field once",
                                            {"field": name})
                raise ValidationError.from_exception_data(
                    cls.__name__, [InitErrorDetails(type=error, loc=(position,), input=name)])  # the error at by.N
        return by


class FidelityFigure(BaseModel):
    """One figure: a metric of an item (and subgroup), with its 95% bootstrap interval and its noise floor."""

    item: str
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    group_by: str | None = None
    group: str | None = None
    gap: float | None = None
    #: the figure on noise alone at this n (the simulated answers drawn from the real ones' distribution); accuracy's
    #: is chance
    floor: float | None = None


class RegressionCoefficient(BaseModel):
    """One coefficient as the real answers and the simulated ones estimate it (95% normal intervals, sandwich errors)."""

    term: str
    real: float
    real_low: float
    real_high: float
    real_p: float | None
    simulated: float
    simulated_low: float
    simulated_high: float
    simulated_p: float | None
    #: the z-test of real = simulated, the two fits taken as independent (approximate: the same respondents)
    difference_p: float | None
    sign_agrees: bool
    significance_agrees: bool | None  #: both p < 0.05 or both not
    differs: bool | None  #: difference_p < 0.05


class RegressionFidelity(BaseModel):
    """A regression fitted on the real and on the simulated answers (also written as the ``regression_fidelity``
    dataset)."""

    formula: str
    family: str
    n: int  #: respondents both fits are over
    share_differ: float | None  #: the share of slopes that differ significantly
    share_sign_flipped: float  #: the share of slopes whose sign the simulated answers flip
    coefficients: list[RegressionCoefficient]


class RegressionRequest(BaseModel):
    """A regression alone (``POST /experiments/{id}/regression``): fitted on the real and on the simulated answers, no
    fidelity figures scored (and none overwritten)."""

    model_config = ConfigDict(extra="forbid")

    regression: RegressionSpec = Field(description="the formula and family (what cannot be fitted is a 422 at "
                                                   "regression.formula or regression.family)")
    questionnaire_id: str | None = Field(None, description="the simulated answers of this questionnaire; default: each item's last")


class FidelityResult(BaseModel):
    """A survey experiment's fidelity figures (also written as its ``fidelity`` dataset)."""

    experiment_id: str
    questionnaire_id: str | None
    bootstrap: int
    figures: list[FidelityFigure]
    regression: RegressionFidelity | None = None  #: the request's regression, fitted


class SqlColumn(BaseModel):
    """One result column: its name and its Arrow type."""

    name: str
    type: str = Field(examples=["int64", "string", "timestamp[us]"])


class SqlResult(BaseModel):
    """A query's rows as JSON; ``truncated`` when the row limit cut them."""

    columns: list[SqlColumn]
    rows: list[list[Any]]
    truncated: bool


class Health(BaseModel):
    """The service is up."""

    status: str


class ClusterInfo(BaseModel):
    """How many experiments the service is running, and the cluster's dashboard."""

    running: int
    dashboard_link: str | None


def without_server_paths(text: str, run_dir: Path | str) -> str:
    """``text`` with the run's location made relative to the run (``datasets/x.parquet``) and the service's data
    directory (``run_dir``'s grandparent) shown as ``<data>``: what the service answers never names a server path.
    For a run in object storage, an HTTP address (the store's endpoint, in the storage library's errors) is shown as
    ``<object store>``."""
    run = str(run_dir).rstrip("/")
    data = run.rsplit("/", 2)[0]
    text = text.replace(run + "/", "").replace(run, ".")
    if isinstance(run_dir, str) and "://" in run:
        text = _HTTP_ADDRESS.sub("<object store>", text)
    return text.replace(data, "<data>") if len(data) > 1 else text


_HTTP_ADDRESS = re.compile(r"https?://[^\s'\"<>]+")
