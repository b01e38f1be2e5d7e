"""CodeGenRouter: the LLM writes a few lines of Python against the tools; the sandbox runs them.

Per ask: the tools are shown as a pyi-like listing, the LLM answers with a JSON-schema decision
``{thought, code}`` (the ``code`` field carries one example call per offered tool, which also lets
the simulated LLM produce runnable code), the guard checks the code and a sandbox process runs it
(``SandboxPool``: memory and CPU limits enforced by the OS, killed at its deadline, tool calls
served here). A refusal by the guard or the compiler, a mistake in the code, or code the sandbox
stopped (time, memory) is fed back for another try, up to ``max_steps`` LLM calls; a run that
already changed the environment or that the environment refused is never retried, so a change is
not applied twice. In template mode the working code is cached by template
(``template_cache``) and reused with the next caller's variables; the code is stored only when it
takes every value from ``variables`` (``template_reuse``), so a hit never replays another caller's
values, and the ``code`` examples then read the values from there (``codegen_examples``).
The code's ``random`` is seeded per ask from the run seed and the request (:func:`request_seed`),
so the same request in a rerun draws the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from engine.env.base import EnvBase
from engine.env.requests import EnvReply, EnvRequest, EnvStatus, ToolCall
from engine.env.router_base import STATUS_DESCRIPTIONS, RouterBase, RouterConfig, RouterSetup
from engine.env.routers.codegen_examples import example_call, template_examples
from engine.env.routers.codegen_prompts import (
    CODEGEN_FEEDBACK,
    CODEGEN_INSTRUCTION,
    CODEGEN_SUMMARY,
    CODEGEN_SYSTEM,
    READONLY_NOTE,
    TEMPLATE_NOTE,
)
from engine.env.routers.decision import caller_fields
from engine.env.routers.embedding import Embedder, resolve_embedder
from engine.env.routers.template_cache import CacheStats, Generated, TemplateCache
from engine.env.routers.template_reuse import judge_reuse
from engine.env.sandbox import (
    CodeRejectedError,
    ExecutionResult,
    Executor,
    SandboxLimits,
    SandboxPool,
    SandboxTool,
    SandboxUnavailableError,
    execute,
)
from engine.env.tool import ToolInfo
from engine.errors import LLMCallError, StructuredOutputError, ToolCallError
from engine.llm.meter import Meter
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured

__all__ = ["CodeGenRouter", "build_code_decision", "example_call", "pyi_listing", "request_seed"]

log = logging.getLogger(__name__)


def _annotation(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


def pyi_listing(tools: dict[str, ToolInfo]) -> str:
    """Tools as pyi-like stubs grouped by module; caller-filled arguments (agent_id) are left out."""
    by_module: dict[str, list[str]] = defaultdict(list)
    for name, info in tools.items():
        params = []
        for field_name, field in info.args_model.model_fields.items():
            if field_name in caller_fields:
                continue
            default = "" if field.is_required() else f" = {field.default!r}"
            params.append(f"{field_name}: {_annotation(field.annotation)}{default}")
        marker = "  # read-only" if info.readonly else ""
        by_module[info.module].append(f'def {name}({", ".join(params)}):{marker}\n    """{info.description}"""')
    return "\n\n".join(f"# {module}\n" + "\n".join(stubs) for module, stubs in by_module.items())


def build_code_decision(tools: dict[str, ToolInfo], examples: list[str] | None = None) -> type[BaseModel]:
    """The decision model ``{thought, code}``; ``code`` lists ``examples`` (default: one call per tool)."""
    if examples is None:
        examples = [example_call(name, info) for name, info in tools.items()]
    extra: dict[str, Any] = {"examples": examples} if examples else {}
    code_field = Field(
        description="Python statements calling the functions; store what the agent should learn in results[...]",
        **extra,
    )
    return create_model(
        "CodeDecision",
        __config__=ConfigDict(extra="forbid"),
        thought=(str, Field(description="brief reasoning")),
        code=(str, code_field),
    )


def request_seed(run_seed: int, agent_id: Any, t: datetime | None, instruction: str, variables: Any) -> int:
    """The seed of one ask's ``random``: a hash of the run seed and the request (agent, time, text, values).

    Two identical requests (same run seed, agent, simulated time, instruction and variables) draw
    the same numbers; any difference gives an unrelated seed.
    """
    request = [run_seed, agent_id, t.isoformat() if t else None, instruction, variables]
    digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass
class _Attempt:
    code: str | None = None
    execution: ExecutionResult | None = None
    error: str | None = None  #: refusal or LLM failure when there is no execution
    gave_up: bool = False  #: no sandbox could run the code: another try would fare no better

    @property
    def final(self) -> bool:
        """True when another try must not follow: it worked, changed state, the env refused, or no sandbox ran it."""
        ex = self.execution
        return self.gave_up or (ex is not None and (ex.ok or ex.mutations > 0 or any(not c["ok"] for c in ex.calls)))


class CodeGenRouter(RouterBase):
    """Routes asks by having the LLM write sandboxed Python against the modules' tools.

    Args:
        env_modules: the modules, in spec order.
        llm: the routing model (already metered).
        meter: where the router's LLM usage accumulates.
        max_steps: LLM calls per ask (the first try plus retries with the error fed back).
        cache_dir: where the template cache file ``<tool-set hash>.json`` lives (the actor picks
            ``<run_dir>/env/_codegen_cache`` or a directory shared across runs); None keeps the
            cache in memory.
        similarity_threshold: cosine similarity for reusing code of a similar template.
        embedder: an :class:`Embedder`, or a spec string for :func:`resolve_embedder`
            (None: the simulated embeddings).
        limits: sandbox limits per execution.
        sandbox: where generated code runs; None starts the router's own ``SandboxPool`` (its
            processes start at :meth:`init`, and :meth:`close` ends them).
        seed: the run seed, from which each ask's ``random`` seed derives (:func:`request_seed`).
        final_summary: after code ran, one more LLM call turns its results into the answer
            (``CODEGEN_SUMMARY``); False answers with the results themselves.
    """

    class Config(RouterConfig):
        cache_similarity: float = Field(0.85, gt=0, le=1, description="reuse cached code above this embedding similarity")
        final_summary: bool = Field(False, description="one more coder call turns the executed code's results into the answer")

    @classmethod
    def from_config(cls, env_modules: list[EnvBase], llm: ChatModel | None, config: RouterConfig, setup: RouterSetup) -> CodeGenRouter:
        assert isinstance(config, CodeGenRouter.Config)
        return cls(env_modules, llm, meter=setup.meter, max_steps=setup.max_steps, cache_dir=setup.cache_dir, seed=setup.seed,
                   similarity_threshold=config.cache_similarity, final_summary=config.final_summary,
                   embedder=resolve_embedder(setup.embedder, seed=setup.seed, config=setup.embedder_config))

    def __init__(
        self,
        env_modules: list[EnvBase],
        llm: ChatModel | None = None,
        *,
        meter: Meter | None = None,
        max_steps: int = 3,
        cache_dir: Path | None = None,
        similarity_threshold: float = 0.85,
        embedder: Embedder | str | None = None,
        limits: SandboxLimits | None = None,
        sandbox: Executor | None = None,
        seed: int = 0,
        final_summary: bool = False,
    ) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        self.seed = seed
        self.final_summary = final_summary
        self.limits = limits or SandboxLimits()
        self._pool: SandboxPool | None = None  #: the pool this router started (and closes)
        if sandbox is None:
            sandbox = self._pool = SandboxPool(limits=self.limits)
        self.sandbox = sandbox
        self.config_hash = self._config_hash()
        if embedder is None or isinstance(embedder, str):
            embedder = resolve_embedder(embedder)
        path = Path(cache_dir) / f"{self.config_hash}.json" if cache_dir is not None else None
        self.cache = TemplateCache(path, embedder=embedder, threshold=similarity_threshold)
        self._decisions: dict[tuple[bool, tuple[str, ...] | None], type[BaseModel]] = {}

    def _config_hash(self) -> str:
        described = [
            [info.module, name, info.readonly, info.kind, info.description, info.args_model.model_json_schema()]
            for name, info in self.tools().items()
        ]
        return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def decision_model(
        self, readonly: bool, template: str | None = None, variables: dict[str, Any] | None = None
    ) -> type[BaseModel]:
        """The decision model of an ask; a template ask's examples read its values from ``variables``."""
        tools = self.tools(readonly=readonly)
        examples = None
        if template is not None:
            examples = tuple(template_examples(tools, template, variables or {})) or None
        key = (readonly, examples)
        if key not in self._decisions:
            if len(self._decisions) > 256:
                self._decisions.clear()
            self._decisions[key] = build_code_decision(tools, list(examples) if examples else None)
        return self._decisions[key]

    def get_cache_stats(self) -> CacheStats:
        return self.cache.stats

    async def init(self, start_datetime: datetime, agent_ids: list[int] | None = None, snapshot: Path | None = None) -> bool:
        if self._pool is not None:
            if agent_ids is not None:  # an agent asks one thing at a time: every agent of the run may wait, none is
                # refused for the load alone (10,000 agents in two batches of 5,000 overflowed the default 4,096)
                self._pool.max_waiting = max(self._pool.max_waiting, len(agent_ids) + 1)
            self._pool.prestart()  # interpreters start while the modules initialise; the first ask finds them ready
        return await super().init(start_datetime, agent_ids, snapshot)

    async def close(self) -> None:
        await super().close()
        if self._pool is not None:
            await self._pool.close()

    async def ask(self, request: EnvRequest) -> EnvReply:
        if self.llm is None:
            raise ToolCallError("CodeGenRouter needs an LLM")
        if request.template_mode:
            attempt = await self._ask_template(request, dict(request.variables or {}))
        else:
            attempt = await self._generate(request, request.instruction, None)
        execution = attempt.execution
        answer = _answer(attempt)
        if self.final_summary and execution is not None:
            answer = await self._summarise(request, answer)
        return EnvReply(
            answer, _status(attempt),
            tuple(ToolCall.from_row(row) for row in execution.calls) if execution else (),
            code_results=execution.results if execution else {},
        )

    async def _summarise(self, request: EnvRequest, results: str) -> str:
        """The summary call's answer; the results themselves when the call fails or says nothing."""
        assert self.llm is not None
        content = CODEGEN_SUMMARY.render(agent_id=request.agent_id, instruction=request.instruction, results=results)
        try:
            reply = await self.llm.complete([{"role": "user", "content": content}], prompt=CODEGEN_SUMMARY.id)
        except LLMCallError as error:
            log.warning("CodeGen summary call failed, answering with the results: %s", error)
            return results
        return reply.text.strip() if reply.text and reply.text.strip() else results

    async def _ask_template(self, request: EnvRequest, variables: dict[str, Any]) -> _Attempt:
        template = request.instruction
        mode = "ro" if request.readonly else "rw"
        hit = await self.cache.lookup(mode, template)
        if hit is not None:
            attempt = await self._run(hit.code, request, variables)
            if attempt.final:
                return attempt
            self.cache.evict(hit)  # broken for these tools or variables: generate afresh

        async def generate() -> Generated[_Attempt]:
            return self._judged(await self._generate(request, template, variables), template, variables)

        code, attempt, leader = await self.cache.generate_once(mode, template, generate)
        if leader:
            return attempt
        if code is not None:
            return await self._run(code, request, variables)
        if attempt.execution is None or not attempt.execution.ok:
            # The shared generation failed; its tool calls were the leader's, not ours.
            return _Attempt(error=attempt.error or (attempt.execution.error if attempt.execution else None))
        # The leader's code worked with the leader's values only: this caller needs its own.
        own = self._judged(await self._generate(request, template, variables), template, variables)
        self.cache.count_generation(ok=own.code is not None, reusable=own.reusable)
        if own.code is not None and own.reusable:
            await self.cache.store(mode, template, own.code, exact_only=own.exact_only)
        return own.payload

    @staticmethod
    def _judged(attempt: _Attempt, template: str, variables: dict[str, Any]) -> Generated[_Attempt]:
        """The attempt as a generation for the cache: its code when it worked, and whether others may replay it."""
        if attempt.execution is None or not attempt.execution.ok or attempt.code is None:
            return Generated(None, attempt)
        verdict = judge_reuse(attempt.code, template, variables)
        if verdict.reason:
            log.debug("CodeGen code for %r: %s", template, verdict.reason)
        return Generated(attempt.code, attempt, reusable=verdict.reusable, exact_only=verdict.exact_only)

    async def _generate(
        self, request: EnvRequest, instruction: str, variables: dict[str, Any] | None
    ) -> _Attempt:
        agent_id, readonly = request.agent_id, request.readonly
        system = CODEGEN_SYSTEM.render(
            agent_id=agent_id, world=self.get_world_description(), listing=pyi_listing(self.tools(readonly=readonly)),
            statuses=", ".join(STATUS_DESCRIPTIONS), readonly_note=READONLY_NOTE if readonly else "",
        )  # fmt: skip
        template_note = "" if variables is None else TEMPLATE_NOTE.render(values=json.dumps(variables, default=str))
        user = CODEGEN_INSTRUCTION.render(
            time=self.t.isoformat() if self.t else "unknown", agent_id=agent_id, instruction=instruction,
            template_note=template_note,
        )  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        llm = self.llm
        if llm is None:
            raise ToolCallError("CodeGenRouter needs an LLM")
        decision_type = self.decision_model(readonly, instruction if variables is not None else None, variables)
        attempt = _Attempt()
        for _ in range(self.max_steps):
            try:
                decision = await complete_structured(llm, messages, decision_type, prompt=CODEGEN_INSTRUCTION)
            except (StructuredOutputError, LLMCallError) as error:
                return _Attempt(code=attempt.code, error=f"the environment could not interpret the request: {error}")
            attempt = await self._run(decision.code, request, variables)  # type: ignore[attr-defined]  # the decision model is built at run time
            if attempt.final:
                return attempt
            if attempt.execution is None:
                problem, detail, output = "was refused by the sandbox", attempt.error or "", ""
            else:
                ex = attempt.execution
                problem, detail = "failed", ex.error or ""
                output = f"Printed output:\n{ex.output}\n" if ex.output else ""
            feedback = CODEGEN_FEEDBACK.render(problem=problem, error=detail, output=output)
            messages = [
                *messages,
                {"role": "assistant", "content": decision.model_dump_json()},
                {"role": "user", "content": feedback},
            ]
        return attempt

    async def _run(self, code: str, request: EnvRequest, variables: dict[str, Any] | None) -> _Attempt:
        try:
            execution = await execute(
                code, self._sandbox_tools(request.agent_id, request.readonly), ctx=_sandbox_context(request),
                variables=variables, limits=self.limits, readonly=request.readonly, executor=self.sandbox,
                seed=request_seed(self.seed, request.agent_id, self.t, request.instruction, variables),
            )  # fmt: skip
        except CodeRejectedError as error:
            return _Attempt(code=code, error=str(error))
        except SandboxUnavailableError as error:
            log.warning("CodeGen code not run: %s", error)
            return _Attempt(code=code, error=f"the environment could not run the code: {error}", gave_up=True)
        return _Attempt(code=code, execution=execution)

    def _sandbox_tools(self, agent_id: int, readonly: bool) -> list[SandboxTool]:
        tools = []
        for name, info in self.tools(readonly=readonly).items():
            fields = info.args_model.model_fields
            bound = {key: agent_id for key in caller_fields if key in fields}

            async def call(arguments: dict[str, Any], name: str = name) -> Any:
                return await self.call_tool(name, arguments, readonly=readonly)

            params = tuple(key for key in fields if key not in bound)
            tools.append(SandboxTool(name, params, info.readonly, call, bound, _validator(name, info)))
        return tools


