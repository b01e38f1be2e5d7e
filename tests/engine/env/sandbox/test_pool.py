"""SandboxPool: normal code works as in a thread, tool calls run in the actor under the broker's rules,
concurrency is bounded, and no process outlives its pool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from typing import Any

import pytest

from engine.env.sandbox import (
    SandboxLimits,
    SandboxPool,
    SandboxTool,
    SandboxUnavailableError,
    ThreadExecutor,
    ToolBroker,
    execute,
)
from engine.errors import ToolCallError

NORMAL = """
import json
from datetime import timedelta
r = send_message(2, content='hi')
print('sent', r, sep=': ')
inbox = read_inbox()
values = [3, 1, 4, 1, 5, 9, 2, 6]
results['inbox'] = inbox
results['stats'] = {'mean': statistics.mean(values), 'median': statistics.median(values),
                    'stdev': round(statistics.stdev(values), 6), 'q': statistics.quantiles(values, n=4)}
results['math'] = [math.sqrt(16), math.floor(2.5), math.gcd(12, 18), round(math.pi, 4)]
results['json'] = json.loads(json.dumps({'a': [1, 2.5, None, True]}, sort_keys=True))
results['when'] = datetime.datetime(2024, 1, 1, 8) + timedelta(hours=2)
results['set'] = sorted({3, 1, 2})
results['f'] = f"{math.e:.3f} {'x':>5}|{7:05d}"
results['ctx'] = [ctx['agent_id'], variables['to']]
try:
    send_message(99, 'x')
except ToolError as e:
    results['refused'] = str(e)
