"""CodeGenRouter: generated code reaches the right tools, errors are fed back, readonly holds, the cache is reused."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest, ToolCall
from engine.env.routers.codegen import CodeGenRouter, build_code_decision, example_call, pyi_listing
from engine.env.sandbox import SandboxLimits, SandboxPool
from engine.env.tool import tool
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.backends.sim_backend import SimChatModel
from engine.llm.protocol import ChatResult

T1 = datetime(2024, 1, 1, 8, 15)
SEND_TEMPLATE = "send {content} to agent {to}"
SEND_CODE = 'send_message(to_agent_id=variables["to"], content=variables["content"])'


def code(text: str, thought: str = "ok") -> dict[str, Any]:
    return {"thought": thought, "code": text}


class SlowScripted(ScriptedModel):
    """A ScriptedModel whose answers take a while (so concurrent asks overlap)."""

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.requests.append({"messages": messages, **kwargs})
        await asyncio.sleep(0.05)
        if not self._replies:
            raise AssertionError("ScriptedModel ran out of replies")
        return ChatResult(text=self._replies.pop(0), model="scripted")


class Ledger(EnvBase):
    """A ledger with one tool: agents add amounts to their balance."""

    def __init__(self) -> None:
        super().__init__()
        self.balances: dict[int, int] = {}

    @tool()
    async def add(self, agent_id: int, amount: int) -> str:
        """Add amount to the caller's balance."""
        seen = self.balances.get(agent_id, 0)
        await asyncio.sleep(0)  # races without the router's lock
        self.balances[agent_id] = seen + amount
        return f"balance {self.balances[agent_id]}"


async def test_scripted_code_calls_the_tool_with_the_callers_agent_id() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(to_agent_id=2, content='hi')")])
    router = CodeGenRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply.status == "success"
    assert reply.calls == (
        ToolCall("send_message", {"to_agent_id": 2, "content": "hi", "agent_id": 1}, "message to agent 2 queued for delivery", True),
    )
    assert reply.answer == "send_message: message to agent 2 queued for delivery"
    await router.step(900, T1)
    assert await router.observe(2) == "Inbox (1 messages, latest 1):\n- from agent 1: hi"


async def test_readonly_answer_comes_from_results() -> None:
    llm = ScriptedModel([code('results["answer"] = read_inbox()')])
    reply = await CodeGenRouter([MessagingSpace()], llm).ask(EnvRequest("ask", 3, "any mail?", readonly=True))
    assert (reply.status, reply.answer) == ("success", "Your inbox is empty.")
    assert reply.code_results == {"answer": "Your inbox is empty."}


async def test_listing_and_examples_omit_agent_id_and_cover_every_offered_tool() -> None:
    router = CodeGenRouter([MessagingSpace()], ScriptedModel([]))
    listing = pyi_listing(router.tools())
    assert "def send_message(to_agent_id: int, content: str):\n" in listing
    assert "def read_inbox():  # read-only" in listing
    assert "agent_id:" not in listing.replace("to_agent_id:", "")
    schema = build_code_decision(router.tools()).model_json_schema()
    assert schema["properties"]["code"]["examples"] == [
        'send_message(to_agent_id=1, content="hello")',
        'post_to_group(group="hello", content="hello")',
        'join_group(group="hello")',
        'results["answer"] = read_inbox()',
        'results["answer"] = list_groups()',
        'results["answer"] = message_statistics()',
    ]
    assert example_call("add", Ledger.tools()["add"]) == "add(amount=1)"


async def test_refused_code_is_fed_back_and_retried() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("x = ().__class__"), code("send_message(2, 'hi')")])
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply.status == "success"
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your code was refused by the sandbox:")
    assert "line 1: attribute '__class__' is not allowed" in feedback
    assert json.loads(llm.requests[1]["messages"][-2]["content"])["code"] == "x = ().__class__"
    assert len(space.updates) == 1


async def test_a_runtime_mistake_is_fed_back_with_its_line_and_output() -> None:
    llm = ScriptedModel([code("print('trying')\nsend_mesage(2, 'hi')"), code("send_message(2, 'hi')")])
    reply = await CodeGenRouter([MessagingSpace()], llm).ask(EnvRequest("ask", 1, "tell agent 2 hi"))
    assert reply.status == "success"
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert "line 2: NameError: name 'send_mesage' is not defined" in feedback
    assert "Printed output:\ntrying" in feedback