def _validator(name: str, info: ToolInfo) -> Any:
    def validate(arguments: dict[str, Any]) -> None:
        try:
            info.args_model.model_validate(arguments)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            raise TypeError(f"{name}(): {where}: {first['msg']}") from None

    return validate


def _sandbox_context(request: EnvRequest) -> dict[str, Any]:
    """What generated code reads as ``ctx``: the caller, and a template ask's variables."""
    ctx: dict[str, Any] = {"agent_id": request.agent_id}
    if request.variables is not None:
        ctx["variables"] = dict(request.variables)
    return ctx


def _status(attempt: _Attempt) -> EnvStatus:
    ex = attempt.execution
    if ex is None:
        return "error"
    declared = ex.results.get("status")
    if declared in STATUS_DESCRIPTIONS:
        return cast(EnvStatus, declared)
    if any(not call["ok"] for call in ex.calls):
        return "fail"
    if not ex.ok:
        return "error"
    return "success" if ex.calls else "fail"


def _answer(attempt: _Attempt) -> str:
    ex = attempt.execution
    if ex is None:
        return attempt.error or "nothing was done"
    parts: list[str] = []
    answer = ex.results.get("answer")
    if answer is not None:
        parts.append(answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False))
    else:
        parts += [f"{call['tool']}: {call['result']}" for call in ex.calls]
        parts += [f"{key}: {value}" for key, value in ex.results.items() if key != "status"]
    if ex.output:
        parts.append(ex.output.rstrip())
    if ex.error:
        parts.append(f"error: {ex.error}")
    return "\n".join(parts) or "nothing was done"
