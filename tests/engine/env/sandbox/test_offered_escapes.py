"""Escape attempts through the modules the sandbox offers: each is refused, raises, or reaches nothing private."""

from __future__ import annotations

import pytest

from engine.env.sandbox import CodeRejectedError, execute

#: (id, code, text the refusal or error must contain)
ESCAPES: list[tuple[str, str, str]] = [
    # operator: attribute names given as strings are checked like x.name
    ("attrgetter-class", "f = operator.attrgetter('__class__')\nx = f(1)", "'__class__' is not allowed"),
    ("attrgetter-dotted", "x = operator.attrgetter('real.__class__')(1)", "'__class__' is not allowed"),
    ("attrgetter-second", "x = operator.attrgetter('real', '__class__')(1)", "'__class__' is not allowed"),
    ("attrgetter-frame", "g = (i for i in [1])\nx = operator.attrgetter('gi_frame')(g)", "'gi_frame' is not allowed"),
    ("attrgetter-format", "x = operator.attrgetter('format')('{0.__class__}')", "'format' is not allowed"),
    ("attrgetter-join", "j = operator.attrgetter('join')('x')", "must be called directly"),
    ("methodcaller-dunder", "x = operator.methodcaller('__reduce_ex__', 2)(1)", "'__reduce_ex__' is not allowed"),
    ("methodcaller-mro", "x = operator.methodcaller('mro')(int)", "'mro' is not allowed"),
    ("methodcaller-ljust", "x = operator.methodcaller('ljust', 10**9)('a')", "'ljust' is not allowed"),
    ("methodcaller-path", "x = operator.methodcaller('real.conjugate')(1)", "not a path"),
    ("methodcaller-replace", "x = operator.methodcaller('replace', 'a', 'a' * 10**6)('a' * 10**6)", "must be called"),
    ("operator-pow-bomb", "x = operator.pow(7, 10**9)", "too large"),
    ("operator-lshift-bomb", "x = operator.lshift(1, 10**9)", "too large"),
    ("operator-concat-bomb", "s = 'a' * 999999\nx = operator.concat(s, s)", "too large"),
    ("operator-mod-format", "x = operator.mod('%900000000s', 'x')", "too large"),
    # functools: the helpers reach nothing beyond what code passes them
    ("partial-func-attribute", "p = functools.partial(len)\nx = p.func.__self__", "'__self__' is not allowed"),
    ("reduce-with-getattr", "x = functools.reduce(getattr, ['__class__'], 1)", "'getattr' is not allowed"),
    ("update-wrapper", "functools.update_wrapper(len, len, assigned=('__code__',))", "not available|has no attribute"),
    ("lru-wrapped", "f = functools.lru_cache()(len)\nx = f.__wrapped__", "'__wrapped__' is not allowed"),
    # collections: the classes' internals stay private
    ("namedtuple-asdict", "P = collections.namedtuple('P', 'x')\nx = P(1)._asdict()", "'_asdict' is not allowed"),
    ("namedtuple-huge", "P = collections.namedtuple('P', ['f' + str(i) for i in range(5000)])", "too large"),
    ("namedtuple-inject", "P = collections.namedtuple('P', ['x): import os #'])", "ValueError"),
    ("counter-mro", "x = collections.Counter.mro()", "'mro' is not allowed"),
    ("counter-init-subclass", "x = collections.Counter.__init_subclass__", "'__init_subclass__' is not allowed"),
    ("deque-class-getitem", "x = collections.deque.__class_getitem__(int)", "'__class_getitem__' is not allowed"),
    ("generic-alias-origin", "x = collections.deque[int].__origin__", "'__origin__' is not allowed"),
    ("defaultdict-factory-set", "d = collections.defaultdict(list)\nd.default_factory = print", "assigning"),
    # itertools: the wrapped iterators hide the real ones
    ("itertools-inner", "it = itertools.count()\nx = it._items", "'_items' is not allowed"),
    ("itertools-tick", "it = itertools.count()\nx = operator.attrgetter('_tick')(it)", "'_tick' is not allowed"),
    # random: the generator and the OS's entropy are out of reach
    ("random-rng", "x = random._rng", "'_rng' is not allowed"),
    ("random-rng-by-name", "x = operator.attrgetter('_rng')(random)", "'_rng' is not allowed"),
    ("random-getstate", "x = random.getstate()", "AttributeError"),
    ("random-setstate", "random.setstate((3, tuple(range(625)), None))", "AttributeError"),
    ("random-system", "x = random.SystemRandom()", "AttributeError"),
    ("random-self", "x = random.random.__self__", "'__self__' is not allowed"),
    ("random-seed-object", "random.seed([1, 2])", "TypeError"),
    ("random-getrandbits-bomb", "x = random.getrandbits(10**9)", "too large"),
    ("random-randbytes-bomb", "x = random.randbytes(10**9)", "too large"),
    # re: compiled patterns and matches are wrappers without the RE2 objects
    ("pattern-compiled", "p = re.compile('a')\nx = p._compiled", "'_compiled' is not allowed"),
    ("pattern-options", "p = re.compile('a')\nx = p.options", "AttributeError"),
    ("pattern-programsize", "p = re.compile('a')\nx = p.programsize", "AttributeError"),
    ("match-raw", "m = re.search('a', 'a')\nx = operator.attrgetter('_raw')(m)", "'_raw' is not allowed"),
    ("match-regexp", "m = re.search('a', 'a')\nx = m.re.options", "AttributeError"),
    ("sub-callable-sees-wrapper", "x = re.sub('a', lambda m: m._raw, 'a')", "'_raw' is not allowed"),
    ("sub-callable-non-string", "x = re.sub('a', lambda m: m, 'a')", "must return a str"),
    ("regex-verbose", "x = re.search('a', 'a', re.X)", "AttributeError"),
    ("regex-unknown-flag", "x = re.search('a', 'a', 64)", "unsupported regular expression flags"),
    ("regex-lookahead", "x = re.search('a(?=b)', 'ab')", "lookahead"),
    ("regex-huge-program", "x = re.search('(.{1,100}){1,10}x', 'a')", "too large"),
    ("regex-huge-repeat", "x = re.search('(a{1,100}){1,100}', 'a')", "invalid repetition size"),
    ("finditer-frame", "it = re.finditer('a', 'aa')\nx = it.gi_frame", "'gi_frame' is not allowed"),
]


@pytest.mark.parametrize(("code", "reason"), [e[1:] for e in ESCAPES], ids=[e[0] for e in ESCAPES])
async def test_escape_through_an_offered_module_fails(code: str, reason: str) -> None:
    try:
        result = await execute(code, [])
    except CodeRejectedError as refused:
        message = str(refused)
    else:
        assert not result.ok, f"ran: {result.results}"
        message = result.error
    assert any(part in message for part in reason.split("|")), message
