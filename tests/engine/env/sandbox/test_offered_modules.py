"""collections, itertools, functools and operator in the sandbox: what coder models write runs, and results stay JSON."""

from __future__ import annotations

from typing import Any

import pytest

from engine.env.sandbox import CodeRejectedError, SandboxLimits, check_code, execute
from engine.env.sandbox.executor import ExecutionResult


async def run(code: str, **limits: Any) -> ExecutionResult:
    return await execute(code, [], limits=SandboxLimits(**limits) if limits else None)


async def test_counter_defaultdict_deque_namedtuple_results_are_stored_as_plain_json() -> None:
    result = await run(
        "from collections import Counter, defaultdict, deque, namedtuple, OrderedDict\n"
        "c = Counter('abracadabra')\n"
        "groups = defaultdict(list)\n"
        "for word in ['apple', 'avocado', 'banana']:\n"
        "    groups[word[0]].append(word)\n"
        "Point = namedtuple('Point', 'x y')\n"
        "results['top'] = c.most_common(2)\n"
        "results['counter'] = c\n"
        "results['groups'] = groups\n"
        "results['window'] = deque([1, 2, 3, 4], maxlen=2)\n"
        "results['point'] = Point(1, y=2)\n"
        "results['ordered'] = OrderedDict([('b', 1), ('a', 2)])\n"
    )
    assert result.ok, result.error
    assert result.results == {
        "top": [["a", 5], ["b", 2]],
        "counter": {"a": 5, "b": 2, "r": 2, "c": 1, "d": 1},
        "groups": {"a": ["apple", "avocado"], "b": ["banana"]},
        "window": [3, 4],
        "point": [1, 2],
        "ordered": {"b": 1, "a": 2},
    }


async def test_a_counter_with_tuple_keys_in_results_is_a_clear_error() -> None:
    result = await run("import collections\nresults['pairs'] = collections.Counter([(1, 2), (1, 2)])")
    assert not result.ok and "results could not be stored" in result.error and "tuple" in result.error


async def test_itertools_functools_and_operator_compute_as_in_python() -> None:
    result = await run(
        "import itertools, functools, operator\n"
        "results['pairs'] = list(itertools.combinations('abc', 2))\n"
        "results['grid'] = [list(p) for p in itertools.product([0, 1], repeat=2)]\n"
        "results['flat'] = list(itertools.chain.from_iterable([[1], [2, 3]]))\n"
        "results['runs'] = [(k, len(list(g))) for k, g in itertools.groupby('aabccc')]\n"
        "results['first'] = list(itertools.islice(itertools.count(10, 5), 3))\n"
        "results['acc'] = list(itertools.accumulate([1, 2, 3], operator.mul))\n"
        "results['total'] = functools.reduce(operator.add, [1, 2, 3], 10)\n"
        "double = functools.partial(operator.mul, 2)\n"
        "results['double'] = double(21)\n"
        "rows = [{'n': 'b', 'v': 2}, {'n': 'a', 'v': 1}]\n"
        "results['sorted'] = [r['n'] for r in sorted(rows, key=operator.itemgetter('v'))]\n"
        "results['upper'] = list(map(operator.methodcaller('upper'), ['x', 'y']))\n"
        "results['cmp'] = sorted([3, 1, 2], key=functools.cmp_to_key(lambda a, b: b - a))\n"
        "fib = functools.lru_cache(maxsize=None)(lambda n: n if n < 2 else fib(n - 1) + fib(n - 2))\n"
        "results['fib'] = fib(30)\n"
    )
    assert result.ok, result.error
    assert result.results == {
        "pairs": [["a", "b"], ["a", "c"], ["b", "c"]],
        "grid": [[0, 0], [0, 1], [1, 0], [1, 1]],
        "flat": [1, 2, 3],
        "runs": [["a", 2], ["b", 1], ["c", 3]],
        "first": [10, 15, 20],
        "acc": [1, 2, 6],
        "total": 16,
        "double": 42,
        "sorted": ["a", "b"],
        "upper": ["X", "Y"],
        "cmp": [3, 2, 1],
        "fib": 832040,
    }


async def test_each_itertools_item_is_a_step() -> None:
    small = await run("import itertools\nx = list(itertools.repeat(0, 900))", max_steps=1000)
    big = await run("import itertools\nx = list(itertools.repeat(0, 1100))", max_steps=1000)
    assert small.ok, small.error
    assert not big.ok and "step limit of 1000" in big.error


async def test_the_throwaway_name_underscore_is_allowed_but_not_private_names() -> None:
    result = await run("results['n'] = [0 for _ in range(3)]\nfor _ in range(2):\n    pass")
    assert result.ok and result.results == {"n": [0, 0, 0]}
    for code in ("_x = 1", "x = (1)._", "def f(_a):\n    return 1"):
        with pytest.raises(CodeRejectedError):
            check_code(code)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("from collections import ChainMap", "collections.ChainMap is not available"),
        ("from functools import wraps", "functools.wraps is not available"),
        ("from itertools import tee", "itertools.tee is not available"),
        ("from random import SystemRandom", "random.SystemRandom is not available"),
        ("from re import compile", "'compile' is not allowed"),
        ("import collections.abc", "import of 'collections.abc' is not allowed"),
    ],
)
def test_members_outside_the_whitelist_cannot_be_imported(code: str, reason: str) -> None:
    with pytest.raises(CodeRejectedError) as refused:
        check_code(code)
    assert reason in str(refused.value)


def test_the_guard_measures_against_another_module_set() -> None:
    before = {"math": frozenset({"sqrt"})}
    check_code("import collections")
    with pytest.raises(CodeRejectedError, match="import of 'collections' is not allowed; available: math"):
        check_code("import collections", modules=before)
