"""AgentBase: a stateless record bound to a workspace, with the ReAct tool loop.

An agent object lives for one task: ``from_workspace`` rebuilds it, ``step`` runs, and
``to_workspace`` writes everything that must cross ticks back to the workspace.
"""

from __future__ import annotations

import difflib
import json
from abc import ABC, abstractmethod
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticCustomError

from engine.agent.config import AgentConfig
from engine.agent.env_instruction import templatize
from engine.agent.memory.episodes import EpisodeStore
from engine.agent.memory.thread import ThreadMemory
from engine.agent.outcome import StepOutcome
from engine.agent.service_proxy import ServiceProxy
from engine.agent.skills.discovery import env_skill_dirs_of
from engine.agent.tools import ASK_ENV, FINISH, AgentTool
from engine.agent.toolset import Toolset
from engine.agent.toolsets import FileTools, MemoryTools, SkillTools, TodoTools
from engine.agent.workspace import AgentWorkspace, as_workspace
from engine.env.handle import EnvHandle
from engine.env.requests import EnvRequest
from engine.errors import LLMCallError, SpecError, StructuredOutputError, WorkspaceError
from engine.llm.budget import BudgetGate
from engine.llm.decision import build_decision_model
from engine.llm.dispatcher import caller_model
from engine.llm.meter import Meter
from engine.llm.prefix import prompt_print
from engine.llm.prompt import PromptTemplate
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured
from engine.llm.wrappers.context_window import CHARS_PER_TOKEN
from engine.plugins import check_config
from engine.trace import TraceRecorder

__all__ = ["AgentBase"]

A = TypeVar("A", bound="AgentBase")

#: Each committed step's replay record (see :meth:`AgentBase.record_step`).
STEP_REPLAY = ".runtime/logs/step_replay.jsonl"


