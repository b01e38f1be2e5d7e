"""CodeGenRouter seeds the code's ``random`` from the run seed and the request: identical requests draw alike."""

from __future__ import annotations

import json
from datetime import datetime

from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest
from engine.env.routers.codegen import CodeGenRouter, request_seed
from engine.env.sandbox import ThreadExecutor
from engine.llm.backends.scripted import ScriptedModel

T1 = datetime(2024, 1, 1, 8, 15)
DRAW = json.dumps({"thought": "roll", "code": "results['answer'] = str(random.randint(1, 10**9))"})


async def _roll(run_seed: int, agent_id: int, instruction: str = "roll a die") -> str:
    router = CodeGenRouter([MessagingSpace()], ScriptedModel([DRAW]), sandbox=ThreadExecutor(), seed=run_seed)
    router.set_current_time(T1)
    reply = await router.ask(EnvRequest("ask", agent_id, instruction, readonly=True))
    return reply.answer


async def test_identical_requests_draw_the_same_numbers_and_others_do_not() -> None:
    first, again = await _roll(7, 1), await _roll(7, 1)
    assert first == again and first.isdigit()
    assert len({first, await _roll(8, 1), await _roll(7, 2), await _roll(7, 1, "roll two dice")}) == 4


def test_the_request_seed_depends_on_every_part_of_the_request() -> None:
    base = request_seed(0, 1, T1, "x", {"a": 1})
    assert base == request_seed(0, 1, T1, "x", {"a": 1})
    others = [request_seed(1, 1, T1, "x", {"a": 1}), request_seed(0, 2, T1, "x", {"a": 1}),
              request_seed(0, 1, None, "x", {"a": 1}), request_seed(0, 1, T1, "y", {"a": 1}),
              request_seed(0, 1, T1, "x", {"a": 2})]  # fmt: skip
    assert base not in others and len(set(others)) == len(others)