"""


class Mailbox:
    """Tools over a list in this process; each call records the process and thread it ran on."""

    def __init__(self, overlap: int = 0) -> None:
        self.sent: list[dict[str, Any]] = []
        self.where: list[tuple[int, int]] = []
        self.in_flight = self.most_in_flight = 0
        #: ``slow`` calls hold until this many are in flight at once (once; 30 s at most, so a pool that runs fewer
        #: at a time shows it in ``most_in_flight`` instead of hanging): concurrency that does not depend on two
        #: processes happening to call within the same 20 ms.
        self.overlap, self.overlapped = overlap, asyncio.Event()

    async def send(self, arguments: dict[str, Any]) -> str:
        self.where.append((os.getpid(), threading.get_ident()))
        if arguments["to_agent_id"] == 99:
            raise ToolCallError("there is no agent 99")
        self.sent.append(arguments)
        return f"queued for {arguments['to_agent_id']}"

    async def inbox(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.where.append((os.getpid(), threading.get_ident()))
        return {"agent": arguments["agent_id"], "messages": [m["content"] for m in self.sent]}

    async def slow(self, arguments: dict[str, Any]) -> str:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight >= self.overlap:
            self.overlapped.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.overlapped.wait(), 30)
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        return "done"

    def tools(self) -> list[SandboxTool]:
        return [
            SandboxTool("send_message", ("to_agent_id", "content"), False, self.send, {"agent_id": 1}),
            SandboxTool("read_inbox", (), True, self.inbox, {"agent_id": 1}),
            SandboxTool("slow", (), True, self.slow),
        ]


async def _replaced(pool: SandboxPool, *gone: int) -> bool:
    """True once the processes ``gone`` ended and the pool is back to full size (replacements start in a thread)."""
    deadline = time.monotonic() + 120  # only bounds a hang: a process starts slowly on a busy machine
    while time.monotonic() < deadline:
        pids = pool.pids()
        if len(pids) == pool.size and not set(gone) & set(pids):
            return True
        await asyncio.sleep(0.01)
    return False


def _dead(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.fixture
async def pool():
    pool = SandboxPool(2)
    await pool.start()
    try:
        yield pool
    finally:
        await pool.close()


async def test_normal_code_gives_the_same_outcome_in_a_process_as_in_a_thread(pool: SandboxPool) -> None:
    outcomes = []
    for executor in (ThreadExecutor(), pool):
        box = Mailbox()
        result = await execute(NORMAL, box.tools(), ctx={"agent_id": 1}, variables={"to": 2}, executor=executor)
        assert result.ok, result.error
        outcomes.append((result.results, result.calls, result.output, result.mutations, box.sent))
    assert outcomes[0] == outcomes[1]
    results = outcomes[1][0]
    assert results["stats"] == {"mean": 3.875, "median": 3.5, "stdev": 2.748376, "q": [1.25, 3.5, 5.75]}
    assert results["when"] == "2024-01-01 10:00:00" and results["refused"] == "there is no agent 99"
    assert outcomes[1][2] == "sent: queued for 2\n"


async def test_tool_calls_from_the_process_run_in_the_actor_on_its_loop(pool: SandboxPool) -> None:
    box = Mailbox()
    result = await execute("send_message(2, 'hi')\nresults['n'] = read_inbox()", box.tools(), executor=pool)
    assert result.ok and result.sandbox_pid in pool.pids() and result.sandbox_pid != os.getpid()
    assert box.where == [(os.getpid(), threading.get_ident())] * 2  # this process, this loop's thread
    assert result.calls[0]["arguments"] == {"to_agent_id": 2, "content": "hi", "agent_id": 1}


async def test_a_readonly_execution_is_offered_and_allowed_only_readonly_tools(pool: SandboxPool) -> None:
    box = Mailbox()
    result = await execute("send_message(2, 'hi')", box.tools(), readonly=True, executor=pool)
    assert result.error == "line 1: NameError: name 'send_message' is not defined"
    assert box.sent == [] and result.calls == []
    allowed = await execute("results['inbox'] = read_inbox()", box.tools(), readonly=True, executor=pool)
    assert allowed.ok and allowed.results == {"inbox": {"agent": 1, "messages": []}}


async def test_the_broker_refuses_forged_calls_whatever_the_process_sends() -> None:
    box = Mailbox()
    broker = ToolBroker(box.tools(), SandboxLimits(max_tool_calls=1), readonly=True)
    assert (await broker.call("send_message", {"to_agent_id": 2, "content": "x"}))["kind"] == "stop"  # not offered
    assert (await broker.call("delete_world", {}))["kind"] == "stop"
    assert (await broker.call("read_inbox", {"agent_id": 7}))["error"].endswith("filled in by the environment; do not pass it")
    assert (await broker.call("read_inbox", ["not", "named"]))["kind"] == "type"
    assert (await broker.call("read_inbox", {}))["kind"] == "ok"
    assert (await broker.call("read_inbox", {}))["error"] == "limit of 1 tool calls per run exceeded"
    assert box.sent == [] and [c["tool"] for c in broker.calls] == ["read_inbox"]


async def test_the_broker_stops_a_readonly_execution_from_reaching_a_write_tool_even_if_offered() -> None:
    box = Mailbox()
    broker = ToolBroker(box.tools(), SandboxLimits(), readonly=False)
    broker.readonly = True  # as if the offer and the rule disagreed: the rule wins
    reply = await broker.call("send_message", {"to_agent_id": 2, "content": "x"})
    assert reply == {"kind": "stop", "error": "send_message changes the environment and this request is read-only"}
    assert box.sent == []


async def test_concurrent_executions_are_bounded_by_the_pool_size(pool: SandboxPool) -> None:
    box = Mailbox(overlap=pool.size)
    unhurried = SandboxLimits(timeout_s=60)  # the first call waits for the second process: a busy machine's start-up
    results = await asyncio.gather(*(execute("results['r'] = slow()", box.tools(), limits=unhurried, executor=pool)
                                     for _ in range(20)))
    assert all(r.ok and r.results == {"r": "done"} for r in results)
    assert box.most_in_flight == pool.size
    assert {r.sandbox_pid for r in results} <= set(pool.pids())


async def test_executions_past_the_waiting_bound_are_refused() -> None:
    pool = SandboxPool(1, max_waiting=2)
    try:
        box = Mailbox()
        outcomes = await asyncio.gather(
            *(execute("results['r'] = slow()", box.tools(), executor=pool) for _ in range(5)), return_exceptions=True
        )
        refused = [o for o in outcomes if isinstance(o, SandboxUnavailableError)]
        assert len(refused) == 2 and "2 executions are waiting" in str(refused[0])
        assert sum(1 for o in outcomes if not isinstance(o, Exception) and o.ok) == 3
    finally:
        await pool.close()


async def test_a_cancelled_execution_kills_its_process_and_the_pool_recovers(pool: SandboxPool) -> None:
    task = asyncio.ensure_future(execute("while True:\n    pass", [], limits=SandboxLimits(max_steps=10**12), executor=pool))
    async with asyncio.timeout(120):  # until a process has taken the code (only bounds a hang)
        while pool.stats.executions == 0:
            await asyncio.sleep(0.01)
    busy = set(pool.pids())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.stats.replaced == 1
    assert await _replaced(pool)
    assert len(busy - set(pool.pids())) == 1  # the cancelled execution's process, and only it, was replaced
    after = await execute("results['x'] = 1", [], executor=pool)
    assert after.ok


async def test_a_closed_pool_ends_its_processes_and_refuses_code() -> None:
    pool = SandboxPool(2)
    await pool.start()
    pids = pool.pids()
    await pool.close()
    assert pool.pids() == []
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}")
    with pytest.raises(SandboxUnavailableError, match="closed"):
        await execute("x = 1", [], executor=pool)


async def test_a_close_cancelled_while_it_reaps_leaves_the_processes_to_terminate() -> None:
    # A run cancelled, or a loop stopped, in the middle of closing its router: the processes it killed
    # stay the pool's until reaped, so terminate() (and the pool's finalizer) still reaps them.
    pool = SandboxPool(2)
    await pool.start()
    pids = pool.pids()
    closing = asyncio.ensure_future(pool.close())
    await asyncio.sleep(0)  # it killed them all and waits on the first reap
    closing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await closing
    pool.terminate()
    assert pool.pids() == []
    for pid in pids:
        with pytest.raises(ChildProcessError):  # reaped by the pool, not left a zombie for anyone else
            os.waitpid(pid, os.WNOHANG)


async def test_a_dropped_pool_kills_its_processes() -> None:
    pool = SandboxPool(2)
    await pool.start()
    pids = pool.pids()
    assert len(pids) == 2
    del pool
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}")


async def test_the_process_limits_itself(pool: SandboxPool) -> None:
    result = await execute("x = 1", [], executor=pool)
    with open(f"/proc/{result.sandbox_pid}/limits") as file:
        limits = file.read()
    rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
    assert rows["Max core file size"][:2] == ["0", "0"]
    assert rows["Max file size"][:2] == ["0", "0"]
    assert rows["Max processes"][:2] == ["0", "0"]
    assert int(rows["Max address space"][1]) < (512 + 64) * 2**20  # hard cap: start-up size + 512 MB
    assert rows["Max cpu time"][0] != "unlimited"
    assert os.getpriority(os.PRIO_PROCESS, result.sandbox_pid) > os.getpriority(os.PRIO_PROCESS, 0)


#: A stand-in for child.py that the test controls: it speaks the protocol, then misbehaves.
FAKE_CHILD = """
import json, marshal, os, struct