class AgentBase(ABC):
    """Base of all agents. Subclasses implement :meth:`step`, :meth:`ask` and :meth:`build_react_messages`.

    Do not override ``__init__``: it takes no arguments and only sets empty slots; state is set
    in :meth:`restore`.
    """

    #: the template :meth:`build_react_messages` renders (recorded with each LLM call)
    react_prompt: PromptTemplate | None = None
    #: what this class reads of the spec's ``config`` (a class that reads more declares a subclass)
    Config: ClassVar[type[AgentConfig]] = AgentConfig

    def __init__(self) -> None:
        self.id: int = -1
        self.profile: dict[str, Any] = {}
        self.config: dict[str, Any] = {}  #: as the spec gave it
        self.settings: AgentConfig = AgentConfig()  #: ``config`` read by :attr:`Config`
        self.state: dict[str, Any] = {}  #: AGENT.json's dynamic part
        self.workspace: AgentWorkspace | None = None
        self.meter = Meter(track_prompts=True)  #: its last prompts' prints are kept in AGENT.json (engine.llm.prefix)
        self._service_proxy: ServiceProxy | None = None
        self._env: EnvHandle  #: ServiceProxy.env, bound by restore
        self._dispatcher: ChatModel | None = None
        self._trace: TraceRecorder | None = None
        self._budget: BudgetGate | None = None
        self._current_time: datetime | None = None
        self._step_count = 0
        self._toolsets: list[Toolset] = []
        self._thread: list[dict[str, Any]] = []
        self._tool_log: list[dict[str, Any]] = []
        self._fresh_chars = 0  #: the last prompt's characters outside the thread memory (system, observation)

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def create(cls, workspace: AgentWorkspace | Path, *, agent_id: int, profile: dict[str, Any], config: dict[str, Any]) -> None:
        """Write the workspace once: ``config.json``, an initial ``AGENT.json`` and the directories.

        Args:
            workspace: the new workspace (a path: a folder on local disk).
        """
        ws = as_workspace(workspace)
        ws.make_dirs()
        ws.write_json("config.json", {"id": agent_id, "type": cls.__name__, "profile": profile, "config": config})
        ws.write_json("AGENT.json", {"id": agent_id, "type": cls.__name__, "step_count": 0, "state": {}})

    @classmethod
    async def from_workspace(
        cls: type[A],
        workspace: AgentWorkspace | Path,
        service_proxy: ServiceProxy,
        *,
        budget: BudgetGate | None = None,
    ) -> A:
        """Rebuild a ready agent: ``cls()`` then ``await restore(...)``.

        Args:
            workspace: the agent's workspace (a path: a folder on local disk).
            service_proxy: shared service handles (env, LLM clients, trace, replay).
            budget: the batch's budget gate, if the run has a budget.
        """
        agent = cls()
        await agent.restore(workspace, service_proxy, budget=budget)
        return agent

    async def restore(
        self,
        workspace: AgentWorkspace | Path,
        service_proxy: ServiceProxy,
        *,
        budget: BudgetGate | None = None,
    ) -> None:
        """Load the workspace and bind services. Subclasses call ``super()`` first, then add state.

        Raises:
            WorkspaceError: missing or corrupt workspace files.
        """
        self.workspace = as_workspace(workspace)
        static = self.workspace.read_json("config.json")
        dynamic = self.workspace.read_json("AGENT.json")
        if static.get("id") != dynamic.get("id"):
            raise WorkspaceError(f"{self.workspace.name}: config.json and AGENT.json disagree on the agent id")
        self.id = int(static["id"])
        self.profile = static.get("profile", {})
        self.config = static.get("config", {})
        try:
            check_config(type(self).Config, self.config, f"agent type {type(self).__name__}")
        except PydanticCustomError as problem:
            where = f"config.{problem.context['key']}" if problem.context else "config"
            raise SpecError(f"agent {self.id}: {where}: {problem.message()}", path=where) from None
        self.settings = type(self).Config.model_validate(self.config)
        self.state = dynamic.get("state", {})
        self._step_count = int(dynamic.get("step_count", 0))
        self.meter.last_prompts = {name: tuple((str(h), int(n)) for h, n in found)
                                   for name, found in (dynamic.get("last_prompts") or {}).items()}
        self._budget = budget
        self._bind_services(service_proxy)
        assert self._dispatcher is not None  # _bind_services just set it
        self.thread = ThreadMemory.from_config(self.workspace, self._dispatcher, self.config)
        self.episodes = EpisodeStore(self.workspace)
        self.skills = SkillTools(
            self.workspace, env_skill_dirs=env_skill_dirs_of(self._env), profile=self.profile,
            clock=lambda: self._current_time, agent_id=self.id,
            timeout_s=self.settings.skill_timeout_s,
        )
        self._toolsets = self.build_toolsets()

    def _bind_services(self, service_proxy: ServiceProxy) -> None:
        self._service_proxy = service_proxy
        self._env = service_proxy.env
        self._trace = service_proxy.trace.recorder if service_proxy.trace is not None else None
        self._dispatcher = caller_model(service_proxy.client("default"), self.meter, caller=f"agent:{self.id}",
                                        role="default", trace=self._trace, budget=self._budget)

    # ---- persistence -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(self.profile.get("name", f"agent {self.id}"))

    def build_agent_json(self, *, tick: int | None, t: datetime | None) -> dict[str, Any]:
        """The self-description snapshot; subclasses extend the returned dict."""
        return {
            "id": self.id,
            "type": type(self).__name__,
            "name": self.name,
            "step_count": self._step_count,
            "current_time": t.isoformat() if t else None,
            "last_tick": tick,
            "state": self.state,
            "last_prompts": self.meter.last_prompts,
        }

    def persist_agent_json(self, *, tick: int | None, t: datetime | None) -> None:
        assert self.workspace is not None
        self.workspace.swap_json("AGENT.json", self.build_agent_json(tick=tick, t=t))

    async def to_workspace(self) -> None:
        """Write AGENT.json and flush this step's thread and tool-call logs."""
        assert self.workspace is not None
        for toolset in self._toolsets:
            toolset.save()
        self.thread.save()
        self.persist_agent_json(tick=None, t=self._current_time)
        self.workspace.append_jsonl(".runtime/logs/thread_messages.jsonl", self._thread)
        self.workspace.append_jsonl(".runtime/logs/tool_calls.jsonl", self._tool_log)
        self._thread, self._tool_log = [], []

    def commit_step(self, step: int, record: dict[str, Any]) -> None:
        """Mark society step ``step`` as done by this agent: its replay record now, AGENT.json next.

        The caller then runs :meth:`to_workspace`, whose AGENT.json write is the commit point.
        """
        self._step_count = step
        self.record_step(step, record)

    def record_step(self, step: int, record: dict[str, Any]) -> None:
        """Append this step's replay record (its action row and LLM call rows) to ``step_replay.jsonl``.

        Written before ``AGENT.json`` (the commit point of an agent-step), so a retried batch that finds
        the agent already stepped re-emits the same rows instead of stepping it twice.
        """
        assert self.workspace is not None
        self.workspace.append_jsonl(STEP_REPLAY, [{"step": step, **record}])

    def replayed_step(self, step: int) -> dict[str, Any] | None:
        """The record :meth:`record_step` wrote for ``step`` when this agent already committed it."""
        assert self.workspace is not None
        if self._step_count < step:
            return None
        found = None
        for record in self.workspace.read_jsonl(STEP_REPLAY):
            if record.get("step") == step:
                found = record
        return found

    def _log_thread(self, t: datetime, messages: list[dict[str, Any]]) -> None:
        """Keep messages in the thread memory and in this step's thread log."""
        self.thread.append(messages)
        self._thread.extend({"t": t.isoformat(), **m} for m in messages)

    # ---- the ReAct loop ----------------------------------------------------------------------
    def react_tools(self, *, readonly: bool = False) -> dict[str, AgentTool]:
        """Tools offered this turn. Subclasses add theirs to ``super().react_tools(...)``."""
        tools = {ASK_ENV.name: ASK_ENV, FINISH.name: FINISH}
        for toolset in self._toolsets:
            tools.update(toolset.tools(readonly=readonly))
        return self._offer(tools, readonly=readonly)

    def build_toolsets(self) -> list[Toolset]:
        """The toolsets this agent offers (built at restore). Subclasses extend ``super()``'s list."""
        assert self.workspace is not None
        return [FileTools(self.workspace), TodoTools(self.workspace), self.skills, MemoryTools(self.workspace, self.episodes)]

    def _offer(self, tools: dict[str, AgentTool], *, readonly: bool) -> dict[str, AgentTool]:
        """Filter by readonly and by ``config.tools`` (a researcher's allow-list; finish always stays)."""
        allowed = self.settings.tools
        return {
            name: t for name, t in tools.items()
            if (t.readonly or not readonly) and (allowed is None or name in allowed or name == FINISH.name)
        }

    def decision_model(self, tools: dict[str, AgentTool]) -> type[BaseModel]:
        return build_decision_model(
            "AgentDecision",
            {name: t.args_model for name, t in tools.items()},
            stop_field="finish",
            stop_help="true to end the step after this action",
        )

    @abstractmethod
    def build_react_messages(
        self, *, tick: int, t: datetime, observations: list[str], question: str | None = None, readonly: bool = False
    ) -> list[dict[str, Any]]:
        """The chat messages that open the loop: system messages (what stays the same call after call comes first,
        for prefix caches), then any context messages, then the turn's request, the one message the thread keeps."""

    async def dispatch_react_tool(self, action: str, args: dict[str, Any], *, readonly: bool = False) -> str:
        """Run one tool. Subclasses handle their prefixes and fall back to ``super()``.

        Unknown names produce a recoverable message with the nearest valid names.
        """
        if action == ASK_ENV.name:
            return await self.ask_env(args["instruction"], readonly=readonly, variables=args.get("variables"))
        for toolset in self._toolsets:
            if action in toolset.tools(readonly=readonly):
                return await toolset.dispatch(action, args, readonly=readonly)
        valid = list(self.react_tools(readonly=readonly))
        near = difflib.get_close_matches(action, valid, n=3)
        return f"error: unknown tool {action!r}" + (f"; did you mean {', '.join(near)}?" if near else f"; valid: {', '.join(valid)}")

    async def ask_env(self, instruction: str, *, readonly: bool = False, variables: dict[str, Any] | None = None) -> str:
        """Send an instruction to the environment router; returns its answer as ``[status] answer``.

        By default the instruction goes in template mode (config ``env_template_mode``, default
        true): its ``{placeholders}`` and the literal values found in it (see
        :func:`~engine.agent.env_instruction.templatize`) travel as variables, so the CodeGen
        router can reuse code generated for the same template by any agent. With the key false the
        filled-in instruction is sent as plain text.

        Args:
            instruction: what to observe or do; may contain ``{name}`` placeholders.
            readonly: the ask must not change the environment.
            variables: values of the placeholders (the ask_env tool's ``variables``).
        """
        template_mode = self.settings.env_template_mode
        request = templatize(instruction, variables, literals=template_mode)
        if request.missing:
            names = ", ".join("{" + name + "}" for name in request.missing)
            return f"[fail] not sent: no value for {names}; give it in variables or write the value out"
        ask = EnvRequest(
            "ask", self.id, request.template if template_mode else request.text, readonly,
            template_mode=template_mode, variables=request.variables if template_mode else None,
        )
        if self._trace is not None:
            with self._trace.span("env.ask", agent_id=self.id, template_mode=template_mode) as span:
                ref = span.ref
                reply = await self._env.ask(replace(ask, trace_id=ref.trace_id, parent_span_id=ref.span_id))
                span.set(status=reply.status)
        else:
            reply = await self._env.ask(ask)
        return f"[{reply.status}] {reply.answer}"

    async def run_react_loop(
        self, *, tick: int, t: datetime, observations: list[str] | None = None, question: str | None = None, readonly: bool = False
    ) -> StepOutcome:
        """Decide, act, repeat until ``finish`` or the turn limit.

        Config keys: ``max_react_turns`` (default 4), ``max_parse_attempts`` (default 3),
        ``tools`` (allow-list of tool names; ``finish`` is always offered), ``env_template_mode``
        (default true; see :meth:`ask_env`).
        """
        tools = self.react_tools(readonly=readonly)
        decision_type = self.decision_model(tools)
        fresh = self.build_react_messages(tick=tick, t=t, observations=observations or [], question=question, readonly=readonly)
        self._fresh_chars = sum(chars for _, chars in prompt_print(fresh))  # the prompt beside the thread
        # Earlier turns (the thread memory's window) go between the system prompt and this turn; the thread keeps only
        # the turn's request (the last message): context messages before it are rebuilt for every turn.
        earlier = self.thread.context()
        system, request = [m for m in fresh if m["role"] == "system"], [m for m in fresh if m["role"] != "system"]
        self._log_thread(t, [*system, *request[-1:]])  # the thread memory skips system messages; the step's log keeps them
        messages = [*system, *earlier, *request]
        outcome = StepOutcome(status="turn_limit")
        max_turns = self.settings.max_react_turns
        assert self._dispatcher is not None  # restore() bound it
        for turn in range(1, max_turns + 1):
            outcome.turns = turn
            try:
                decision = await complete_structured(
                    self._dispatcher, messages, decision_type, prompt=self.react_prompt,
                    max_attempts=self.settings.max_parse_attempts,
                    hint="Valid tools: " + ", ".join(tools),
                )
            except (StructuredOutputError, LLMCallError) as error:
                outcome.status, outcome.error = "llm_error", str(error)[:1000]
                return outcome
            action = decision.action  # type: ignore[attr-defined]  # the decision model is built at run time
            args = action.arguments.model_dump()
            reply = json.dumps({"thought": decision.thought, "tool": action.tool, "arguments": args}, ensure_ascii=False)  # type: ignore[attr-defined]  # the decision model is built at run time
            messages = [*messages, {"role": "assistant", "content": reply}]
            self._log_thread(t, [{"role": "assistant", "content": reply}])
            outcome.tools_called.append(action.tool)
            if action.tool == FINISH.name:
                outcome.status, outcome.summary = "finished", args["summary"]
                if not readonly:  # an ask (e.g. a questionnaire) leaves memory as it was
                    self.episodes.finish(args.get("memories", []), t=t, step=self._step_count + 1)
                return outcome
            result = await self.dispatch_react_tool(action.tool, args, readonly=readonly)
            outcome.env_calls += action.tool == ASK_ENV.name
            # No wall-clock fields in the workspace: the agent can read it, and a seeded rerun must see
            # the same bytes (timings live in the trace spans).
            self._tool_log.append({"t": t.isoformat(), "tool": action.tool, "arguments": args, "result": result})
            observation = {"role": "user", "content": f"Result of {action.tool}: {result}"}
            messages = [*messages, observation]
            self._log_thread(t, [observation])
            if decision.finish:  # type: ignore[attr-defined]  # the decision model is built at run time
                outcome.status, outcome.summary = "finished", decision.thought  # type: ignore[attr-defined]  # the decision model is built at run time
                return outcome
        return outcome

    def thread_room(self) -> int | None:
        """Characters the thread memory may keep so the next prompt stays within the spec's ``context_budget``
        (None: no budget): the budget less what the last prompt held beside the thread."""
        assert self._service_proxy is not None
        budget = self._service_proxy.client("default").prompt_budget
        return None if budget is None else budget * CHARS_PER_TOKEN - self._fresh_chars

    # ---- what subclasses implement -----------------------------------------------------------
    @abstractmethod
    async def step(self, tick: int, t: datetime) -> StepOutcome:
        """Run one simulation step of ``tick`` seconds ending at ``t``."""

    @abstractmethod
    async def ask(self, message: str, readonly: bool = True, *, t: datetime | None = None) -> str:
        """Answer an external question through the agent's reasoning."""