async def test_llm_cannot_choose_the_sender_agent_id() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(agent_id=9, to_agent_id=2, content='spoof')")] * 3)
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "pretend to be agent 9"))
    assert reply.status == "error"
    assert "agent_id is filled in by the environment" in reply.answer
    assert space.updates.all() == []


async def test_bad_arguments_are_a_mistake_to_retry_not_an_env_refusal() -> None:
    llm = ScriptedModel([code("send_message(to=2, content='hi')"), code("send_message(to_agent_id=2, content='hi')")])
    reply = await CodeGenRouter([MessagingSpace()], llm).ask(EnvRequest("ask", 1, "tell agent 2 hi"))
    assert reply.status == "success"
    assert "TypeError: send_message(): to_agent_id: Field required" in llm.requests[1]["messages"][-1]["content"]


async def test_an_env_refusal_is_reported_as_fail_without_retry() -> None:
    space = MessagingSpace()
    space.bind_agents([1, 2])
    llm = ScriptedModel([code("send_message(5, 'hi')")])
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "tell agent 5 hi"))
    assert reply.status == "fail"
    assert reply.calls[0].ok is False
    assert "there is no agent 5" in reply.answer
    assert len(llm.requests) == 1


async def test_code_that_changed_state_then_failed_is_not_retried() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(2, 'a')\nundefined_name")])
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "tell agent 2 a"))
    assert reply.status == "error"
    assert "NameError" in reply.answer
    assert len(llm.requests) == 1
    assert len(space.updates) == 1  # applied once, not twice


async def test_code_may_declare_the_instruction_unsupported() -> None:
    llm = ScriptedModel([code('results["status"] = "fail"\nresults["answer"] = "there is no weather here"')])
    reply = await CodeGenRouter([MessagingSpace()], llm).ask(EnvRequest("ask", 1, "what is the weather?"))
    assert (reply.status, reply.answer) == ("fail", "there is no weather here")


async def test_readonly_ask_offers_and_exposes_only_readonly_tools() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(2, 'hi')")] * 3)
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "tell agent 2 hi", readonly=True))

    request = llm.requests[0]
    system = request["messages"][0]["content"]
    assert "send_message" not in system and "READ-ONLY" in system
    examples = request["response_format"]["json_schema"]["schema"]["properties"]["code"]["examples"]
    assert examples == [
        'results["answer"] = read_inbox()',
        'results["answer"] = list_groups()',
        'results["answer"] = message_statistics()',
    ]
    assert "NameError: name 'send_message' is not defined" in llm.requests[2]["messages"][-1]["content"]
    assert reply.status == "error"
    assert space.updates.all() == [] and space.get_tool_call_history() == []


@pytest.mark.parametrize("seed", range(6))
async def test_simulated_llm_readonly_asks_never_mutate(seed: int) -> None:
    space = MessagingSpace()
    router = CodeGenRouter([space], SimChatModel("router", seed))
    reply = await router.ask(EnvRequest("ask", 1, "what is going on?", readonly=True))
    assert reply.status == "success"
    assert {call.tool for call in reply.calls} <= {"read_inbox", "list_groups", "message_statistics"}
    assert space.updates.all() == []


async def test_simulated_llm_reaches_the_tool() -> None:
    ledger = Ledger()
    reply = await CodeGenRouter([ledger], SimChatModel("router", 0)).ask(EnvRequest("ask", 4, "add one to my balance"))
    assert reply.status == "success"
    assert ledger.balances == {4: 1}
    assert reply.answer == "add: balance 1"


@pytest.mark.parametrize("seed", range(6))
async def test_simulated_llm_code_runs_the_tool_it_names(seed: int) -> None:
    space = MessagingSpace()
    reply = await CodeGenRouter([space], SimChatModel("router", seed)).ask(EnvRequest("ask", 1, "do something"))
    assert reply.status == "success"
    [call] = reply.calls
    assert [h["function_name"] for h in space.get_tool_call_history()] == [call.tool]


async def test_concurrent_asks_against_an_unsafe_module_lose_no_update() -> None:
    ledger = Ledger()
    router = CodeGenRouter([ledger], ScriptedModel([code("add(1)")] * 100))
    outcomes = await asyncio.gather(*(router.ask(EnvRequest("ask", 7, "add one")) for _ in range(100)))
    assert {reply.status for reply in outcomes} == {"success"}
    assert ledger.balances == {7: 100}