def send(body):
    os.write(1, struct.pack(">I", len(body)) + body)

def receive():
    data = b""
    while len(data) < 4:
        data += os.read(0, 4 - len(data))
    (size,) = struct.unpack(">I", data)
    body = b""
    while len(body) < size:
        body += os.read(0, size - len(body))
    return marshal.loads(body)

send(json.dumps({"op": "ready", "pid": os.getpid()}).encode())
receive()
"""

MISBEHAVIOURS = {
    "garbage": 'send(b"this is not json")\nreceive()',
    "huge-frame": 'os.write(1, struct.pack(">I", 2**31))\nreceive()',
    "unknown-op": 'send(json.dumps({"op": "exec", "code": "os.system()"}).encode())\nreceive()',
    "bad-done": 'send(json.dumps({"op": "done", "error": None, "results": "<object at 0x1>", "output": "", "steps": 0}).encode())\nreceive()',
    "exits": "raise SystemExit(3)",
}


@pytest.mark.parametrize("how", sorted(MISBEHAVIOURS))
async def test_a_process_that_breaks_the_protocol_is_killed_and_replaced(how: str, tmp_path, monkeypatch) -> None:
    from engine.env.sandbox import process as process_module

    script = tmp_path / "child.py"
    script.write_text(FAKE_CHILD + MISBEHAVIOURS[how] + "\n")
    monkeypatch.setattr(process_module, "CHILD", script)
    pool = SandboxPool(1)
    try:
        result = await execute("results['x'] = 1", [], executor=pool)
        assert not result.ok and result.results == {}
        if how == "exits":
            assert result.error == "stopped: the sandbox process ended unexpectedly (exit status 3)"
        else:
            assert result.error == "stopped: the sandbox process broke the protocol and was killed"
        assert await _replaced(pool, result.sandbox_pid)  # type: ignore[arg-type]
    finally:
        await pool.close()


async def test_forged_tool_calls_from_a_subverted_process_are_refused_by_the_broker(tmp_path, monkeypatch) -> None:
    from engine.env.sandbox import process as process_module

    forge = """
