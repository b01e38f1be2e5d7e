"""The simulated LLM's names: a kind and an optional label; a misspelled kind, or an ``extra`` key no kind reads there,
is refused at parse with the known names, never run as another model."""

from __future__ import annotations

import pytest

from engine.errors import SpecError
from engine.llm.sim.model import SimLLM
from engine.llm_spec import SIM_KINDS, LLMClientSpec, SimName, parse_sim_name
from engine.spec import parse_spec


def spec_with(llm: dict) -> dict:
    return {"name": "names", "agents": [{"id": 1}], "steps": [{"type": "run", "num_steps": 1}], "llm": {"default": llm}}


@pytest.mark.parametrize(("model", "says"), [
    ("sim/socal", "no simulated model 'sim/socal': did you mean 'sim/social'?"),
    ("sim/rehersal:b", "did you mean 'sim/rehearsal:b'?"),
    ("sim/test", "the simulated models are sim/default, sim/social, sim/rehearsal"),
    ("sim/default:", "a label is 1-64 letters"),
    ("sim/default:a b", "a label is 1-64 letters"),
])
def test_a_simulated_model_of_no_kind_is_refused_with_the_kinds_and_a_suggestion(model: str, says: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(spec_with({"model": model}))
    assert refused.value.path == "llm.default" and says in str(refused.value), str(refused.value)


@pytest.mark.parametrize(("model", "extra", "says"), [
    ("sim/default", {"rehearse_noise": 0.2}, "extra.rehearse_noise: sim/default does not read it (sim/rehearsal reads it)"),
    ("sim/social:b", {"rehearse_noise": 0.2}, "the keys it reads: social"),
    ("sim/rehearsal", {"temperature_boost": 1}, "extra.temperature_boost: sim/rehearsal does not read it; the keys it reads: rehearse_noise"),
])
def test_an_extra_key_the_simulated_model_does_not_read_is_refused(model: str, extra: dict, says: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(spec_with({"model": model, "extra": extra}))
    assert says in str(refused.value), str(refused.value)


def test_every_kind_with_what_it_reads_is_accepted_and_a_label_is_an_independent_copy_of_its_kind() -> None:
    accepted = {"default": {}, "social": {"social": {"post": 0.2}}, "rehearsal": {"rehearse_noise": 0.1}}
    assert set(accepted) == set(SIM_KINDS)
    for kind, extra in accepted.items():
        for model in (f"sim/{kind}", f"sim/{kind}:arm-2"):
            assert parse_spec(spec_with({"model": model, "extra": extra})).llm.default.model == model
    assert parse_sim_name("social:arm-2") == SimName("social", "arm-2") and parse_sim_name("social") == SimName("social")
    # a real provider's extra passes through as documented; a sim/ name behind a base_url is that endpoint's model
    assert LLMClientSpec(model="openai/gpt-4o-mini", extra={"seed_bias": 1}).extra == {"seed_bias": 1}
    assert LLMClientSpec(model="sim/anything", base_url="http://127.0.0.1:9/v1").model == "sim/anything"
    request = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    social, copy = SimLLM(name="social", seed=1), SimLLM(name="social:b", seed=1)
    assert copy.social == social.social is not None  # the copy acts as a social-media user at the same rates ...
    answers = [SimLLM(name=name, seed=1).complete(request)["choices"][0]["message"]["content"] for name in ("default", "default:b")]
    assert answers[0] != answers[1]  # ... and a labelled copy answers differently from its kind
