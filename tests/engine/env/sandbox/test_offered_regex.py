"""``re`` in the sandbox runs on RE2: Python's API, linear time, bounded replacements, in a thread and in a sandbox process."""

from __future__ import annotations

import pytest

from engine.env.sandbox import SandboxLimits, SandboxPool, execute


@pytest.fixture(scope="module")
def pool():
    pool = SandboxPool(1)
    pool.prestart()
    try:
        yield pool
    finally:
        pool.terminate()


PYTHON_API = (
    "import re\n"
    "m = re.search(r'(?P<user>\\w+)@(\\w+)\\.com', 'write to bob@example.com today')\n"
    "results['groups'] = [m.group(0), m.group('user'), m[2], m.groups(), m.groupdict()]\n"
    "results['where'] = [m.start(), m.end(), m.span(2), m.string[:5], m.lastindex, m.re.pattern[:6]]\n"
    "results['none'] = re.match('x', 'abc') is None\n"
    "results['full'] = bool(re.fullmatch('[a-c]+', 'abc'))\n"
    "results['all'] = re.findall(r'(\\d+)-(\\d+)', '1-2 and 30-40')\n"
    "results['iter'] = [m.group() for m in re.finditer(r'\\d+', 'a1b22c333')]\n"
    "results['split'] = re.split(r'[,;]\\s*', 'a, b;c')\n"
    "results['sub'] = re.sub(r'(\\w+)@(\\w+)', r'\\2 at \\g<1>', 'bob@home')\n"
    "results['subn'] = re.subn('a', 'b', 'banana', count=2)\n"
    "results['call'] = re.sub(r'\\d+', lambda m: str(int(m.group()) * 2), 'a1 b22')\n"
    "results['flags'] = re.findall('^hello', 'Hello\\nhello', re.I | re.M)\n"
    "results['dotall'] = bool(re.search('a.b', 'a\\nb', flags=re.DOTALL))\n"
    "p = re.compile(r'(a)(b)?')\n"
    "results['compiled'] = [p.groups, p.search('xab').span(), p.findall('ab a'), re.escape('a.b')]\n"
    "results['expand'] = p.search('ab').expand(r'[\\2\\1]')\n"
)
EXPECTED = {
    "groups": ["bob@example.com", "bob", "example", ["bob", "example"], {"user": "bob"}],
    "where": [9, 24, [13, 20], "write", 2, "(?P<us"],
    "none": True,
    "full": True,
    "all": [["1", "2"], ["30", "40"]],
    "iter": ["1", "22", "333"],
    "split": ["a", "b", "c"],
    "sub": "home at bob",
    "subn": ["bbnbna", 2],
    "call": "a2 b44",
    "flags": ["Hello", "hello"],
    "dotall": True,
    "compiled": [2, [1, 3], [["a", "b"], ["a", ""]], "a\\.b"],
    "expand": "[ba]",
}


async def test_re_offers_pythons_api_in_a_thread() -> None:
    result = await execute(PYTHON_API, [])
    assert result.ok, result.error
    assert result.results == EXPECTED


async def test_re_offers_pythons_api_in_a_sandbox_process(pool: SandboxPool) -> None:
    result = await execute(PYTHON_API, [], executor=pool)
    assert result.ok, result.error
    assert result.results == EXPECTED


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("(a+)+$", "'a' * 5000 + 'b'"),
        ("(a|a)*b", "'a' * 100000"),
        ("a*a*a*a*a*a*a*a*a*b", "'a' * 100000"),
        ("(x+x+)+y", "'x' * 100000"),
        ("(.*,){20}z", "'a,' * 50000"),
    ],
)
async def test_catastrophic_backtracking_patterns_finish_at_once(pool: SandboxPool, pattern: str, text: str) -> None:
    code = f"import re\nresults['m'] = re.search({pattern!r}, {text}) is None"
    # On a backtracking engine these run for hours to forever, so they meet any time limit; this one only bounds a
    # hang, so that a busy machine's RE2 (well under a second on an idle one: a speed goal, for benchmarks/) is
    # never cut short.
    result = await execute(code, [], limits=SandboxLimits(timeout_s=60), executor=pool)
    assert result.ok, result.error
    assert result.results == {"m": True}


async def test_a_match_in_results_is_a_clear_error() -> None:
    result = await execute("results['m'] = re.search('a', 'a')", [])
    assert not result.ok and "a Match is not plain data" in result.error


async def test_replacements_that_multiply_the_text_are_refused_before_they_are_built() -> None:
    text = "s = 'a' * 600000 + 'b' * 1000\n"
    for code in ("x = re.sub('b', 'x' * 1000, s)", "x = re.sub('b', lambda m: 'x' * 1000, s)", "x = re.sub('', '-' * 1000, s)",
                 "m = re.search('.+', s)\nx = m.expand('\\\\g<0>\\\\g<0>')"):  # fmt: skip
        result = await execute(text + code, [])
        assert not result.ok and "too large" in result.error, (code, result.error)
    fine = await execute(text + "x = re.sub('b', 'cc', s)\nresults['n'] = len(x)", [])
    assert fine.ok and fine.results == {"n": 602000}


async def test_a_pattern_outside_re2_says_why() -> None:
    result = await execute("x = re.search(r'(a)\\1', 'aa')", [])
    assert not result.ok and "UnsupportedPatternError" in result.error and "backreferences" in result.error
    caught = await execute("try:\n    re.compile('(?<=a)b')\nexcept ValueError as e:\n    results['e'] = str(e)", [])
    assert caught.ok and "lookbehind" in caught.results["e"]


async def test_each_match_is_a_step() -> None:
    code = "s = 'ab' * 600\nx = {how}\n"
    for how in ("re.findall('b', s)", "list(re.finditer('b', s))", "re.sub('b', 'c', s)", "re.split('b', s)"):
        small = await execute(code.format(how=how).replace("600", "400"), [], limits=SandboxLimits(max_steps=500))
        big = await execute(code.format(how=how), [], limits=SandboxLimits(max_steps=500))
        assert small.ok, (how, small.error)
        assert not big.ok and "step limit of 500" in big.error, (how, big.error)
