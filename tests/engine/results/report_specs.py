"""Specs the results-page tests (and ``docs/screenshots.py``) run: the demo with a questionnaire, and a 2x2 sweep."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

__all__ = ["DEMO", "MOOD", "demo_with_questionnaire", "sweep_2x2"]

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo.yaml"

#: A questionnaire after the demo's ticks: one integer and one choice question (both plotted as bars).
MOOD: dict[str, Any] = {
    "type": "questionnaire", "questionnaire_id": "mood", "questions": [
        {"id": "happy", "prompt": "How happy are you (1-5)?", "response_type": "integer", "min": 1, "max": 5},
        {"id": "plan", "prompt": "Stay home or go out tonight?", "response_type": "choice", "choices": ["home", "out"]},
    ],
}


def demo_with_questionnaire() -> dict[str, Any]:
    """``examples/demo.yaml`` (20 people, 3 ticks, the simulated LLM) followed by the ``mood`` questionnaire."""
    spec: dict[str, Any] = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    spec["steps"].append(copy.deepcopy(MOOD))
    return spec


def sweep_2x2(agents: tuple[int, int] = (4, 8)) -> dict[str, Any]:
    """The demo, smaller, swept over 2 temperatures x 2 population sizes (4 cells), with the questionnaire."""
    spec = demo_with_questionnaire()
    spec["name"] = "demo-sweep"
    spec["population"][0]["count"] = agents[0]
    spec["environment"]["modules"][0]["kwargs"] = {"groups": {"neighbourhood": [0, 1, 2, 3]}}
    spec["sweep"] = {"grid": {"llm.default.options.temperature": [0.2, 0.9], "population.0.count": list(agents)}}
    return spec
