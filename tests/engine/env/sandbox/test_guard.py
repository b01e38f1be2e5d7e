"""The AST guard refuses escape attempts before anything runs, naming the construct and its line."""

from __future__ import annotations

import pytest

from engine.env.sandbox import CodeRejectedError, check_code, compile_guarded

#: (escape attempt, text the refusal must contain)
STATIC_ESCAPES = [
    # dunder walks
    ("().__class__.__bases__[0].__subclasses__()", "'__class__'"),
    ("[].append.__self__", "'__self__'"),
    ("(lambda: 0).__globals__", "'__globals__'"),
    ("x = __builtins__", "'__builtins__'"),
    ("(y := __builtins__)", "'__builtins__'"),
    ("__import__('os')", "'__import__'"),
    ("x = _private", "'_private'"),
    ("results._store = 1", "'_store'"),
    # format-string tricks
    ("'{0.__class__}'.format(1)", "'format'"),
    ("'{x.y}'.format_map({'x': 1})", "'format_map'"),
    ("str.format('{0.__class__}', 1)", "'format'"),
    ("x = 1\ny = f'{x.__class__}'", "'__class__'"),
    ("x = 1\ny = 2\nz = f'{x!r:{y.__class__}}'", "'__class__'"),
    # generator, coroutine and code objects
    ("g = (x for x in [])\ng.gi_frame.f_globals", "'gi_frame'"),
    ("g = (x for x in [])\ng.gi_code", "'gi_code'"),
    ("def f(): pass\nf.func_globals", "'func_globals'"),
    ("def f(): pass\nc = f.co_code", "'co_code'"),
    ("x = 1\nx.f_back", "'f_back'"),
    ("x = 1\nx.cr_frame", "'cr_frame'"),
    # exception tracebacks
    ("try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame", "'__traceback__'"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    t = e.tb_frame", "'tb_frame'"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    e.with_traceback(None)", "'with_traceback'"),
    ("try:\n    1 / 0\nexcept Exception as e:\n    o = e.obj", "'obj'"),
    ("try:\n    pass\nexcept:\n    pass", "bare 'except:'"),
    ("try:\n    pass\nexcept BaseException:\n    pass", "'BaseException'"),
    ("try:\n    pass\nexcept* ValueError:\n    pass", "'except*'"),
    # allowed-module internals and imports
    ("import math\nmath.__loader__", "'__loader__'"),
    ("import re\nre._compile('x', 0)", "'_compile' is not allowed"),
    ("import os", "import of 'os'"),
    ("import os", "import of 'os'"),
    ("import sys", "import of 'sys'"),
    ("from datetime import sys", "datetime.sys is not available"),
    ("from json import decoder", "json.decoder is not available"),
    ("from math import *", "'import *'"),
    ("from . import math", "relative imports"),
    ("import math as _m", "'_m'"),
    # introspection builtins
    ("getattr(1, '_' + '_class__')", "'getattr'"),
    ("setattr(ctx, 'x', 1)", "'setattr'"),
    ("type(1)", "'type'"),
    ("dir()", "'dir'"),
    ("vars()", "'vars'"),
    ("globals()", "'globals'"),
    ("locals()", "'locals'"),
    ("open('/etc/passwd').read()", "'open'"),
    ("eval('1 + 1')", "'eval'"),
    ("exec('x = 1')", "'exec'"),
    ("compile('1', 'f', 'eval')", "'compile'"),
    ("breakpoint()", "'breakpoint'"),
    ("memoryview(b'x')", "'memoryview'"),
    ("super()", "'super'"),
    ("object()", "'object'"),
    ("int.mro()", "'mro'"),
    # statements outside the sandbox's language
    ("class A:\n    pass", "class definitions"),
    ("with x:\n    pass", "'with' blocks"),
    ("global x", "'global'"),
    ("def f():\n    nonlocal x", "'nonlocal'"),
    ("def d(f):\n    return f\n@d\ndef g():\n    pass", "decorators"),
    ("def f():\n    yield 1", "generators"),
    ("async def f():\n    pass", "async functions"),
    ("match 1:\n    case object(__class__=c):\n        pass", "'match'"),
    ("f = lambda _x: 0", "'_x'"),
    ("ctx.x = 1", "assigning or deleting attributes"),
    ("results = {}", "'results' is provided by the sandbox"),
    ("del results", "'results' is provided by the sandbox"),
    # literal resource bombs
    ("x = 'a' * 10**10", "repeating a sequence"),
    ("x = [0] * (10**9)", "repeating a sequence"),
    ("x = 2 ** 10**10", "exponent above"),
    ("x = 'ab'.ljust(10**9)", "'ljust'"),
    ("x = '1'.zfill(10**9)", "'zfill'"),
    ("f = ''.join\nf(['a'] * 10)", "must be called directly"),
    # parser-level
    ("x = (", "syntax error"),
    ("x = 1\0", "line 1"),
]


