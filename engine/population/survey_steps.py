"""The questionnaire steps a survey makes: its target items, and variants of them that test how robust answers are.

Applied to a spec's data before it is validated (``ExperimentSpec`` calls :func:`expand_survey_steps`):

- a questionnaire with ``from_survey: true`` and no ``questions`` gets one question per target item of
  the survey population, in its own wording, its labels the options in scale order;
- a questionnaire with ``variants`` is followed by one questionnaire step per variant: each paraphrase
  (the k-th wording given for an item; items without one keep theirs), and with ``shuffle_options`` the
  options of every choice question in one seeded random order. A variant step's id is
  ``<questionnaire_id>~<variant>`` and it carries ``variant: {of, name, threshold}``; the base step
  keeps its ``variants`` no more, so reading a stored spec again adds nothing.

Fidelity scores the base questionnaire, and measures each variant's move from it (``variant_tvd``),
flagging an item whose answers move more than ``threshold``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

__all__ = ["VariantInfo", "VariantsSpec", "check_survey", "expand_survey_steps", "survey_questions"]


class VariantsSpec(BaseModel):
    """Variants of a questionnaire that test whether its answers hold when the asking changes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    paraphrases: dict[str, list[str]] = Field(
        default_factory=dict, description="question id -> other wordings of it: the k-th wording of each makes variant k")
    shuffle_options: bool = Field(False, description="one more variant: each choice question's options in a seeded random order")
    threshold: float = Field(0.1, gt=0, le=1, description="a variant's TVD from the original above which an item is flagged")


class VariantInfo(BaseModel):
    """What a variant step is (filled in when the spec is read)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    of: str = Field(description="the questionnaire it varies")
    name: str = Field(description="paraphrase-<k> or shuffled")
    threshold: float = Field(gt=0, le=1)


def survey_questions(codebook: Any) -> list[dict[str, Any]]:
    """The questions a ``from_survey`` questionnaire asks: one per target of ``codebook`` (a Codebook or its data)."""
    from engine.population.codebook import Codebook

    book = codebook if isinstance(codebook, Codebook) else Codebook.model_validate(codebook)
    return [{"id": book.target_name(column), "prompt": spec.question, "response_type": "choice",
             "choices": [label for _, label in spec.labels or ()]} for column, spec in book.targets.items()]


def _variants(step: dict[str, Any], seed: Any) -> list[dict[str, Any]]:
    variants = VariantsSpec.model_validate(step["variants"])
    questions = [dict(q) for q in step.get("questions") or [] if isinstance(q, dict)]
    ids = [q.get("id") for q in questions]
    if unknown := next((item for item in variants.paraphrases if item not in ids), None):
        raise ValueError(f"variants.paraphrases: {unknown!r} is no question of the questionnaire ({', '.join(map(str, ids))})")
    base = str(step.get("questionnaire_id"))
    made = []

    def variant(name: str, asked: list[dict[str, Any]]) -> dict[str, Any]:
        return {**{k: v for k, v in step.items() if k not in ("variants", "from_survey")}, "questionnaire_id": f"{base}~{name}",
                "questions": asked, "variant": {"of": base, "name": name, "threshold": variants.threshold}}

    for k in range(max((len(w) for w in variants.paraphrases.values()), default=0)):
        asked = [{**q, "prompt": variants.paraphrases[q["id"]][k]} if k < len(variants.paraphrases.get(q["id"], [])) else q
                 for q in questions]
        made.append(variant(f"paraphrase-{k + 1}", asked))
    if variants.shuffle_options:
        draw = random.Random(f"shuffle-options:{seed}:{base}")
        made.append(variant("shuffled", [{**q, "choices": draw.sample(q["choices"], len(q["choices"]))} if q.get("choices") else q
                                         for q in questions]))
    return made


def expand_survey_steps(data: dict[str, Any], codebooks: list[Any]) -> dict[str, Any]:
    """``data`` (a spec's) with ``from_survey`` questions filled in (from the one codebook in ``codebooks``) and each
    questionnaire's variants made into steps of their own. What cannot be done is left for validation to refuse
    (a malformed codebook is the population's error; a bad variant, the step's)."""
    steps: list[Any] = []
    for step in data["steps"]:
        if isinstance(step, dict) and step.get("from_survey") is True and not step.get("questions") and len(codebooks) == 1:
            try:
                step = {**step, "questions": survey_questions(codebooks[0])}
            except ValueError:
                pass
        if isinstance(step, dict) and step.get("type") == "questionnaire" and step.get("variants") is not None:
            try:
                made = _variants(step, data.get("seed", 0))
            except ValueError:
                steps.append(step)  # its own validation says what is wrong
                continue
            steps += [{k: v for k, v in step.items() if k != "variants"}, *made]
            continue
        steps.append(step)
    return {**data, "steps": steps}


def check_survey(populations: Sequence[Any], agents: Sequence[Any], from_survey: Sequence[int]) -> None:
    """A spec's survey rules across its sections: a ``from_survey`` questionnaire (steps ``from_survey``) needs exactly
    one survey population, and no target's answer may reach a prompt: no other population's or agent's profile may
    carry a field of a target's name or column (or a retest column).

    Raises:
        PydanticCustomError: the first breach, its field path as ``ctx.key``.
    """
    surveys = [(i, p.codebook) for i, p in enumerate(populations) if p.codebook is not None]
    if from_survey and len(surveys) != 1:
        raise PydanticCustomError(
            "from_survey", "a from_survey questionnaire needs exactly one population with a codebook; the spec has {n}",
            {"key": f"steps.{from_survey[0]}.from_survey", "n": len(surveys)})
    for index, codebook in surveys:
        hidden = {name for column in codebook.targets for name in (column, codebook.target_name(column))}
        hidden |= {spec.retest_column for spec in codebook.targets.values() if spec.retest_column is not None}
        for other, population in enumerate(populations):
            fields = set(population.profile_template) | set(population.columns or ())
            if population.codebook is None and population.rows is not None and population.columns is None:
                fields |= {key for row in population.rows for key in row}
            if leaked := sorted(fields & hidden):
                raise PydanticCustomError(
                    "target_leak", "the survey's target '{target}' (population.{index}) would reach the prompts of "
                    "population.{other} as a profile field; rename or drop it there",
                    {"key": f"population.{other}", "target": leaked[0], "index": index, "other": other})
        for position, agent in enumerate(agents):
            if leaked := sorted(set(agent.profile) & hidden):
                raise PydanticCustomError(
                    "target_leak", "the survey's target '{target}' (population.{index}) would reach agent {id}'s "
                    "prompts as a profile field", {"key": f"agents.{position}.profile", "target": leaked[0],
                                                   "index": index, "id": agent.id})
