"""SearchToolRouter: ranks tools against the instruction and offers only the top k to a ReAct loop."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.router_base import RouterBase
from engine.env.routers.search_tool import Embedder, SearchToolRouter, search_terms
from engine.env.tool import tool
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.backends.sim_backend import SimChatModel
from engine.llm.sim.model import SimLLM


class Bank(EnvBase):
    """A bank: agents deposit money and check their account balance."""

    def __init__(self) -> None:
        super().__init__()
        self.balances: dict[int, int] = {}

    @tool()
    def deposit(self, agent_id: int, amount: int) -> str:
        """Deposit an amount of money into agent_id's bank account."""
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.balances[agent_id] = self.balances.get(agent_id, 0) + amount
        return f"balance {self.balances[agent_id]}"

    @tool(readonly=True)
    def balance(self, agent_id: int) -> str:
        """Show agent_id's bank account balance."""
        return f"balance {self.balances.get(agent_id, 0)}"


class CashEmbedder:
    """Two-dimensional embeddings: how much a text is about money (axis 0) or talk (axis 1)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        money = ("cash", "money", "bank", "deposit", "balance", "rich")
        return [[float(sum(w in t.lower() for w in money)), 0.5] for t in texts]


def decision(tool_name: str, arguments: dict[str, Any], *, done: bool = True) -> dict[str, Any]:
    return {"thought": "ok", "action": {"tool": tool_name, "arguments": arguments}, "done": done}


def offered_tools(request: dict[str, Any]) -> set[str]:
    schema = request["response_format"]["json_schema"]["schema"]
    return set(schema["properties"]["action"]["discriminator"]["mapping"])


def assert_valid_calls(router: RouterBase, reply: EnvReply, *, readonly: bool) -> None:
    """Every call names an offered tool with schema-valid arguments, and the modules saw exactly those calls."""
    offered = router.tools(readonly=readonly)
    for row in reply.calls:
        assert row.tool in offered
        offered[row.tool].args_model.model_validate(row.arguments)
        assert row.arguments.get("agent_id", 1) == 1
        assert "bad arguments" not in row.result and "unknown tool" not in row.result
    assert len(router.get_tool_call_history()) == len(reply.calls)


def test_search_terms_split_names_fold_plurals_and_drop_stopwords() -> None:
    assert search_terms("Send_message to the Groups, please") == {"send", "message", "group"}
    assert search_terms("the of to") == set()


def test_lexical_ranking_puts_the_named_tools_first() -> None:
    router = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=3)

    assert list(router.search("deposit money in my bank account")) == ["deposit", "balance", "send_message"]
    assert list(router.search("send a message to agent 2"))[0] == "send_message"
    assert list(router.search("post in the group"))[:2] == ["post_to_group", "join_group"]


def test_ranking_without_any_overlap_keeps_tool_order() -> None:
    router = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=2)

    assert list(router.search("zzz qqq")) == ["send_message", "post_to_group"]
    assert router.search("zzz qqq") == router.search("zzz qqq")


def test_readonly_search_ranks_only_readonly_tools() -> None:
    router = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=10)

    assert set(router.search("deposit money", readonly=True)) == {"read_inbox", "list_groups", "message_statistics", "balance"}


def test_an_embedder_ranks_by_meaning_where_words_do_not_overlap() -> None:
    embedder = CashEmbedder()
    assert isinstance(embedder, Embedder)
    lexical = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=2)
    semantic = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=2, embedder=embedder)

    assert set(lexical.search("am I rich?")) == {"send_message", "post_to_group"}
    assert set(semantic.search("am I rich?")) == {"deposit", "balance"}
    semantic.search("how much cash?")
    assert [len(call) for call in embedder.calls] == [8, 1, 1]  # tool vectors computed once


def test_sim_embeddings_give_a_deterministic_ranking() -> None:
    first = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=4, embedder=SimLLM(seed=3))
    second = SearchToolRouter([MessagingSpace(), Bank()], ScriptedModel([]), top_k=4, embedder=SimLLM(seed=3))

    assert list(first.search("check my bank balance")) == list(second.search("check my bank balance"))
    assert "balance" in first.search("check my bank balance")


async def test_decision_schema_offers_only_the_top_k_and_the_call_succeeds() -> None:
    bank = Bank()
    llm = ScriptedModel([decision("deposit", {"amount": 5})])
    router = SearchToolRouter([MessagingSpace(), bank], llm, top_k=2)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5 in my bank account"))

    assert offered_tools(llm.requests[0]) == {"deposit", "balance", "final_answer"}
    assert "send_message" not in llm.requests[0]["messages"][0]["content"]
    assert (reply.status, reply.answer) == ("success", "deposit: balance 5")
    assert reply.calls == (ToolCall("deposit", {"amount": 5, "agent_id": 1}, "balance 5", True),)


async def test_a_tool_outside_the_top_k_is_retried_with_feedback() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([decision("send_message", {"to_agent_id": 2, "content": "hi"}), decision("balance", {})])
    router = SearchToolRouter([space, Bank()], llm, top_k=2)

    reply = await router.ask(EnvRequest("ask", 1, "what is my bank balance?"))

    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your previous answer was not valid.")
    assert "Valid tools: balance, deposit, final_answer" in feedback
    assert reply.status == "success" and [r.tool for r in reply.calls] == ["balance"]
    assert space.updates.all() == []


async def test_invalid_decisions_end_with_status_error_and_no_results() -> None:
    bank = Bank()
    llm = ScriptedModel(["not json", {"thought": "x"}, decision("withdraw", {"amount": 1})])
    router = SearchToolRouter([MessagingSpace(), bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "withdraw 1 from the bank"))

    assert len(llm.requests) == 3
    assert (reply.status, reply.calls) == ("error", ())
    assert reply.answer.startswith("the environment could not interpret the request")
    assert bank.balances == {} and router.get_tool_call_history() == []


async def test_readonly_ask_offers_no_mutating_tool_and_cannot_mutate() -> None:
    bank = Bank()
    llm = ScriptedModel([decision("deposit", {"amount": 5})] * 3)
    router = SearchToolRouter([MessagingSpace(), bank], llm, top_k=3)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5 in my bank account", readonly=True))

    assert "deposit" not in offered_tools(llm.requests[0]) and "balance" in offered_tools(llm.requests[0])
    assert "READ-ONLY" in llm.requests[0]["messages"][0]["content"]
    assert reply.status == "error" and bank.balances == {}


async def test_the_loop_feeds_results_back_until_final_answer() -> None:
    llm = ScriptedModel([decision("balance", {}, done=False), decision("final_answer", {"answer": "you have 0", "status": "success"})])
    router = SearchToolRouter([MessagingSpace(), Bank()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "how much money is in my bank account?"))

    assert (reply.status, reply.answer) == ("success", "you have 0")
    assert "Result of balance: balance 0" in llm.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("readonly", [False, True])
async def test_simulated_llm_makes_only_valid_calls_and_reaches_deposit(readonly: bool) -> None:
    reached: set[str] = set()
    for seed in range(12):
        space, bank = MessagingSpace(), Bank()
        before = (copy.deepcopy(space.dump_state()), dict(bank.balances))
        router = SearchToolRouter([space, bank], SimChatModel("default", seed=seed), top_k=3)

        reply = await router.ask(EnvRequest("ask", 1, "deposit 5 coins in my bank account", readonly=readonly))

        assert reply.status in {"success", "in_progress", "fail", "error", "unknown"} and isinstance(reply.answer, str)
        assert_valid_calls(router, reply, readonly=readonly)
        assert {r.tool for r in reply.calls} <= set(router.search("deposit 5 coins in my bank account", readonly=readonly))
        reached |= {r.tool for r in reply.calls if r.ok}
        if readonly:
            assert (space.dump_state(), bank.balances) == before
    if readonly:
        assert reached and reached <= {"read_inbox", "list_groups", "message_statistics", "balance"}
    else:
        assert "deposit" in reached
