"""The executor runs guarded code against tools and plain data, and stops what the guard cannot see."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine.env.sandbox import Executor, SandboxLimits, SandboxPool, SandboxTool, ThreadExecutor, execute
from engine.env.sandbox import executor as sandbox_executor
from engine.env.sandbox import pool as sandbox_pool
from engine.errors import ToolCallError


@pytest.fixture(scope="module")
def pool():
    pool = SandboxPool(2)
    try:
        yield pool
    finally:
        pool.terminate()


@pytest.fixture(params=["thread", "process"])
def executor(request) -> Executor:
    """Every behaviour holds in a thread of the actor and in a sandbox process alike."""
    return ThreadExecutor() if request.param == "thread" else request.getfixturevalue("pool")


@pytest.fixture
def patient_backstops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstops past a time limit (the pool kills the process 0.25 s on, the thread executor gives up 1 s on)
    wait a minute instead: so what stops the code is the sandbox's own stop at the limit, however long a busy
    machine takes to report it. (The backstops themselves: test_pool.py, test_hostile.py.)"""
    monkeypatch.setattr(sandbox_pool, "_KILL_GRACE_S", 60.0)
    monkeypatch.setattr(sandbox_executor, "_GRACE_S", 60.0)


class Mailbox:
    """Tools over a list, recording what they were given."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, arguments: dict[str, Any]) -> str:
        if arguments["to_agent_id"] == 99:
            raise ToolCallError("there is no agent 99")
        self.sent.append(arguments)
        return f"queued for {arguments['to_agent_id']}"

    async def inbox(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"agent": arguments["agent_id"], "messages": [m["content"] for m in self.sent]}

    def tools(self) -> list[SandboxTool]:
        return [
            SandboxTool("send_message", ("to_agent_id", "content"), False, self.send, {"agent_id": 1}),
            SandboxTool("read_inbox", (), True, self.inbox, {"agent_id": 1}),
        ]


async def test_code_calls_tools_with_the_bound_agent_id_and_fills_results(executor: Executor) -> None:
    box = Mailbox()
    code = "r = send_message(2, content='hi')\nprint('sent', r)\nresults['inbox'] = read_inbox()"

    result = await execute(code, box.tools(), executor=executor)

    assert result.ok and result.error is None
    assert box.sent == [{"to_agent_id": 2, "content": "hi", "agent_id": 1}]
    assert result.results == {"inbox": {"agent": 1, "messages": ["hi"]}}
    assert result.output == "sent queued for 2\n"
    assert [c["tool"] for c in result.calls] == ["send_message", "read_inbox"]
    assert result.calls[0] == {
        "tool": "send_message",
        "arguments": {"to_agent_id": 2, "content": "hi", "agent_id": 1},
        "result": "queued for 2",
        "ok": True,
    }
    assert result.mutations == 1


async def test_code_cannot_pass_the_bound_agent_id(executor: Executor) -> None:
    box = Mailbox()
    result = await execute("send_message(agent_id=9, to_agent_id=2, content='spoof')", box.tools(), executor=executor)
    assert not result.ok
    assert "agent_id is filled in by the environment" in result.error
    assert box.sent == []


async def test_a_refused_tool_call_raises_tool_error_the_code_may_catch(executor: Executor) -> None:
    box = Mailbox()
    code = "try:\n    send_message(99, 'x')\nexcept ToolError as e:\n    results['why'] = str(e)"
    result = await execute(code, box.tools(), executor=executor)
    assert result.ok
    assert result.results == {"why": "there is no agent 99"}
    assert result.calls[0]["ok"] is False


async def test_an_uncaught_tool_error_is_reported_with_its_line(executor: Executor) -> None:
    result = await execute("x = 1\nsend_message(99, 'x')", Mailbox().tools(), executor=executor)
    assert result.error == "line 2: ToolError: there is no agent 99"


async def test_ctx_and_variables_are_read_only_copies(executor: Executor) -> None:
    ctx = {"agent_id": 1, "nested": {"a": 1}}
    code = "results['to'] = variables['to']\nresults['a'] = ctx['nested']['a']\nctx['x'] = 1"
    result = await execute(code, [], ctx=ctx, variables={"to": 3}, executor=executor)
    assert "TypeError" in result.error  # mappingproxy refuses item assignment
    assert ctx == {"agent_id": 1, "nested": {"a": 1}}


async def test_allowed_modules_are_usable_through_proxies(executor: Executor) -> None:
    code = (
        "import json\nfrom datetime import timedelta\n"
        "results['r'] = round(math.sqrt(16) + statistics.mean([1, 2, 3]), 1)\n"
        "results['j'] = json.loads(json.dumps({'a': 1}))\nresults['d'] = timedelta(hours=2).seconds"
    )
    result = await execute(code, [], executor=executor)
    assert result.results == {"r": 6.0, "j": {"a": 1}, "d": 7200}


#: Escape attempts the guard lets through syntactically but the runtime refuses or stops.
RUNTIME_ESCAPES = [
    ("json.decoder.scanstring", "AttributeError"),
    ("datetime.sys", "AttributeError"),
    ("math.factorial(100000)", "AttributeError"),
    ("x = 10\ny = x ** x ** x", "too large"),
    ("n = 10**6\nl = [0] * n * n", "too large"),
    ("s = 'ab'\nwhile True:\n    s = s + s", "too large"),
    ("s = 'ab'\nfor i in range(100):\n    s += s", "too large"),
    ("x = 1 << 10**8", "too large"),
    ("l = list(range(10**12))", "too large"),
    ("for i in range(10**12):\n    pass", "too large"),
    ("x = f'{1:>{10**9}}'", "too large"),
    ("x = '%*d' % (10**9, 1)", "'*' widths"),
    ("x = '%1000000000d' % 1", "too large"),
    ("x = json.dumps([], indent=10**9)", "indent"),
    ("x = sum([[1]] * 10, [])", "adds numbers only"),
    ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
    ("s = 'x' * 10000\nt = ''.join([s] * 1000000)", "too large"),
    ("s = 'x' * 10000\nt = str.join('', [s for i in range(1000)] * 1000)", "too large"),
    ("s = 'a' * 1000000\nt = s.replace('a', 'a' * 1000)", "too large"),
    ("t = 'ab'.translate({97: 'x' * 1000000})", "too large"),
    ("l = [0] * 1000000\nl.extend(l)", "too large"),
    ("d = datetime.datetime(2024, 1, 1).strftime('%1000000000Y')", "too large"),
]


@pytest.mark.parametrize(("code", "reason"), RUNTIME_ESCAPES, ids=[c for c, _ in RUNTIME_ESCAPES])
async def test_runtime_refuses_escape_attempt(code: str, reason: str, executor: Executor) -> None:
    result = await execute(code, [], executor=executor)
    assert not result.ok
    assert reason in result.error


async def test_sized_methods_work_within_the_limits(executor: Executor) -> None:
    code = (
        "results['j'] = ', '.join(str(i) for i in range(3))\nresults['u'] = str.join('-', ['a', 'b'])\n"
        "results['r'] = 'a-b'.replace('-', '+')\nl = [1]\nl.extend([2, 3])\nresults['l'] = l\n"
        "results['d'] = datetime.date(2024, 1, 2).strftime('%Y/%m/%d')"
    )
    result = await execute(code, [], executor=executor)
    assert result.results == {"j": "0, 1, 2", "u": "a-b", "r": "a+b", "l": [1, 2, 3], "d": "2024/01/02"}


async def test_infinite_loop_is_stopped_by_the_step_limit(executor: Executor) -> None:
    # A time limit that only bounds a hang: the step limit, not the clock, must stop it, on any machine.
    result = await execute("while True: pass", [], limits=SandboxLimits(max_steps=50_000, timeout_s=60), executor=executor)
    assert result.error == "stopped: step limit of 50000 loop iterations and calls exceeded"
    assert result.steps == 50_001


async def test_infinite_loop_is_stopped_by_the_time_limit_within_it(executor: Executor, patient_backstops: None) -> None:
    started = time.monotonic()
    result = await execute(
        "x = 0\nwhile True:\n    x += 1", [], limits=SandboxLimits(timeout_s=0.3, max_steps=10**12), executor=executor
    )
    elapsed = time.monotonic() - started
    # Its own stop (a backstop's message says "killed" or "stuck"), and not before the limit. How soon after it
    # (within half a second on an idle machine) is a speed goal, not behaviour: speed goals live in benchmarks/.
    assert result.error == "stopped: time limit of 0.3 s exceeded"
    assert elapsed >= 0.3


@pytest.mark.parametrize(
    "code",
    [
        "try:\n    while True: pass\nexcept Exception:\n    results['caught'] = True",
        "def f():\n    try:\n        while True: pass\n    finally:\n        return 1\nf()\nresults['after'] = True",
        "while True:\n    try:\n        while True: pass\n    finally:\n        continue",
        "l = [1]\n[l.append(x) for x in l]",
        "f = lambda g: g(g)\nf(f)",
        "def f():\n    f()\n    f()\nf()",
    ],
)
async def test_a_stopped_run_stays_stopped_whatever_the_code_catches(code: str, executor: Executor) -> None:
    result = await execute(code, [], limits=SandboxLimits(max_steps=20_000), executor=executor)
    assert not result.ok
    assert result.results == {}
    assert result.error.startswith("stopped:") or "RecursionError" in result.error


async def test_memory_growth_past_the_limit_stops_the_run(executor: Executor) -> None:
    code = "l = []\nwhile True:\n    l.append('x' * 1000000)"
    result = await execute(code, [], limits=SandboxLimits(max_memory_growth_mb=64), executor=executor)
    assert result.error.startswith("stopped: memory limit of 64 MB exceeded")


async def test_tool_calls_per_run_are_capped(executor: Executor) -> None:
    box = Mailbox()
    result = await execute(
        "while True:\n    send_message(2, 'spam')", box.tools(), limits=SandboxLimits(max_tool_calls=5), executor=executor
    )
    assert result.error == "stopped: limit of 5 tool calls per run exceeded"
    assert len(box.sent) == 5


async def test_a_tool_that_hangs_is_abandoned_at_the_time_limit(executor: Executor, patient_backstops: None) -> None:
    async def hang(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(3600)
        return "never"

    # The tool hangs for an hour: an answer at all means it was abandoned; the outer bound only turns waiting
    # for it into a failure instead of a hang.
    result = await asyncio.wait_for(execute(
        "hang()", [SandboxTool("hang", (), True, hang)], limits=SandboxLimits(timeout_s=0.3), executor=executor
    ), 120)
    assert result.error == "stopped: time limit of 0.3 s exceeded while hang ran"


async def test_tool_arguments_must_be_plain_values(executor: Executor) -> None:
    box = Mailbox()
    result = await execute("send_message(2, lambda: 0)", box.tools(), executor=executor)
    assert "arguments must be plain values" in result.error
    assert box.sent == []


async def test_printed_output_is_capped(executor: Executor) -> None:
    result = await execute(
        "for i in range(1000):\n    print('x' * 100)", [], limits=SandboxLimits(max_output_chars=500), executor=executor
    )
    assert result.ok and len(result.output) == 500


async def test_results_must_be_plain_and_small(executor: Executor) -> None:
    result = await execute("results['x'] = 'y' * 100000", [], limits=SandboxLimits(max_result_chars=1000), executor=executor)
    assert "results are too large" in result.error


async def test_event_loop_stays_responsive_while_code_runs(executor: Executor) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await execute("x = 0\nwhile True:\n    x += 1", [], limits=SandboxLimits(timeout_s=1.0, max_steps=10**12), executor=executor)
    task.cancel()
    # A blocked loop would tick at most once; a free one ticks, though the sandbox thread shares the GIL, and a
    # loaded machine gives it few turns a second rather than a hundred: so two ticks, not a rate, are required.
    assert ticks >= 2