@pytest.mark.parametrize(("code", "reason"), STATIC_ESCAPES, ids=[c for c, _ in STATIC_ESCAPES])
def test_guard_refuses_escape_attempt(code: str, reason: str) -> None:
    with pytest.raises(CodeRejectedError) as refused:
        check_code(code, reserved={"results", "ctx"})
    assert reason in str(refused.value)
    assert all(problem.startswith("line ") for problem in refused.value.problems)


def test_there_are_more_than_thirty_distinct_static_escape_attempts() -> None:
    assert len({code for code, _ in STATIC_ESCAPES}) >= 60


def test_refusal_names_the_line_of_each_problem() -> None:
    code = "x = 1\ny = x.__class__\nimport os\n"
    with pytest.raises(CodeRejectedError) as refused:
        check_code(code)
    assert refused.value.problems == [
        "line 2: attribute '__class__' is not allowed (names starting with '_' are private)",
        "line 3: import of 'os' is not allowed; available: collections, datetime, functools, itertools, json, math, "
        "operator, random, re, statistics",
    ]


@pytest.mark.parametrize(
    "code",
    [
        'results["answer"] = read_inbox()',
        "total = sum(x * 2 for x in range(10))\nresults['total'] = total",
        "import math\nfrom datetime import timedelta\nresults['r'] = math.sqrt(2)",
        "try:\n    send_message(to_agent_id=2, content='hi')\nexcept ToolError as e:\n    results['error'] = str(e)",
        "def double(v):\n    return v * 2\nresults['d'] = [double(i) for i in range(3)]",
        "name = variables['to']\nresults['msg'] = f'hello {name!r:>10}'",
        "x = {'a': 1}\ndel x['a']\nresults['n'] = len(x)",
        "f = lambda v: v + 1\nresults['f'] = f(1)",
        "i = 0\nwhile i < 3:\n    i += 1\nelse:\n    results['i'] = i",
        "price: float = 2.5\nresults['p'] = round(price * 1500000)",
    ],
)
def test_guard_accepts_ordinary_tool_code(code: str) -> None:
    compile_guarded(code, reserved={"results", "ctx", "variables"})


def test_code_longer_than_the_limit_is_refused() -> None:
    with pytest.raises(CodeRejectedError, match="longer than"):
        check_code("x = 1\n" * 5000)


def test_absurd_nesting_is_refused_not_crashing() -> None:
    with pytest.raises(CodeRejectedError):
        check_code("x = " + "(" * 5000 + "1" + ")" * 5000)


#: Code the parser accepts but the compiler refuses: a refusal with its line, never a SyntaxError.
COMPILE_ERRORS = [
    ("send_message(to_agent_id=1, content='hi')\nreturn results", "line 2: syntax error: 'return' outside function"),
    ("x = 1\nbreak", "line 2: syntax error: 'break' outside loop"),
    ("continue", "line 1: syntax error: 'continue' not properly in loop"),
    ("def f(a, a):\n    return a", "line 1: syntax error: duplicate argument 'a' in function definition"),
    ("x = [y for y in (z := [1, 2])]", "line 1: syntax error: assignment expression cannot be used in a comprehension"),
]


@pytest.mark.parametrize(("code", "reason"), COMPILE_ERRORS, ids=[c for c, _ in COMPILE_ERRORS])
def test_what_the_compiler_refuses_is_a_refusal_with_its_line(code: str, reason: str) -> None:
    with pytest.raises(CodeRejectedError) as refused:
        compile_guarded(code, reserved={"results", "ctx", "variables", "send_message"})
    assert str(refused.value).startswith(f"code refused: {reason}")


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("import math as results", "results"),
        ("from json import loads as ctx", "ctx"),
        ("import json as variables", "variables"),
        ("from math import sqrt as send_message", "send_message"),
        ("import json.decoder as results", "results"),
    ],
)
def test_imports_cannot_rebind_what_the_sandbox_provides(code: str, name: str) -> None:
    with pytest.raises(CodeRejectedError, match=f"'{name}' is provided by the sandbox"):
        check_code(code, reserved={"results", "ctx", "variables", "send_message"})


def test_the_same_code_compiles_once() -> None:
    code = "results['x'] = 1"
    assert compile_guarded(code, reserved={"results"}) is compile_guarded(code, reserved={"results"})
