"""An archetype group's decision: its context, its prompt, the answer's model, and each member's draw (no I/O).

The group's context is made from its members' own observations by the spec's rule:

- ``sample``: the observations of ``observation_count`` members drawn with the group's seeded rng (the same in a
  rerun), each cut to ``observation_chars``; duplicates are shown once with the number of members who saw them.
- ``common``: the ``observation_count`` lines the most members saw, each with that number, ties in first-seen order.

The prompt puts what never changes first (the instructions, the group's shared persona, the options), and what
changes each tick (the step, the context) last, so a server's prefix cache can reuse the start. The answer gives each
option a probability; each member draws one option with its own rng, so members differ and a rerun repeats them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from engine.llm.prompt import PromptTemplate
from engine.tiers.plan import ArchetypeGroup
from engine.tiers.policies import Act
from engine.tiers.spec import ArchetypeOption, ArchetypeSpec

__all__ = ["ARCHETYPE_STEP", "ARCHETYPE_SYSTEM", "archetype_messages", "decision_model", "draw_option", "group_context",
           "option_act", "probabilities"]

ARCHETYPE_SYSTEM = PromptTemplate("archetype.system", """\
You decide for a group of {size} people in a social simulation, who share these traits:
{persona}
{instruction}
Each person in the group will choose one of these options, each drawing from the probabilities you give:
{options}
Answer with your reasoning (thought), a probability from 0 to 1 for every option (they are scaled to sum to 1)\
{text_help}.""")

ARCHETYPE_STEP = PromptTemplate("archetype.step", """\
Step {step}. What members of the group observe now ({rule}):
{context}""")


def group_context(spec: ArchetypeSpec, observations: Sequence[str], rng: random.Random) -> str:
    """The group's observations, aggregated by ``spec.observations`` (see the module docstring)."""
    cut = spec.observation_chars
    if not observations:
        return "(nothing)"
    if spec.observations == "common":
        lines = Counter(line.strip()[:cut] for text in observations for line in set(text.splitlines()) if line.strip())
        top = lines.most_common(spec.observation_count)
        return "\n".join(f"- ({n} of {len(observations)} members) {line}" for line, n in top) or "(nothing)"
    chosen = rng.sample(range(len(observations)), min(spec.observation_count, len(observations)))
    seen = Counter(observations[i].strip()[:cut] or "(nothing)" for i in sorted(chosen))
    return "\n".join(f"- member {k + 1}{f' (and {n - 1} more the same)' if n > 1 else ''}: {text}"
                     for k, (text, n) in enumerate(seen.items()))


def _persona(group: ArchetypeGroup) -> str:
    return "\n".join(f"- {name}: {value}" for name, value in group.key.items()) or "- (no shared traits: a group in id order)"


def archetype_messages(spec: ArchetypeSpec, group: ArchetypeGroup, *, step: int, context: str) -> list[dict[str, Any]]:
    """The group's chat messages: fixed system prompt first, the changing step last."""
    options = "\n".join(f"- {o.name}: {o.description or (f'call {o.tool}' if o.tool else 'do nothing')}" for o in spec.options)
    writes = any(o.writes_text for o in spec.options)
    system = ARCHETYPE_SYSTEM.render(size=len(group.members), persona=_persona(group), instruction=spec.instruction,
                                     options=options, text_help=", and the text the group would write (text)" if writes else "")
    return [{"role": "system", "content": system},
            {"role": "user", "content": ARCHETYPE_STEP.render(step=step, rule=spec.observations, context=context)}]


class _Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")


def decision_model(spec: ArchetypeSpec) -> type[BaseModel]:
    """``{thought, probabilities: {<option>: 0..1}, [text]}``; an answer whose probabilities are all 0 is invalid."""
    return _decision_model(spec.model_dump_json(include={"options"}))


@cache
def _decision_model(options_json: str) -> type[BaseModel]:
    spec = ArchetypeSpec.model_validate_json(options_json)
    odds: type[BaseModel] = create_model(  # type: ignore[call-overload]  # field definitions built at run time
        "OptionProbabilities", __config__=ConfigDict(extra="forbid"),
        **{o.name: (float, Field(ge=0, le=1, description=o.description or o.name)) for o in spec.options})

    def some_chance(self: Any) -> Any:
        if sum(getattr(self.probabilities, o.name) for o in spec.options) <= 0:
            raise ValueError("every probability is 0: give at least one option a chance")
        return self

    fields: dict[str, Any] = {"thought": (str, Field(max_length=2000)), "probabilities": (odds, ...)}
    if any(o.writes_text for o in spec.options):
        fields["text"] = (str, Field(max_length=1000, description="what the group would write"))
    validators: dict[str, Any] = {"some_chance": model_validator(mode="after")(some_chance)}
    model: type[BaseModel] = create_model("ArchetypeDecision", __base__=_Decision, __validators__=validators, **fields)
    return model


def probabilities(spec: ArchetypeSpec, decision: BaseModel) -> dict[str, float]:
    """The decision's probabilities, scaled to sum to 1, by option name."""
    odds = decision.probabilities  # type: ignore[attr-defined]  # the model is built at run time
    raw = {o.name: float(getattr(odds, o.name)) for o in spec.options}
    total = sum(raw.values())
    return {name: p / total for name, p in raw.items()}


def draw_option(spec: ArchetypeSpec, odds: dict[str, float], rng: random.Random) -> ArchetypeOption:
    """The option a member draws."""
    u, running = rng.random(), 0.0
    for option in spec.options:
        running += odds[option.name]
        if u < running:
            return option
    return next(o for o in reversed(spec.options) if odds[o.name] > 0)  # u lands past a sum rounded below 1


def option_act(option: ArchetypeOption, *, agent_id: int, text: str) -> Act | None:
    """The tool call a member who drew ``option`` makes (None: the option does nothing)."""
    if option.tool is None:
        return None
    values = {"text": text, "agent_id": agent_id}
    return Act(option.tool, {k: v.format(**values) if isinstance(v, str) else v for k, v in option.arguments.items()})
