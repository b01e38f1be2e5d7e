"""CodeGen template mode: only code that takes every value from ``variables`` is replayed for others."""

from __future__ import annotations

import asyncio

import pytest

from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest
from engine.env.routers.codegen import CodeGenRouter
from engine.env.routers.codegen_examples import template_examples
from engine.env.routers.template_reuse import judge_reuse
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.backends.sim_backend import SimChatModel

SEND = "send a message to agent {agent} saying '{text}'"
GENERIC = 'send_message(to_agent_id=variables["agent"], content=variables["text"])'


def code(text: str) -> dict[str, str]:
    return {"thought": "ok", "code": text}


def pending(space: MessagingSpace) -> list[tuple[int, int, str]]:
    return [(p["sender"], p["recipient"], p["content"]) for p in space.updates.all()]


@pytest.mark.parametrize(("source", "variables", "reusable", "exact_only"), [
    (GENERIC, {"agent": 3, "text": "hi there"}, True, False),
    ('send_message(to_agent_id=3, content=variables["text"])', {"agent": 3, "text": "hi there"}, False, False),
    ('send_message(to_agent_id=variables["agent"], content="hi there")', {"agent": 3, "text": "hi there"}, False, False),
    ('x = variables["agent"]\nresults["answer"] = f"told agent 3"', {"agent": 3}, False, False),
    ('inbox = read_inbox()\nresults["answer"] = inbox[-2:]', {"number": 2}, False, False),
    ('results["answer"] = variables.get("agent")', {"agent": 3}, True, False),
    ('send_message(to_agent_id=variables["agent"], content="good morning")', {"agent": 3}, True, True),
    ("undefined(", {}, False, False),
])
def test_judge_reuse(source: str, variables: dict, reusable: bool, exact_only: bool) -> None:
    template = "say good morning to agent {agent}" if "good morning" in source else SEND
    verdict = judge_reuse(source, template, variables)
    assert (verdict.reusable, verdict.exact_only) == (reusable, exact_only), verdict.reason


async def test_code_that_hard_codes_its_callers_values_runs_once_and_is_not_cached() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(to_agent_id=2, content='hi')"), code(GENERIC)])
    router = CodeGenRouter([space], llm)

    first = await router.ask(EnvRequest("ask", 1, SEND, template_mode=True, variables={"agent": 2, "text": "hi"}))
    second = await router.ask(EnvRequest("ask", 3, SEND, template_mode=True, variables={"agent": 4, "text": "yo"}))

    assert first.status == second.status == "success"
    assert pending(space) == [(1, 2, "hi"), (3, 4, "yo")]  # agent 3's message did not go to agent 2
    stats = router.get_cache_stats()
    assert (stats.misses, stats.generations, stats.uncacheable, stats.hits_exact) == (2, 2, 1, 0)


async def test_followers_of_a_hard_coding_leader_generate_their_own_code() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([code("send_message(to_agent_id=2, content='m0')")] + [code(GENERIC)] * 4)
    router = CodeGenRouter([space], llm)

    await asyncio.gather(*(
        router.ask(EnvRequest("ask", i, SEND, template_mode=True, variables={"agent": i + 10, "text": f"m{i}"}))
        for i in range(4)
    ))

    assert sorted(pending(space)) == [(0, 2, "m0"), (1, 11, "m1"), (2, 12, "m2"), (3, 13, "m3")]
    stats = router.get_cache_stats()
    assert (stats.generations, stats.uncacheable) == (4, 1) and len(llm.requests) == 4  # the leader's, then one each


async def test_exact_only_code_is_not_reused_for_a_similar_template() -> None:
    space = MessagingSpace()
    quoting = 'send_message(to_agent_id=variables["agent"], content="good morning to you")'
    llm = ScriptedModel([code(quoting), code('send_message(to_agent_id=variables["agent"], content="good night to you")')])
    router = CodeGenRouter([space], llm, similarity_threshold=0.5)

    await router.ask(EnvRequest("ask", 1, "say good morning to you to agent {agent}", template_mode=True, variables={"agent": 2}))
    await router.ask(EnvRequest("ask", 1, "say good night to you to agent {agent}", template_mode=True, variables={"agent": 3}))
    await router.ask(EnvRequest("ask", 1, "say good morning to you to agent {agent}", template_mode=True, variables={"agent": 4}))

    assert [c for _, _, c in pending(space)] == ["good morning to you", "good night to you", "good morning to you"]
    stats = router.get_cache_stats()
    assert (stats.generations, stats.hits_similar, stats.hits_exact) == (2, 0, 1)


def test_template_examples_bind_values_to_the_arguments_they_fit() -> None:
    tools = CodeGenRouter([MessagingSpace()]).tools()
    assert template_examples(tools, SEND, {"agent": 2, "text": "hi"}) == [GENERIC]
    assert template_examples(tools, "post '{text}' to group '{text_2}'", {"text": "hi", "text_2": "town"}) == [
        'post_to_group(group=variables["text_2"], content=variables["text"])'
    ]
    assert template_examples(tools, "join group '{text}'", {"text": "club"}) == ['join_group(group=variables["text"])']
    assert template_examples(tools, "read my inbox", {}) == ['results["answer"] = read_inbox()']  # the tool it names
    assert template_examples(tools, "what is new?", {}) == [
        'results["answer"] = read_inbox()', 'results["answer"] = list_groups()', 'results["answer"] = message_statistics()',
    ]
    assert template_examples(tools, "fly to {number}", {"number": 2.5}) == []


@pytest.mark.parametrize("seed", range(4))
async def test_the_simulated_coder_writes_code_that_reads_the_variables(seed: int) -> None:
    space = MessagingSpace()
    router = CodeGenRouter([space], SimChatModel("router", seed))
    for sender, (to, text) in enumerate([(2, "hi"), (5, "yo"), (7, "hey")]):
        reply = await router.ask(EnvRequest("ask", sender, SEND, template_mode=True, variables={"agent": to, "text": text}))
        assert reply.status == "success"
    assert pending(space) == [(0, 2, "hi"), (1, 5, "yo"), (2, 7, "hey")]
    assert router.get_cache_stats().generations == 1