async def test_template_mode_reuses_generated_code_with_new_variables() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code(SEND_CODE)])
    router = CodeGenRouter([space], llm)

    first = await router.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"to": 2, "content": "hi"}))
    second = await router.ask(EnvRequest("ask", 3, SEND_TEMPLATE, template_mode=True, variables={"to": 4, "content": "yo"}))

    assert first.status == second.status == "success"
    assert len(llm.requests) == 1
    user = llm.requests[0]["messages"][1]["content"]
    assert SEND_TEMPLATE in user and '"to": 2' in user and 'variables["name"]' in user
    assert [(p["sender"], p["recipient"], p["content"]) for p in space.updates.all()] == [(1, 2, "hi"), (3, 4, "yo")]
    stats = router.get_cache_stats()
    assert (stats.hits_exact, stats.misses, stats.generations, stats.hit_rate) == (1, 1, 1, 0.5)


async def test_similar_template_reuses_code_and_dissimilar_one_generates() -> None:
    llm = ScriptedModel([code(SEND_CODE), code('results["answer"] = read_inbox()')])
    router = CodeGenRouter([MessagingSpace()], llm)
    def ask(template: str) -> EnvRequest:
        return EnvRequest("ask", 1, template, template_mode=True, variables={"to": 2, "content": "hi"})

    await router.ask(ask(SEND_TEMPLATE))
    reply = await router.ask(ask("please send {content} to agent {to}"))
    assert reply.status == "success" and len(llm.requests) == 1
    await router.ask(ask("read the inbox of agent {to}"))
    assert len(llm.requests) == 2
    stats = router.get_cache_stats()
    assert (stats.hits_exact, stats.hits_similar, stats.misses, stats.generations) == (0, 1, 2, 2)


async def test_cache_persists_across_router_instances(tmp_path: Path) -> None:
    cache_dir = tmp_path / "env" / "_codegen_cache"
    first = CodeGenRouter([MessagingSpace()], ScriptedModel([code(SEND_CODE)]), cache_dir=cache_dir)
    await first.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"to": 2, "content": "hi"}))
    assert (cache_dir / f"{first.config_hash}.json").is_file()

    space = MessagingSpace()
    second = CodeGenRouter([space], ScriptedModel([]), cache_dir=cache_dir)
    reply = await second.ask(EnvRequest("ask", 5, SEND_TEMPLATE, template_mode=True, variables={"to": 6, "content": "yo"}))

    assert second.config_hash == first.config_hash
    assert reply.status == "success"
    assert second.get_cache_stats().hits_exact == 1
    assert space.updates.all()[0]["recipient"] == 6


async def test_a_different_env_configuration_uses_a_different_cache_file(tmp_path: Path) -> None:
    messaging = CodeGenRouter([MessagingSpace()], ScriptedModel([]), cache_dir=tmp_path)
    ledger = CodeGenRouter([Ledger()], ScriptedModel([]), cache_dir=tmp_path)
    both = CodeGenRouter([MessagingSpace(), Ledger()], ScriptedModel([]), cache_dir=tmp_path)
    assert len({messaging.config_hash, ledger.config_hash, both.config_hash}) == 3


async def test_readonly_and_mutating_asks_have_separate_cache_entries() -> None:
    llm = ScriptedModel([code('results["answer"] = read_inbox()'), code('results["answer"] = read_inbox()')])
    router = CodeGenRouter([MessagingSpace()], llm)
    await router.ask(EnvRequest("ask", 1, "check my inbox", readonly=True, template_mode=True))
    await router.ask(EnvRequest("ask", 1, "check my inbox", template_mode=True))
    assert router.get_cache_stats().generations == 2


async def test_fifty_concurrent_identical_misses_make_one_generation() -> None:
    space = MessagingSpace()
    llm = SlowScripted([code(SEND_CODE)])
    router = CodeGenRouter([space], llm)

    outcomes = await asyncio.gather(
        *(
            router.ask(EnvRequest("ask", i, SEND_TEMPLATE, template_mode=True, variables={"to": 0, "content": f"m{i}"}))
            for i in range(50)
        )
    )

    assert len(llm.requests) == 1
    assert router.get_cache_stats().generations == 1
    assert {reply.status for reply in outcomes} == {"success"}
    assert sorted(p["sender"] for p in space.updates.all()) == list(range(50))


