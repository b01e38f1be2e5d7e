"""The experiment spec: the one contract between the service, the CLI and the engine.

A spec is user input (``*Spec``), validated once at the edge and frozen. Errors name the field
path (``agents.3.type``). ``load_spec`` reads JSON or YAML; ``spec_json_schema`` is what
``polis spec-schema`` prints.
"""

from __future__ import annotations

import difflib
import json
import random
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from engine.errors import SpecError
from engine.llm_spec import LLMClientSpec, LLMSpec, PriceSpec
from engine.population import MAX_POPULATION_CHARS, Locate, read_population_files, spec_folder
from engine.population.spec import PopulationSpec

__all__ = [
    "DEFAULT_ROUTER",
    "MAX_POPULATION_CHARS",
    "ROUTER_NAMES",
    "AgentSpec",
    "AskStep",
    "BudgetSpec",
    "EnvModuleSpec",
    "EnvironmentSpec",
    "ExperimentSpec",
    "InterveneStep",
    "LLMClientSpec",
    "LLMSpec",
    "PriceSpec",
    "PopulationSpec",
    "QuestionSpec",
    "QuestionnaireStep",
    "RouterName",
    "RunStep",
    "SnapshotsSpec",
    "StorageSpec",
    "StepSpec",
    "SweepSpec",
    "TranscriptsSpec",
    "format_validation_error",
    "load_spec",
    "parse_spec",
    "read_document",
    "spec_json_schema",
]


#: The env routers a spec may name (``environment.router``); ``engine.env.routers.ROUTERS`` implements each.
RouterName = Literal["codegen", "react", "plan_execute", "two_tier_react", "two_tier_plan_execute", "search_tool"]
ROUTER_NAMES: tuple[RouterName, ...] = get_args(RouterName)
#: The router of a spec that names none, and of an ``EnvRouterConfig`` built without one.
DEFAULT_ROUTER: RouterName = "codegen"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _known_agent_type(name: str) -> str:
    from engine.agent.registry import check_agent_type

    return check_agent_type(name)


def _known_env_module(name: str) -> str:
    from engine.env.registry import env_module_known, env_module_names

    if not env_module_known(name):
        raise ValueError(f"unknown environment module type {name!r}; known: {', '.join(env_module_names())}")
    return name


#: The largest id, tick count or seed a spec may hold: datasets store them as 64-bit integers.
INT64_MAX = 2**63 - 1
#: An integer a dataset stores (``ge=0``).
Int64 = Annotated[int, Field(ge=0, le=INT64_MAX)]


