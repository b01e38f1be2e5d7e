"""The experiment spec: the one contract between the service, the CLI and the engine.

A spec is user input (``*Spec``), validated once at the edge and frozen. Errors name the field
path (``agents.3.type``). ``load_spec`` reads JSON or YAML; :func:`engine.spec_schema.spec_json_schema` is what
``polis spec-schema`` prints.
"""

from __future__ import annotations

import difflib
import json
import random
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from engine.errors import SpecError
from engine.llm_spec import LLMClientSpec, LLMSpec, PriceSpec
from engine.network.spec import NetworkSpec
from engine.population import MAX_POPULATION_CHARS, Locate, read_population_files, spec_folder
from engine.population.spec import PopulationSpec
from engine.population.survey_steps import VariantInfo, VariantsSpec, check_survey, expand_survey_steps
from engine.spec_calls import EnvCallSpec
from engine.spec_env import EnvironmentSpec, EnvModuleSpec, check_persona_use

__all__ = [
    "MAX_POPULATION_CHARS", "RUN_OPTIONS", "AgentSpec", "AskStep", "BudgetSpec", "EnvModuleSpec", "EnvironmentSpec",
    "ExperimentSpec", "InterveneStep", "LLMClientSpec", "LLMSpec", "PopulationSpec", "PriceSpec", "QuestionSpec",
    "QuestionnaireStep", "RunOptions", "RunStep", "SnapshotsSpec", "StepSpec", "StorageSpec", "SweepSpec",
    "TranscriptsSpec", "format_validation_error", "load_spec", "parse_spec", "read_document",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _known_agent_type(name: str) -> str:
    from engine.agent.registry import check_agent_type

    return check_agent_type(name)


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
    instruction: str | None = Field(None, min_length=1, description="the intervention in plain language, for the helper")
    calls: list[EnvCallSpec] | None = Field(
        None, min_length=1, description="env tools to call as written, with no LLM (instead of an instruction)")

    @model_validator(mode="after")
    def _instruction_or_calls(self) -> InterveneStep:
        if (self.instruction is None) == (self.calls is None):
            raise ValueError("an intervene step takes an 'instruction' (for the helper) or 'calls' (env tools), one of them")
        return self


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
    from_survey: bool = Field(
        False, description="ask the survey population's target items, each in its own wording with its labels as the "
        "options in scale order; 'questions' is then filled in when the spec is read")
    questions: list[QuestionSpec] = Field(default_factory=list)
    as_of_step: int | None = _AS_OF
    variants: VariantsSpec | None = Field(
        None, description="paraphrases and shuffled options to ask as well, each a questionnaire step of its own "
        "(made when the spec is read), so that fidelity can flag answers that move with the wording")
    variant: VariantInfo | None = Field(None, description="filled in: the questionnaire this step is a variant of")

    @model_validator(mode="after")
    def _has_questions(self) -> QuestionnaireStep:
        if not self.questions:
            raise ValueError("a questionnaire needs 'questions', or 'from_survey: true' with a survey population")
        ids = [q.id for q in self.questions]
        if self.variants is not None and (unknown := next((i for i in self.variants.paraphrases if i not in ids), None)):
            raise ValueError(f"variants.paraphrases: {unknown!r} is no question of the questionnaire ({', '.join(ids)})")
        return self


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


class RunOptions(_Frozen):
    """How a run is carried out, apart from what it simulates: batching, concurrency, what it keeps and how.

    A spec holds these beside its science, but they are not part of what it simulates: the spec hash leaves them
    out, and a resumed run may change them (a new batch size or worker count for a larger cluster, another
    transcript cap or snapshot count), except ``storage.workspaces``, the layout the run's files already have.
    """

    batch_size: int = Field(
        256, ge=1, le=100_000,
        description="agents per batch future, at most; a tick has at least one batch per task slot of the cluster "
        "while each keeps 16 agents. May change on resume",
    )
    max_workers: int | None = Field(None, ge=1, description="cap on concurrently running batch futures. May change on resume")
    transcripts: TranscriptsSpec = Field(default_factory=TranscriptsSpec)
    snapshots: SnapshotsSpec = Field(default_factory=SnapshotsSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    llm_check: bool = Field(
        True, description="before tick 0, make one tiny test call to each distinct model and refuse to start if its key "
        "variable is unset or the call fails. May change on resume",
    )


#: The spec's fields that are run options (:class:`RunOptions`), not science.
RUN_OPTIONS = frozenset(RunOptions.model_fields)


class ExperimentSpec(RunOptions):
    """A whole experiment: its science, and the run options it inherits from :class:`RunOptions`."""

    name: str = Field(min_length=1, max_length=200)
    seed: int = Field(0, ge=-(2**63), le=INT64_MAX)
    start_time: datetime = Field(default_factory=lambda: datetime(2026, 1, 1, 8, 0, 0))
    llm: LLMSpec = Field(default_factory=LLMSpec)
    agents: list[AgentSpec] = Field(default_factory=list)
    population: list[PopulationSpec] = Field(default_factory=list)
    network: NetworkSpec | None = Field(None, description="the society's network: named layers, from edge files or "
                                        "seeded generators (written as the network_edges dataset)")
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    steps: list[StepSpec] = Field(min_length=1)
    budget: BudgetSpec | None = None
    max_error_rate: float = Field(
        0.05, ge=0, le=1,
        description="share of failures (agent-steps in error or llm_error, questionnaire answers without a valid "
        "value, failed ask or intervene steps) above which a run ends 'failed' instead of 'completed_with_errors'",
    )
    context_budget: int | None = Field(
        None, ge=200, le=10_000_000, description="tokens an LLM agent's prompt may reach (4 characters a token): past it, "
        "the agent's thread memory compacts, so prompts stop growing. Below llm.default.context_window when both are set")
    # Keep ``sweep`` last: its validator resolves grid keys against the fields validated before it.
    sweep: SweepSpec | None = Field(None, description="run a grid of variants of this spec; see SweepSpec")

    @field_validator("sweep")
    @classmethod
    def _grid_keys_resolve(cls, value: SweepSpec | None, info: ValidationInfo) -> SweepSpec | None:
        if value is not None:
            from engine.grid_keys import check_grid_keys  # the storage layer (pyarrow): only for a spec with a sweep

            check_grid_keys(value.grid, info.data, field_names=cls.model_fields)
        return value

    @model_validator(mode="before")
    @classmethod
    def _survey_questions(cls, data: Any) -> Any:
        """Fill in each ``from_survey`` questionnaire's questions from the one survey population's codebook, and make
        each questionnaire's variants steps of their own (:mod:`engine.population.survey_steps`)."""
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            return data
        books = [p.codebook if isinstance(p, PopulationSpec) else p.get("codebook") for p in data.get("population") or []
                 if isinstance(p, PopulationSpec | dict)]
        return expand_survey_steps(data, [b for b in books if b is not None])

    @model_validator(mode="after")
    def _has_agents_and_unique_ids(self) -> ExperimentSpec:
        if not self.agents and not self.population:
            raise ValueError("the spec has no agents: give 'agents' or 'population'")
        self._check_population_size()
        self._check_simulated_time()
        self._check_survey()
        self._check_network()
        window = self.llm.default.context_window
        if self.context_budget is not None and window is not None and self.context_budget >= window:
            raise PydanticCustomError("context_budget", "{message}", {"key": "context_budget", "message":
                                      f"{self.context_budget} tokens is not below llm.default.context_window ({window})"})
        ids = np.sort(self.agent_ids())  # ids alone: a million agents' specs would take seconds to build
        if (twice := np.flatnonzero(ids[1:] == ids[:-1])).size:
            raise ValueError(f"agent id {int(ids[twice[0]])} appears twice")
        if problem := self.questionnaire_target_problem(self.steps, ids):
            raise PydanticCustomError("questionnaire_target", "{message}", {"key": problem[0], "message": problem[1]})
        return self

    def questionnaire_target_problem(self, steps: Sequence[StepSpec], ids: np.ndarray | None = None) -> tuple[str, str] | None:
        """The first questionnaire target in ``steps`` that is not an LLM agent of this spec (archetype and rule members
        answer none), as its path in ``steps`` (``steps.<i>.target_agent_ids.<j>``) and why; None: every target is.

        Args:
            steps: the questionnaire steps' list (this spec's, or steps to add to its run).
            ids: the spec's agent ids, sorted (None: computed).
        """
        asked = [(i, step) for i, step in enumerate(steps) if isinstance(step, QuestionnaireStep) and step.target_agent_ids]
        if not asked:
            return None
        ids = np.sort(self.agent_ids()) if ids is None else ids
        starts = self.population_starts()
        tiers = cache(lambda index: self.population[index].member_tiers(self.seed, index))
        for i, step in asked:
            assert step.target_agent_ids is not None
            for j, agent_id in enumerate(step.target_agent_ids):
                if (at := np.searchsorted(ids, agent_id)) == len(ids) or ids[at] != agent_id:
                    return f"steps.{i}.target_agent_ids.{j}", f"there is no agent {agent_id} in the spec"
                index = next((p for p, (population, start) in enumerate(zip(self.population, starts, strict=True))
                              if start <= agent_id < start + population.size), None)  # None: listed in agents
                if index is not None and (tier := tiers(index)[agent_id - starts[index]]) != "llm":
                    return f"steps.{i}.target_agent_ids.{j}", (
                        f"agent {agent_id} is a{'n' if tier == 'archetype' else ''} {tier} member of population {index}; "
                        "a questionnaire asks LLM agents only (tier llm)")
        return None

    def _check_network(self) -> None:
        from engine.network.spec import check_network_use
        from engine.spec_calls import check_env_calls

        persona = cache(self.persona_values)  # building every profile is seconds per 100,000 agents: once per field

        def fields() -> set[str]:  # only for a refusal's suggestion
            return {key for agent in self.all_agents() for key in agent.profile}

        check_network_use(self.network, self.environment.modules, len(self.agents) + sum(p.size for p in self.population),
                          persona, fields)
        check_env_calls(self.steps, [module.type for module in self.environment.modules])
        check_persona_use(self.environment.modules, persona, fields)

    def _check_survey(self) -> None:
        from_survey = [i for i, step in enumerate(self.steps) if isinstance(step, QuestionnaireStep) and step.from_survey]
        check_survey(self.population, self.agents, from_survey)
        for index, population in enumerate(self.population):
            if population.calibrate is not None:  # raked over the very members the run will have
                try:
                    population.survey_members(self.population_seed_key(index))
                except ValueError as error:
                    raise PydanticCustomError("calibrate", "{message}",
                                              {"key": f"population.{index}.calibrate", "message": str(error)}) from None

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
        return [agent for _, agent in self.agent_members()]

    def agent_members(self) -> list[tuple[int | None, AgentSpec]]:
        """Every agent (as :meth:`all_agents`) with the index of the population it was made from (None: from ``agents``)."""
        members: list[tuple[int | None, AgentSpec]] = [(None, agent) for agent in self.agents]
        rng = random.Random(f"population:{self.seed}")
        for index, (population, start) in enumerate(zip(self.population, self.population_starts(), strict=True)):
            for i, profile in enumerate(population.profiles(rng, self.population_seed_key(index), start)):
                members.append((index, AgentSpec(id=start + i, type=population.type, profile=profile, config=population.config)))
        return members

    def persona_values(self, field: str) -> list[Any]:
        """Each agent's value of profile field ``field`` (None where it has none), in :meth:`agent_ids`' order."""
        return [agent.profile.get(field) for agent in self.all_agents()]

    def agent_ids(self) -> np.ndarray:
        """Every agent's id, in :meth:`all_agents`' order, without building the agents."""
        parts = [np.array([a.id for a in self.agents], dtype=np.int64)]
        for population, start in zip(self.population, self.population_starts(), strict=True):
            parts.append(np.arange(start, start + population.size, dtype=np.int64))
        return np.concatenate(parts)

    def population_starts(self) -> list[int]:
        """Each population's first agent id: its members' ids run on from it, one per member."""
        starts: list[int] = []
        next_id = max((a.id for a in self.agents), default=-1) + 1
        for population in self.population:
            starts.append(next_id if population.id_start is None else population.id_start)
            next_id = max(next_id, starts[-1] + population.size)
        return starts

    def population_seed_key(self, index: int) -> str:
        """The seed of population ``index``'s row sample."""
        return f"{self.seed}:{index}"

    def total_ticks(self) -> int:
        return sum(step.num_steps for step in self.steps if isinstance(step, RunStep))

    def run_options(self) -> RunOptions:
        return RunOptions.model_validate(self.model_dump(include=set(RUN_OPTIONS)))

    def science(self) -> dict[str, Any]:
        """The spec without its run options: what :meth:`spec_hash` hashes."""
        return self.model_dump(mode="json", exclude=set(RUN_OPTIONS))

    def with_options(self, options: RunOptions) -> ExperimentSpec:
        """This science, run with ``options``."""
        return self.model_copy(update=dict(options))

    def spec_hash(self) -> str:
        """A hash of the science: equal for two specs that simulate the same thing, whatever their run options."""
        import hashlib

        return hashlib.sha256(json.dumps(self.science(), sort_keys=True).encode()).hexdigest()[:16]


def _error_path(item: Any) -> str:
    """An error's dotted field path, with the key inside a mapping that a validator named (``ctx.key``)."""
    parts = [str(part) for part in item["loc"]]
    key = (item.get("ctx") or {}).get("key")
    return ".".join([*parts, str(key)] if key is not None else parts)


def format_validation_error(error: ValidationError) -> str:
    """One line per problem, each led by its dotted field path."""
    lines = []
    for item in error.errors():
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = _unknown_field(item["loc"])
        lines.append(f"{_error_path(item) or '<spec>'}: {message}")
    return "\n".join(lines)


def _unknown_field(loc: tuple[Any, ...]) -> str:
    """What an unknown field of the spec is told: the nearest field there is, if one is near."""
    from engine.plugins import field_names_at

    known = field_names_at(ExperimentSpec, [str(part) for part in loc[:-1]])
    near = difflib.get_close_matches(str(loc[-1]), known, n=1)
    return f"unknown field; did you mean {near[0]!r}?" if near else f"unknown field; known: {', '.join(known)}" if known else \
        "unknown field"


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
    from engine.network.files import check_network, locate_network_files

    if locate is not None:
        data = locate_network_files(read_population_files(data, locate), locate)
    try:
        spec = ExperimentSpec.model_validate(data)
    except ValidationError as error:
        spec_error = SpecError(format_validation_error(error))
        spec_error.path = _error_path(error.errors()[0])
        raise spec_error from None
    if locate is not None:
        from engine.grid_files import locate_grid_files

        spec = locate_grid_files(spec, locate)
        check_network(spec.network, spec.agent_ids())  # its edge files, against the agents: what they name must be there
    return spec


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
        raise SpecError(f"cannot read {what} {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise SpecError(f"{path} is not UTF-8 text (byte {error.start}): a {what} is JSON or YAML") from None
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise SpecError(f"{path} is not valid JSON: line {error.lineno}, column {error.colno}: {error.msg}") from None
    except yaml.YAMLError as error:
        raise SpecError(f"{path} is not valid YAML: {_yaml_problem(error)}") from None


def _yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error in one line: where (1-based) and what, without the parser's excerpt of the text."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem or error.context or 'cannot be parsed'}"
    return str(error).splitlines()[0]
