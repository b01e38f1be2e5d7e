"""Robustness: a questionnaire's paraphrases and shuffled options become steps of their own, and fidelity measures how
far each moves the answers, flagging items past the threshold above their noise floor."""

from __future__ import annotations

import pytest

from engine.errors import SpecError
from engine.fidelity import fidelity
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from tests.engine.fidelity.test_rehearsal_run import rehearsal_spec, survey

VARIANTS = {"paraphrases": {"rate": ["All in all, how good is your marriage?"]}, "shuffle_options": True, "threshold": 0.05}


def with_variants(spec: dict, **changes) -> dict:
    step = {**spec["steps"][0], "variants": {**VARIANTS, **changes}}
    return {**spec, "steps": [step]}


def test_each_variant_is_a_step_of_its_own_and_reading_the_stored_spec_adds_none():
    spec = parse_spec(with_variants(rehearsal_spec(0.0, survey(10))))
    ids = [s.questionnaire_id for s in spec.steps]
    assert ids == ["survey", "survey~paraphrase-1", "survey~shuffled"]
    paraphrased, shuffled = spec.steps[1], spec.steps[2]
    assert paraphrased.questions[0].prompt == "All in all, how good is your marriage?"
    assert paraphrased.questions[1].prompt == spec.steps[0].questions[1].prompt  # trust has no paraphrase
    assert sorted(shuffled.questions[0].choices) == sorted(spec.steps[0].questions[0].choices)
    assert shuffled.questions[0].choices != spec.steps[0].questions[0].choices  # seeded: this order differs
    assert shuffled.variant.model_dump() == {"of": "survey", "name": "shuffled", "threshold": 0.05}
    assert parse_spec(spec.model_dump(mode="json")) == spec


def test_a_paraphrase_of_no_question_is_refused_at_its_field():
    with pytest.raises(SpecError, match="variants.paraphrases: 'mood' is no question"):
        parse_spec(with_variants(rehearsal_spec(0.0, survey(10)), paraphrases={"mood": ["How are you?"]}))


async def test_answers_that_hold_or_move_by_noise_alone_are_not_flagged(shell, tmp_path):
    steady = await run_experiment(parse_spec(with_variants(rehearsal_spec(0.0, survey(100)))), tmp_path / "steady", shell)
    assert steady.status == "completed", steady.error
    held = fidelity(tmp_path / "steady", bootstrap=50)
    assert held.get("rate", "accuracy").value == 1.0  # the base questionnaire is scored, not a variant
    for name in ("paraphrase-1", "shuffled"):
        assert held.get("rate", "variant_tvd", group_by="variant", group=name).value == 0.0
        assert held.get("rate", "flagged", group_by="variant", group=name).value == 0.0
        assert held.get("rate", "variant_accuracy", group_by="variant", group=name).gap == 0.0

    sim = {**with_variants(rehearsal_spec(0.0, survey(100))), "llm": {"default": {"model": "sim/default"}}}
    moving = await run_experiment(parse_spec(sim), tmp_path / "moving", shell)
    assert moving.status == "completed", moving.error
    moved = fidelity(tmp_path / "moving", bootstrap=50)
    # The simulated model answers at random whatever the wording: its variants move the answers by noise alone, a TVD
    # past the 0.05 threshold that sits on its floor (before issue 51 this was flagged). compare_variant's own tests
    # show a variant that really moves the answers flagged.
    tvd = moved.get("rate", "variant_tvd", group_by="variant", group="paraphrase-1")
    assert tvd.value > 0.05 and tvd.floor > 0.05 and tvd.ci_low <= tvd.floor <= tvd.ci_high
    assert moved.get("rate", "flagged", group_by="variant", group="paraphrase-1").value == 0.0
    assert tvd.ci_low <= tvd.value <= tvd.ci_high
