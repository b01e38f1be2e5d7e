"""Hostile programs through the real sandbox: each is refused or stopped in time and in memory, and the
event loop beside them keeps ticking.

Every reproducer of the red-team pass (issue 10) is here, with programs of our own per category.
Time and memory are measured from outside the sandbox process: the elapsed time around
``execute``, and the process's peak RSS (``VmHWM`` from ``/proc/<pid>/status`` sampled by the
ticker, and the pool's own reading, which is ``ru_maxrss`` from ``wait4`` once a process was killed).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine.env.sandbox import CodeRejectedError, SandboxLimits, SandboxPool, SandboxTool, execute

LIMITS = SandboxLimits()  # 2 s, 512 MB: the defaults a run uses
#: The defaults with a time limit that only bounds a hang: for the programs whose end must not be the clock's (a step
#: or tool-call limit, a size check, an error, capped output), so that on a busy machine it cannot stop them first.
UNHURRIED = SandboxLimits(timeout_s=60)
TICK_S = 0.02
S = 's = "a" * 1000000\n'
#: 2**29 leaf comparisons, 4x the 2**27 that CI finished in 1.96 s, under the 2 s limit
DEEP = "a = []\nb = []\nfor i in range(29):\n    a = [a, a]\n    b = [b, b]\n"

#: How a program must end.
REFUSED = "refused"  #: the guard or the compiler refuses it before anything runs
OS = "os"  #: stopped by the OS wall: over the memory limit (RLIMIT_AS) or killed at the deadline
STOPPED = "stopped"  #: a limit stopped it (steps, time, tool calls, or the OS)
ERROR = "error"  #: it raised; the error names the reason
CAPPED = "capped"  #: it ran, with its output cut at the limit

#: (id, code, how it must end, text the error must contain)
HOSTILE: list[tuple[str, str, str, str]] = [
    # 1. one C call past the memory limit
    ("to_bytes", '(1).to_bytes(900000000, "big")', OS, "memory limit"),
    ("percent-nested-key", 'x = "%(a(b)c)900000000s" % {"a(b)c": "x"}', ERROR, "too large"),
    ("translate-list-table", 'x = ("a" * 5000).translate(["x" * 200000] * 128)', ERROR, "too large"),
    ("print-huge-sep", 'print(*(["a"] * 1000), sep="x" * 1000000)', CAPPED, ""),
    ("str-of-shared-list", S + "x = str([s] * 900)", OS, "memory limit"),
    ("json-of-shared-list", S + "x = json.dumps([s] * 900)", OS, ""),
    ("results-shared-list", S + 'results["x"] = [s] * 900', ERROR, "results are too large"),
    ("raise-huge-message", S + "raise ValueError([s] * 900)", ERROR, "ValueError: ['aaaa"),
    ("zip-transpose", "x = list(zip(*([[0] * 100000] * 1000)))", OS, "memory limit"),
    ("strftime-repeated", 'd = datetime.datetime(2024, 1, 1)\nx = d.strftime("%010000Y" * 125000)', ERROR, "too large"),
    # 2. one C call past the time limit
    ("deep-equality", DEEP + "results['eq'] = a == b", OS, "killed"),
    ("hash-collisions", "x = set(range(0, 40000 * (2**61 - 1), 2**61 - 1))", OS, "killed"),
    ("huge-int-division", 'x = int("f" * 700000, 16) // (int("f" * 350000, 16) + 7)', OS, "killed"),
    ("round-negative-digits", "x = round(1, -10**7)", OS, "killed"),
    ("quantiles-huge-n", "x = statistics.quantiles([1, 2], n=20000000)", OS, ""),
    # 3. compile-time errors are refusals fed back, never a crash
    ("top-level-return", 'send_message(to_agent_id=1, content="hi")\nreturn results', REFUSED, "'return' outside function"),
    ("return-in-if", "if True:\n    return 1", REFUSED, "'return' outside function"),
    ("break-outside-loop", "x = 1\nbreak", REFUSED, "'break' outside loop"),
    ("continue-outside-loop", "continue", REFUSED, "'continue' not properly in loop"),
    ("duplicate-argument", "def f(a, a):\n    return a", REFUSED, "duplicate argument"),
    ("walrus-in-iterable", "x = [y for y in (z := [1, 2])]", REFUSED, "comprehension iterable"),
    # 7. reserved names and internal objects
    ("import-as-results", "import math as results", REFUSED, "'results' is provided by the sandbox"),
    ("from-import-as-ctx", "from json import loads as ctx", REFUSED, "'ctx' is provided by the sandbox"),
    ("import-as-variables", "import json as variables", REFUSED, "'variables' is provided by the sandbox"),
    ("import-as-tool", "from math import sqrt as send_message", REFUSED, "'send_message' is provided by the sandbox"),
    ("results-holds-print", 'results["p"] = print', ERROR, "not plain data"),
    ("results-holds-tool", 'results["f"] = send_message', ERROR, "not plain data"),
    ("results-holds-module", 'results["m"] = math', ERROR, "not plain data"),
    ("results-holds-generator", 'results["g"] = (x for x in [1])', ERROR, "not plain data"),
    # processes and the outside world (os is not reachable)
    ("fork-bomb", "import os\nwhile True:\n    os.fork()", REFUSED, "import of 'os'"),
    ("subprocess", "import subprocess\nsubprocess.run(['sh'])", REFUSED, "import of 'subprocess'"),
    ("socket", "import socket", REFUSED, "import of 'socket'"),
    ("open-file", "x = open('/etc/passwd').read()", REFUSED, "'open'"),
    # deep recursion
    ("recursion", "def f(n):\n    return f(n + 1)\nf(0)", ERROR, "RecursionError"),
    ("deeply-nested-repr", "a = []\nfor i in range(50000):\n    a = [a]\nx = str(a)", ERROR, "RecursionError"),
    (
        "recursion-caught-and-retried",
        "def f():\n    try:\n        f()\n    except Exception:\n        f()\nf()",
        STOPPED,
        "limit",
    ),
    # huge allocations
    ("bytes-builtin", "b = bytes(10**9)", ERROR, "NameError"),
    ("bytearray", "b = bytearray(10**9)", REFUSED, "'bytearray'"),
    ("list-literal-repeat", "x = [0] * (10**9)", REFUSED, "repeating a sequence"),
    ("list-repeat-computed", "n = 10**5\nx = [0] * n * n", ERROR, "too large"),
    ("many-big-lists", "l = [[0] * 1000000 for i in range(1000)]", OS, "memory limit"),
    ("string-growth-loop", 's = "a" * 999000\nl = []\nwhile True:\n    l.append(s + str(len(l)))', OS, "memory limit"),
    ("string-doubling", "s = 'ab'\nwhile True:\n    s = s + s", ERROR, "too large"),
    ("int-squaring", "x = 3\nfor i in range(40):\n    x = x * x", ERROR, "too large"),
    ("int-to-str", "x = str(7 ** 9999 * 7 ** 9999)", ERROR, "ValueError"),
    # regular expressions run on RE2 (the catastrophic patterns finish at once: test_offered_regex.py)
    ("regex-backreference", 'import re\nre.match(r"(a+)\\1", "aa")', ERROR, "backreferences"),
    ("regex-sub-multiplies", S + 'x = re.sub("", s, s)', ERROR, "too large"),
    ("regex-expand-multiplies", S + 'x = re.sub("a+", "\\g<0>" * 1000, s)', ERROR, "too large"),
    # infinite generators and iterators
    ("yield-generator", "def gen():\n    while True:\n        yield 1", REFUSED, "generators"),
    ("itertools-count", "import itertools\nx = list(itertools.count())", STOPPED, "step limit"),
    ("itertools-product-max", "x = max(itertools.product(range(1000), repeat=9))", STOPPED, "step limit"),
    ("itertools-repeat-join", "x = ''.join(itertools.repeat('a'))", STOPPED, "step limit"),
    ("itertools-huge-repeat", "x = itertools.product([1], repeat=10**9)", ERROR, "too large"),
    ("counter-elements", "x = list(collections.Counter(a=10**10).elements())", OS, "memory limit"),
    ("deque-repeat", "x = collections.deque([0]) * 10**10", ERROR, "too large"),
    ("random-choices-huge", "x = random.choices([1], k=10**9)", ERROR, "too large"),
    ("operator-mul-bomb", "x = operator.mul('a', 10**10)", ERROR, "too large"),
    ("attrgetter-dunder", "x = operator.attrgetter('__class__.__subclasses__')(1)()", ERROR, "'__class__'"),
    ("methodcaller-format", "x = operator.methodcaller('format', 1)('{0.__class__}')", ERROR, "'format'"),
    ("reduce-builtin-bomb", "x = functools.reduce(operator.mul, ['a', 10**5, 10**5])", ERROR, "too large"),
    ("iter-sentinel", "x = list(iter(int, 1))", REFUSED, "'iter'"),
    ("huge-range", "x = list(map(lambda i: i, range(10**12)))", ERROR, "too large"),
    ("sorted-key-storm", "x = sorted(range(10**6), key=lambda i: -i)", STOPPED, "step limit"),
    # exception storms
    (
        "raise-catch-loop",
        "while True:\n    try:\n        raise ValueError('x')\n    except ValueError:\n        pass",
        STOPPED,
        "step limit",
    ),
    (
        "finally-swallows",
        "def f():\n    try:\n        while True: pass\n    finally:\n        return 1\nf()\nresults['x'] = 1",
        STOPPED,
        "step limit",
    ),
    ("catch-base-exception", "try:\n    pass\nexcept BaseException:\n    pass", REFUSED, "'BaseException'"),
    ("tool-call-storm", "while True:\n    send_message(to_agent_id=2, content='spam')", STOPPED, "tool calls per run"),
    # pickle-ish tricks
    ("pickle", "import pickle\npickle.loads(b'cos\\nsystem\\n')", REFUSED, "import of 'pickle'"),
    ("marshal", "import marshal", REFUSED, "import of 'marshal'"),
    ("reduce-ex", "x = (1).__reduce_ex__(2)", REFUSED, "'__reduce_ex__'"),
    ("copyreg", "import copyreg", REFUSED, "import of 'copyreg'"),
    # gc and introspection
    ("gc-objects", "import gc\nx = gc.get_objects()", REFUSED, "import of 'gc'"),
    ("sys-getframe", "import sys\nf = sys._getframe()", REFUSED, "import of 'sys'"),
    ("inspect", "import inspect", REFUSED, "import of 'inspect'"),
    ("ctypes", "import ctypes", REFUSED, "import of 'ctypes'"),
    ("print-self", "x = print.__self__", REFUSED, "'__self__'"),
    ("tool-closure", "x = send_message.__closure__", REFUSED, "'__closure__'"),
    ("subclasses-walk", "x = ().__class__.__base__.__subclasses__()", REFUSED, "'__class__'"),
    ("vars-of-tool", "x = vars(send_message)", REFUSED, "'vars'"),
    ("exception-frame", "try:\n    1 / 0\nexcept Exception as e:\n    x = e.__traceback__.tb_frame", REFUSED, "'__traceback__'"),
    ("generator-frame", "g = (x for x in [1])\nx = g.gi_frame.f_globals", REFUSED, "'gi_frame'"),
    ("format-attribute-walk", "x = '{0.__class__}'.format(1)", REFUSED, "'format'"),
    ("module-internals", "x = json.decoder", ERROR, "AttributeError"),
]


class Mailbox:
    """Tools over a list in the test process; each call records where it ran."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, arguments: dict[str, Any]) -> str:
        self.sent.append(arguments)
        return f"queued for {arguments['to_agent_id']}"

    def tools(self) -> list[SandboxTool]:
        return [SandboxTool("send_message", ("to_agent_id", "content"), False, self.send, {"agent_id": 1})]


