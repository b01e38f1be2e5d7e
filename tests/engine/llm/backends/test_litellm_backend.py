"""litellm reaching the simulated LLM over real HTTP like any OpenAI-compatible endpoint."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from engine.errors import LLMRateLimitError
from engine.llm.backends.litellm_backend import LiteLLMChatModel
from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.sim import SimFaults
from engine.llm.sim.background import serving
from engine.llm.structured import complete_structured
from engine.llm.wrappers.single_flight import SingleFlightModel


class Vote(BaseModel):
    choice: str
    confidence: float


SECRET = "sk-polis-test-secret-value"


@pytest.fixture(scope="module")
def sim_url():
    with serving() as url:
        yield url


async def test_structured_output_through_litellm_over_http(sim_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_KEY", SECRET)
    client = LLMClient(model="openai/sim-default", base_url=f"{sim_url}/v1", api_key_env="POLIS_TEST_KEY")
    model = get_chat_model(client)
    assert isinstance(model, SingleFlightModel)

    vote = await complete_structured(model, [{"role": "user", "content": "vote"}], Vote)

    assert isinstance(vote, Vote)
    assert SECRET not in client.model_dump_json()


async def test_rate_limit_surfaces_with_retry_after_and_no_secret(monkeypatch):
    monkeypatch.setenv("POLIS_TEST_KEY", SECRET)
    with serving(faults=SimFaults(rate_429=1.0, retry_after_s=3)) as url:
        model = LiteLLMChatModel(LLMClient(model="openai/sim", base_url=f"{url}/v1", api_key_env="POLIS_TEST_KEY"))
        with pytest.raises(LLMRateLimitError) as caught:
            await model.complete([{"role": "user", "content": "hi"}])
    assert caught.value.status == 429
    assert caught.value.retry_after == 3
    assert SECRET not in str(caught.value)


async def test_missing_key_variable_is_a_clear_error(sim_url, monkeypatch):
    monkeypatch.delenv("POLIS_ABSENT_KEY", raising=False)
    model = LiteLLMChatModel(LLMClient(model="openai/sim", base_url=f"{sim_url}/v1", api_key_env="POLIS_ABSENT_KEY"))
    with pytest.raises(Exception, match="POLIS_ABSENT_KEY"):
        await model.complete([{"role": "user", "content": "hi"}])