replies = []
for tool, arguments in [("delete_world", {}), ("send_message", {"to_agent_id": 2, "content": "x"}),
                        ("read_inbox", {"agent_id": 9})]:
    send(json.dumps({"op": "call", "tool": tool, "arguments": arguments}).encode())
    replies.append(receive())
send(json.dumps({"op": "done", "error": None, "results": {"replies": replies}, "output": "", "steps": 0}).encode())
receive()
"""
    script = tmp_path / "child.py"
    script.write_text(FAKE_CHILD + forge)
    monkeypatch.setattr(process_module, "CHILD", script)
    pool = SandboxPool(1)
    box = Mailbox()
    try:
        result = await execute("x = 1", box.tools(), readonly=True, executor=pool)
    finally:
        await pool.close()
    assert result.results["replies"] == [
        {"kind": "stop", "error": "tool 'delete_world' is not available to this request"},
        {"kind": "stop", "error": "tool 'send_message' is not available to this request"},
        {"kind": "type", "error": "read_inbox(): agent_id is filled in by the environment; do not pass it"},
    ]
    assert box.sent == [] and box.where == [] and result.calls == []


async def test_a_process_that_does_not_start_makes_the_pool_unavailable(tmp_path, monkeypatch) -> None:
    from engine.env.sandbox import process as process_module

    script = tmp_path / "child.py"
    script.write_text('import json, os\nbody = json.dumps({"op": "fatal", "error": "ImportError: no"}).encode()\n'
                      'os.write(1, len(body).to_bytes(4, "big") + body)\n')  # fmt: skip
    monkeypatch.setattr(process_module, "CHILD", script)
    pool = SandboxPool(1)
    try:
        with pytest.raises(SandboxUnavailableError, match="a sandbox process did not start: ImportError: no"):
            await execute("x = 1", [], executor=pool)
    finally:
        await pool.close()


async def test_a_process_that_died_while_idle_is_replaced_before_code_reaches_it(pool: SandboxPool) -> None:
    killed = pool.pids()
    for pid in killed:
        os.kill(pid, 9)  # e.g. the kernel's OOM killer
    async with asyncio.timeout(120):  # until they are dead (zombies until the pool reaps them; only bounds a hang)
        while not all(_dead(pid) for pid in killed):
            await asyncio.sleep(0.01)
    result = await execute("results['x'] = 1", [], executor=pool)
    assert result.ok and result.results == {"x": 1}