async def _replaced(pool: SandboxPool, *gone: int) -> bool:
    """True once ``gone`` ended and the pool is back to full size (a replacement starts in a thread)."""
    deadline = time.monotonic() + 120  # only bounds a hang: a process starts slowly on a busy machine
    while time.monotonic() < deadline:
        pids = pool.pids()
        if len(pids) == pool.size and not set(gone) & set(pids):
            return True
        await asyncio.sleep(0.01)
    return False


@pytest.fixture(scope="module")
def pool():
    pool = SandboxPool(2, limits=LIMITS)
    pool.prestart()
    try:
        yield pool
    finally:
        pool.terminate()


def _vm_hwm_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def test_the_suite_has_every_category_and_at_least_40_programs() -> None:
    assert len(HOSTILE) >= 40
    assert len({name for name, *_ in HOSTILE}) == len(HOSTILE)
    assert {how for _, _, how, _ in HOSTILE} == {REFUSED, OS, STOPPED, ERROR, CAPPED}


@pytest.mark.parametrize(("code", "how", "reason"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
async def test_hostile_program_is_refused_or_stopped_in_time_and_memory(
    pool: SandboxPool, code: str, how: str, reason: str
) -> None:
    ticks, peak = 0, 0.0

    async def ticker() -> None:
        nonlocal ticks, peak
        while True:
            for pid in pool.pids():
                peak = max(peak, _vm_hwm_mb(pid))
            await asyncio.sleep(TICK_S)
            ticks += 1

    # The programs that may end at the clock (the OS stops them, or any "limit" may) run under the 2 s limit.
    limits = LIMITS if how == OS or reason == "limit" else UNHURRIED
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.monotonic()
    try:
        result = await execute(code, Mailbox().tools(), limits=limits, executor=pool)
    except CodeRejectedError as error:
        result, refusal = None, str(error)
    elapsed = time.monotonic() - started
    task.cancel()

    if result is not None:
        peak = max(peak, result.peak_memory_mb or 0.0)
    print(f"\n{how}: {elapsed:.2f} s, peak {peak:.0f} MB, ticks {ticks}: {refusal if result is None else result.error}")
    # Stopped by its limit, not let run: the reason below says which limit. The elapsed time only bounds a hang
    # (ending within a second of the limit is a speed goal, not behaviour: speed goals live in benchmarks/).
    assert elapsed <= limits.timeout_s + 60
    assert peak <= LIMITS.max_memory_growth_mb + 64
    # A loop blocked by the program ticks about never (once at most); a free one ticks, late on a busy machine,
    # so only two ticks are required of any run long enough for ten.
    if elapsed >= 10 * TICK_S:
        assert ticks >= 2, f"the event loop ticked {ticks} times in {elapsed:.2f} s"

    if how == REFUSED:
        assert result is None, f"ran: {result}"
        assert reason in refusal
        return
    assert result is not None, f"refused: {refusal}"
    if how == CAPPED:
        assert result.ok and len(result.output) <= LIMITS.max_output_chars
        return
    assert not result.ok and result.results == {}
    # A memory bomb that the CPU contention of a loaded machine slows down may meet the time limit
    # (the sandbox's own clock or the OS deadline) before the memory cap: either way it was stopped
    # within its limits, which the peak memory above has checked.
    stopped_in_time_instead = reason == "memory limit" and "time limit" in result.error
    assert reason in result.error or stopped_in_time_instead, result.error
    if how == OS and not stopped_in_time_instead:
        assert "(the code used more than 512 MB)" in result.error or "sandbox process was killed" in result.error
    if how == STOPPED:
        assert result.error.startswith("stopped:")


async def test_a_killed_process_is_replaced_and_the_next_code_runs(pool: SandboxPool) -> None:
    box = Mailbox()
    before = set(pool.pids())
    stuck = await execute("x = round(1, -10**7)", box.tools(), executor=pool)
    assert "sandbox process was killed" in stuck.error
    assert stuck.sandbox_pid in before
    assert await _replaced(pool, stuck.sandbox_pid)

    after = await execute("send_message(2, 'still here')\nresults['ok'] = True", box.tools(), executor=pool)
    assert after.ok and after.results == {"ok": True}
    assert box.sent == [{"to_agent_id": 2, "content": "still here", "agent_id": 1}]