class AgentSpec(_Frozen):
    """One explicitly listed agent."""

    id: int = Field(ge=0, le=INT64_MAX)
    type: str = "PersonAgent"
    profile: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)

    _type_known = field_validator("type")(classmethod(lambda cls, v: _known_agent_type(v)))

    @field_validator("config")
    @classmethod
    def _config_fits_the_agent(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.agent.registry import check_agent_config

        return check_agent_config(info.data.get("type"), value)


class EnvModuleSpec(_Frozen):
    """One environment module by registered type name."""

    type: str
    kwargs: dict[str, Any] = Field(default_factory=dict)

    _type_known = field_validator("type")(classmethod(lambda cls, v: _known_env_module(v)))

    @field_validator("kwargs")
    @classmethod
    def _kwargs_fit_the_module(cls, kwargs: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.env.registry import module_params, resolve_env_module

        type_name = info.data.get("type")
        accepted = module_params(resolve_env_module(type_name)) if type_name is not None else None
        for key in kwargs:
            if accepted is not None and key not in accepted:
                near = difflib.get_close_matches(key, sorted(accepted), n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise PydanticCustomError(
                    "module_kwargs", "{module} takes no argument '{name}'; {hint}it takes: {accepted}",
                    {"key": key, "module": type_name, "name": key, "hint": hint,
                     "accepted": ", ".join(sorted(accepted)) or "no kwargs"})
        return kwargs


class EnvironmentSpec(_Frozen):
    """The environment: a router kind and its modules."""

    router: RouterName = Field(DEFAULT_ROUTER, description="the router that maps ask_env instructions to tool calls")
    cache_similarity: float = Field(0.85, gt=0, le=1, description="codegen: reuse cached code above this embedding similarity")
    embedder: str = Field("sim", description="codegen template cache embeddings: sim, wordllama, auto, or a litellm model")
    modules: list[EnvModuleSpec] = Field(default_factory=lambda: [EnvModuleSpec(type="MessagingSpace")], min_length=1)
    max_router_steps: int = Field(3, ge=1, le=50)
    final_summary: bool = Field(False, description="codegen: one more coder call turns the executed code's results into the answer")


class RunStep(_Frozen):
    type: Literal["run"] = "run"
    num_steps: int = Field(ge=1, le=INT64_MAX)
    tick: int = Field(3600, ge=1, le=INT64_MAX, description="simulated seconds per step")


#: ``as_of_step`` on a questionnaire or ask step (:mod:`engine.society.fork.as_of`)
_AS_OF = Field(
    None, ge=0, le=INT64_MAX,
    description="answer as the agents were when tick K was committed, on a run that kept that tick "
    "(snapshots.keep); K must be committed before the step. An ask also reads the env as of K. Nothing stored "
    "changes but the step's own rows and artifact",
)


class AskStep(_Frozen):
    type: Literal["ask"] = "ask"
    question: str = Field(min_length=1)
    as_of_step: int | None = _AS_OF


class InterveneStep(_Frozen):
    type: Literal["intervene"] = "intervene"
    instruction: str = Field(min_length=1)


class QuestionSpec(_Frozen):
    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    response_type: Literal["text", "integer", "float", "choice", "json"] = "text"
    choices: list[str] | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _choices_for_choice(self) -> QuestionSpec:
        if self.response_type == "choice" and not self.choices:
            raise ValueError("response_type 'choice' needs a non-empty 'choices' list")
        return self


class QuestionnaireStep(_Frozen):
    type: Literal["questionnaire"] = "questionnaire"
    questionnaire_id: str = Field(min_length=1)
    title: str | None = None
    description: str | None = None
    target_agent_ids: list[Int64] | None = None
    questions: list[QuestionSpec] = Field(min_length=1)
    as_of_step: int | None = _AS_OF


StepSpec = Annotated[RunStep | AskStep | InterveneStep | QuestionnaireStep, Field(discriminator="type")]


class BudgetSpec(_Frozen):
    max_calls: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, gt=0)


class TranscriptsSpec(_Frozen):
    """The ``transcripts`` dataset: one row per LLM call with its messages and reply, up to a size cap."""

    enabled: bool = Field(True, description="write the transcripts dataset")
    max_bytes: int = Field(
        256 * 1024 * 1024, ge=0,
        description="text bytes (messages and replies) the run keeps; later rows keep their metadata only. "
        "0 keeps metadata only",
    )


class SnapshotsSpec(_Frozen):
    """How many committed ticks stay recoverable, for forks (``polis run --fork-from``) and ``as_of_step``."""

    keep: int | None = Field(
        None, ge=0,
        description="past ticks kept besides the last (hard-linked workspace journals, env snapshots); "
        "null keeps every tick, 0 only the last",
    )


class StorageSpec(_Frozen):
    """Where the run keeps its agents' workspaces."""

    workspaces: Literal["packed", "dir"] = Field(
        "packed",
        description="packed: each tick's changes of a batch of agents go into one pack, a few files per tick whatever the "
        "number of agents; dir: one folder per agent (AS2's layout, each step journaled), for small runs and inspection",
    )
    checkpoint_every: int = Field(
        8, ge=1, le=1000,
        description="packed: a file kept unchanged (or only appended to) is rewritten whole into a new pack once its "
        "oldest part is this many transactions old, so reading an agent never needs more packs than this",
    )


class SweepSpec(_Frozen):
    """A parameter sweep: every combination of the grid's values, each run ``replications`` times.

    Grid keys are dotted paths into the spec (``llm.default.options.temperature``,
    ``population.0.count``, ``environment.modules.0.kwargs.groups``); ``*`` stands for every element
    of a list (``agents.*.config.max_react_turns``). Every segment must exist, except that the last
    may add a key to a free-form mapping (``options``, ``kwargs``, ``config``, ``profile``).
    ``seed`` cannot be swept: each cell's seed is derived from the spec's seed, its parameters and
    its replication.
    """

    grid: dict[str, list[Any]] = Field(default_factory=dict, description="dotted spec path -> the values it takes")
    replications: int = Field(1, ge=1, le=10_000, description="runs per parameter combination, each with its own seed")
    max_concurrent_cells: int | None = Field(
        None, ge=1, description="cells running at once on the cluster (each has its own env actor); default: 4. The service also "
        "counts each running cell against its owner's max_concurrent"
    )

    @field_validator("grid")
    @classmethod
    def _values_not_empty(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in value.items():
            if not values:
                raise ValueError(f"grid key {key!r} has an empty list of values")
        return value


class ExperimentSpec(_Frozen):
    """A whole experiment."""

    name: str = Field(min_length=1, max_length=200)
    seed: int = Field(0, ge=-(2**63), le=INT64_MAX)
    start_time: datetime = Field(default_factory=lambda: datetime(2026, 1, 1, 8, 0, 0))
    llm: LLMSpec = Field(default_factory=LLMSpec)
    agents: list[AgentSpec] = Field(default_factory=list)
    population: list[PopulationSpec] = Field(default_factory=list)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    steps: list[StepSpec] = Field(min_length=1)
    batch_size: int = Field(
        256, ge=1, le=100_000,
        description="agents per batch future, at most; a tick has at least one batch per task slot of the cluster "
        "while each keeps 16 agents",
    )
    max_workers: int | None = Field(None, ge=1, description="cap on concurrently running batch futures")
    budget: BudgetSpec | None = None
    transcripts: TranscriptsSpec = Field(default_factory=TranscriptsSpec)
    snapshots: SnapshotsSpec = Field(default_factory=SnapshotsSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    max_error_rate: float = Field(
        0.05, ge=0, le=1,
        description="share of agent-steps ending in error (or llm_error) above which a run ends 'failed' "
        "instead of 'completed_with_errors'",
    )
    # Keep ``sweep`` last: its validator resolves grid keys against the fields validated before it.
    sweep: SweepSpec | None = Field(None, description="run a grid of variants of this spec; see SweepSpec")

    @field_validator("sweep")
    @classmethod
    def _grid_keys_resolve(cls, value: SweepSpec | None, info: ValidationInfo) -> SweepSpec | None:
        if value is not None:
            from engine.sweep import check_grid_keys

            check_grid_keys(value.grid, info.data)
        return value

    @model_validator(mode="after")
    def _has_agents_and_unique_ids(self) -> ExperimentSpec:
        if not self.agents and not self.population:
            raise ValueError("the spec has no agents: give 'agents' or 'population'")
        self._check_population_size()
        self._check_simulated_time()
        seen: set[int] = set()
        for agent in self.all_agents():
            if agent.id in seen:
                raise ValueError(f"agent id {agent.id} appears twice")
            seen.add(agent.id)
        return self

    def _check_simulated_time(self) -> None:
        # Every tick's time is start_time + elapsed seconds: the last must still be a date (year 9999 at most).
        seconds = sum(step.num_steps * step.tick for step in self.steps if isinstance(step, RunStep))
        room = (datetime.max - self.start_time.replace(tzinfo=None)).total_seconds()
        if seconds > room:
            raise PydanticCustomError(
                "simulated_time", "the run steps span {seconds} simulated seconds from start_time {start}, past the "
                "last date there is (9999-12-31); use fewer or shorter ticks, or an earlier start_time",
                {"key": "steps", "seconds": seconds, "start": self.start_time.isoformat()})

    def _check_population_size(self) -> None:
        # Before all_agents() makes any member: a small spec must not expand into gigabytes.
        top = max([a.id for a in self.agents] + [p.id_start or 0 for p in self.population])
        last = top + sum(p.size for p in self.population)
        if last > INT64_MAX:
            raise PydanticCustomError(
                "agent_ids", "agent ids would reach {last}, past {top} (the largest a dataset stores); use a smaller "
                "id_start", {"key": "population", "last": last, "top": INT64_MAX})
        digits = len(str(last + 1))
        total = 0
        for index, population in enumerate(self.population):
            total += population.size_bound(digits)
            if total > MAX_POPULATION_CHARS:
                raise ValueError(f"population.{index}: the populations would expand to up to {total} characters of "
                                 f"profiles and configs; at most {MAX_POPULATION_CHARS} are allowed")

    def all_agents(self) -> list[AgentSpec]:
        """The explicit agents followed by every generated population member, in id order of declaration."""
        agents = list(self.agents)
        next_id = max((a.id for a in agents), default=-1) + 1
        rng = random.Random(f"population:{self.seed}")
        for index, population in enumerate(self.population):
            start = next_id if population.id_start is None else population.id_start
            for i, profile in enumerate(population.profiles(rng, f"{self.seed}:{index}", start)):
                agents.append(AgentSpec(id=start + i, type=population.type, profile=profile, config=population.config))
            next_id = max(next_id, start + population.size)
        return agents

    def total_ticks(self) -> int:
        return sum(step.num_steps for step in self.steps if isinstance(step, RunStep))

    def spec_hash(self) -> str:
        import hashlib

        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


def _error_path(item: Any) -> str:
    """An error's dotted field path, with the key inside a mapping that a validator named (``ctx.key``)."""
    parts = [str(part) for part in item["loc"]]
    key = (item.get("ctx") or {}).get("key")
    return ".".join([*parts, str(key)] if key is not None else parts)


def format_validation_error(error: ValidationError) -> str:
    """One line per problem, each led by its dotted field path."""
    lines = []
    for item in error.errors():
        lines.append(f"{_error_path(item) or '<spec>'}: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def parse_spec(data: Any, *, locate: Locate | None = None) -> ExperimentSpec:
    """Validate a decoded spec.

    Args:
        data: the decoded spec.
        locate: where the tables its populations name (``from``) are read from; None: none is
            read, and a population naming one without its ``rows`` is refused.

    Raises:
        SpecError: with every problem and its field path (a ``PopulationFileError`` for a table
            that cannot be read, naming its row and column).
    """
    if locate is not None:
        data = read_population_files(data, locate)
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as error:
        spec_error = SpecError(format_validation_error(error))
        spec_error.path = _error_path(error.errors()[0])
        raise spec_error from None


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read a spec from a ``.json``, ``.yaml`` or ``.yml`` file, with the tables its populations name.

    A population's ``from`` is resolved against the spec file's folder (an absolute path as is).

    Raises:
        SpecError: unreadable file, bad syntax, invalid fields, or a population table that cannot
            be read (``PopulationFileError``).
    """
    path = Path(path)
    return parse_spec(read_document(path, "spec file"), locate=spec_folder(path.resolve().parent))


def read_document(path: str | Path, what: str) -> Any:
    """The data of a JSON file (a name ending in ``.json``) or a YAML one (any other).

    Raises:
        SpecError: the ``what`` cannot be read, or is not valid JSON / YAML.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"cannot read {what} {path}: {error}") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise SpecError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}") from None


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``ExperimentSpec``."""
    return ExperimentSpec.model_json_schema()