async def test_cached_code_that_fails_is_evicted_and_regenerated() -> None:
    llm = ScriptedModel([code(SEND_CODE), code('send_message(to_agent_id=variables["recipient"], content="hi")')])
    space = MessagingSpace()
    router = CodeGenRouter([space], llm)
    await router.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"to": 2, "content": "hi"}))

    # The same template now arrives with other variable names: the cached code raises KeyError.
    reply = await router.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"recipient": 3}))

    assert reply.status == "success"
    assert len(llm.requests) == 2
    stats = router.get_cache_stats()
    assert (stats.hits_exact, stats.errors, stats.generations) == (1, 1, 2)
    assert [p["recipient"] for p in space.updates.all()] == [2, 3]


async def test_failed_generation_is_not_cached() -> None:
    llm = ScriptedModel([code("undefined_name")] * 3 + [code(SEND_CODE)])
    router = CodeGenRouter([MessagingSpace()], llm)
    first = await router.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"to": 2, "content": "hi"}))
    second = await router.ask(EnvRequest("ask", 1, SEND_TEMPLATE, template_mode=True, variables={"to": 2, "content": "hi"}))
    assert (first.status, second.status) == ("error", "success")
    assert router.get_cache_stats().errors == 1
    assert len(llm.requests) == 4


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("send_message(to_agent_id=2, content='hi')\nreturn results", "line 2: syntax error: 'return' outside function"),
        ("send_message(2, 'hi')\nbreak", "line 2: syntax error: 'break' outside loop"),
        ("def f(a, a):\n    return a", "duplicate argument 'a'"),
        ("x = [y for y in (z := [1, 2])]", "comprehension iterable"),
        ("import math as results", "'results' is provided by the sandbox"),
        ("from json import loads as send_message", "'send_message' is provided by the sandbox"),
    ],
)
async def test_code_the_compiler_or_the_guard_refuses_is_fed_back_never_raised(bad: str, reason: str) -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code(bad), code("send_message(to_agent_id=2, content='hi')")])
    reply = await CodeGenRouter([space], llm).ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply.status == "success"
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your code was refused by the sandbox:") and reason in feedback
    assert len(space.updates) == 1  # the refused code sent nothing


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("x = (1).to_bytes(900000000, 'big')", "memory limit of 512 MB exceeded (the code used more than 512 MB)"),
        ("x = round(1, -10**7)", "the code ran past 2.0 s and its sandbox process was killed"),
        ("results['p'] = print", "results could not be stored: a function is not plain data"),
    ],
)
async def test_code_the_sandbox_stops_is_fed_back_and_retried(bad: str, reason: str) -> None:
    llm = ScriptedModel([code(bad), code("results['answer'] = 'ok'")])
    # The default 2 s (not a shorter limit): the retried code runs under it too, and must not meet it on a busy machine.
    router = CodeGenRouter([MessagingSpace()], llm, limits=SandboxLimits(timeout_s=2.0))
    try:
        reply = await router.ask(EnvRequest("ask", 1, "do it", readonly=True))
    finally:
        await router.close()
    assert reply.answer == "ok"
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your code failed:") and reason in feedback


async def test_the_router_starts_its_sandbox_at_init_and_ends_it_at_close() -> None:
    router = CodeGenRouter([MessagingSpace()], ScriptedModel([code("results['answer'] = 'ok'")]))
    await router.init(T1, [1, 2])
    deadline = time.monotonic() + 120  # only bounds a hang
    while len(pids := router.sandbox.pids()) < 2 and time.monotonic() < deadline:  # type: ignore[attr-defined]
        await asyncio.sleep(0.01)  # started at init, before any ask
    assert len(pids) == 2
    reply = await router.ask(EnvRequest("ask", 1, "anything", readonly=True))
    assert reply.answer == "ok"
    await router.close()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


async def test_no_sandbox_to_run_the_code_fails_the_ask_without_more_llm_calls() -> None:
    pool = SandboxPool(1)
    await pool.close()
    llm = ScriptedModel([code("results['answer'] = 'ok'"), code("results['answer'] = 'ok'")])
    reply = await CodeGenRouter([MessagingSpace()], llm, sandbox=pool).ask(EnvRequest("ask", 1, "anything"))
    assert reply.status == "error" and "the sandbox pool is closed" in reply.answer
    assert len(llm.requests) == 1


async def test_every_agent_of_the_run_may_wait_for_the_sandbox() -> None:
    # An agent asks one thing at a time, so a run's agents can all wait: none is refused "busy" for the load alone.
    router = CodeGenRouter([MessagingSpace()], ScriptedModel([]))
    assert router._pool is not None
    default = router._pool.max_waiting
    try:
        await router.init(datetime(2026, 1, 1), list(range(default + 5000)))
        assert router._pool.max_waiting == default + 5001
    finally:
        await router.close()
