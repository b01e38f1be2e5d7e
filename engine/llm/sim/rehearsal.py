"""The rehearsal: a simulated LLM (``sim/rehearsal``) that answers a survey's target items from the real answers.

A validation can then be rehearsed with no model: with noise 0 every target item is answered as the
respondent really did, so fidelity must come out perfect; with noise ``p`` each answer is, with
probability ``p`` (seeded per agent and item), another of the item's options drawn evenly, so accuracy
is ``1 - p`` in expectation and the distances follow from the real distribution. That is how the
metrics are shown honest without a real model.

It reads the run's ``survey_answers`` dataset (which no agent's prompt ever shows) for the agent its
call serves (``serving_agent`` and ``serving_run``, set by the questionnaire batch). Everything else,
and every question that is no target item, is answered as ``sim/*`` answers it. Set the noise in the
spec: ``llm: {default: {model: sim/rehearsal, extra: {rehearse_noise: 0.2}}}``. In-process only.
"""

from __future__ import annotations

import functools
import json
import random
from typing import Any

from engine.storage.reader import ReplayReader

__all__ = ["REHEARSAL", "rehearse"]

#: The simulated model's name that rehearses (``sim/rehearsal``).
REHEARSAL = "rehearsal"


@functools.lru_cache(maxsize=8)
def _real_answers(run: tuple[str, str]) -> dict[tuple[int, str], str]:
    """The real answers of the run at ``run[0]``, read once per driver (``run[1]``: its run id)."""
    with ReplayReader(run[0]) as reader:
        if "survey_answers" not in reader.datasets():
            return {}
        rows = reader.query("SELECT agent_id, item, label FROM survey_answers WHERE label IS NOT NULL").to_pylist()
    return {(r["agent_id"], r["item"]): r["label"] for r in rows}


def _options(schema: dict[str, Any], field: dict[str, Any]) -> list[str] | None:
    """The enum of a questionnaire answer field's ``value`` (following its ``$ref``), if it has one."""
    ref = field.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        field = schema.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    value = field.get("properties", {}).get("value", {})
    enum = value.get("enum")
    return [str(o) for o in enum] if isinstance(enum, list) and enum else None


def rehearse(text: str | None, schema: dict[str, Any], *, agent: int | None, run: tuple[str, str] | None, noise: float,
             seed: int) -> str | None:
    """``text`` (a simulated answer to ``schema``) with each target item's value set from the real answer."""
    if text is None or agent is None or run is None:
        return text
    real = _real_answers(run)
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return text
    if not isinstance(reply, dict):
        return text
    for item, field in schema.get("properties", {}).items():
        truth = real.get((agent, item))
        options = _options(schema, field) if isinstance(field, dict) else None
        if truth is None or options is None or truth not in options or not isinstance(reply.get(item), dict):
            continue
        draw = random.Random(f"rehearse:{seed}:{agent}:{item}")
        others = [o for o in options if o != truth]
        reply[item]["value"] = draw.choice(others) if others and draw.random() < noise else truth
    return json.dumps(reply)
