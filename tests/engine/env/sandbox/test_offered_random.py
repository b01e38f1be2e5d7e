"""``random`` in the sandbox is seeded per request: the same seed draws the same numbers, in a thread or a process."""

from __future__ import annotations

import pytest

from engine.env.sandbox import SandboxPool, execute
from engine.env.sandbox.offered import SandboxRandom

DRAWS = (
    "import random\n"
    "results['ints'] = [random.randint(1, 1000) for _ in range(5)]\n"
    "results['pick'] = random.choice('abcdef')\n"
    "deck = list(range(10))\n"
    "random.shuffle(deck)\n"
    "results['deck'] = deck\n"
    "results['sample'] = random.sample(range(100), 3)\n"
    "results['weighted'] = random.choices(['a', 'b'], weights=[1, 3], k=4)\n"
    "results['gauss'] = round(random.gauss(0, 1), 12)\n"
    "rng = random.Random()\n"
    "results['own'] = rng.random()\n"
    "results['fixed'] = random.Random(42).randint(1, 10**6)\n"
)


@pytest.fixture(scope="module")
def pool():
    pool = SandboxPool(2)
    pool.prestart()
    try:
        yield pool
    finally:
        pool.terminate()


async def test_the_same_seed_draws_the_same_numbers_in_a_thread_and_in_sandbox_processes(pool: SandboxPool) -> None:
    in_thread = await execute(DRAWS, [], seed=1234)
    first = await execute(DRAWS, [], seed=1234, executor=pool)
    second = await execute(DRAWS, [], seed=1234, executor=pool)
    assert in_thread.ok, in_thread.error
    assert in_thread.results == first.results == second.results


async def test_another_seed_draws_other_numbers() -> None:
    one = await execute(DRAWS, [], seed=1)
    two = await execute(DRAWS, [], seed=2)
    assert one.ok and two.ok
    assert one.results["ints"] != two.results["ints"]
    assert one.results["own"] != two.results["own"]
    assert one.results["fixed"] == two.results["fixed"]  # an explicit seed is the code's own


async def test_an_execution_does_not_inherit_the_previous_executions_state(pool: SandboxPool) -> None:
    draw = "results['x'] = random.random()"
    alone = await execute(draw, [], seed=5, executor=pool)
    await execute("for _ in range(100):\n    random.random()", [], seed=5, executor=pool)
    await execute("random.seed(99)", [], seed=5, executor=pool)
    again = await execute(draw, [], seed=5, executor=pool)
    assert alone.results == again.results


async def test_seed_without_a_value_goes_back_to_the_request_seed_not_the_os() -> None:
    code = "a = random.random()\nrandom.seed(7)\nb = random.random()\nrandom.seed()\nresults['same'] = [a == random.random(), b]"
    one, two = await execute(code, [], seed=3), await execute(code, [], seed=3)
    assert one.results["same"][0] is True
    assert one.results == two.results


def test_a_generator_refuses_seeds_that_are_not_plain_values() -> None:
    with pytest.raises(TypeError):
        SandboxRandom(None)  # type: ignore[arg-type]
    rng = SandboxRandom(0)
    with pytest.raises(TypeError):
        rng.seed([1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="too large"):
        rng.choices([1], k=10**7)
    with pytest.raises(ValueError, match="too large"):
        rng.sample(range(10), 3, counts=[10**7] * 10)
