"""A process that builds an LLM stack raises the young generation's GC threshold, never lowers it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.gc_policy import YOUNG_THRESHOLD, relax_gc


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


@pytest.mark.parametrize(
    "client",
    [
        LLMClient(model="openai/gc-policy-test", base_url="http://127.0.0.1:9/v1"),
        LLMClient(model="sim/default:gc-policy-test"),  # agent batches on the in-process sim keep as many coroutines
    ],
)
def test_building_a_stack_relaxes_the_young_generation(default_thresholds: None, client: LLMClient) -> None:
    get_chat_model(client)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)


def test_a_higher_threshold_set_by_the_process_is_kept(default_thresholds: None) -> None:
    gc.set_threshold(50_000, 5, 5)
    assert relax_gc() == (50_000, 5, 5)
