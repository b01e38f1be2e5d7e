"""Token prices from litellm's price map, read as JSON without importing litellm.

litellm ships the map as ``model_prices_and_context_window_backup.json`` inside its package. The
file is found through the package's import spec (which does not import it) and parsed once per
process, on the first price asked for (about 50 ms).
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["PRICE_MAP_FILE", "cost_usd", "price_map"]

#: The price map's file name inside the installed litellm package.
PRICE_MAP_FILE = "model_prices_and_context_window_backup.json"


@cache
def price_map() -> dict[str, dict[str, Any]]:
    """litellm's price map by model name; empty when litellm (or its file) is not installed."""
    spec = importlib.util.find_spec("litellm")
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / PRICE_MAP_FILE
        if path.is_file():
            with path.open(encoding="utf-8") as file:
                loaded = json.load(file)
            return {name: entry for name, entry in loaded.items() if isinstance(entry, dict)}
    return {}


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """The price of one call to ``model`` (``openai/gpt-4o-mini`` or ``gpt-4o-mini``).

    The name is looked up without its provider prefix first, then as given.

    Returns:
        US dollars; None for a model the map does not price (a simulated or local one).
    """
    prices = price_map()
    names = (model.split("/", 1)[1], model) if "/" in model else (model,)
    for name in names:
        entry = prices.get(name)
        if entry is None:
            continue
        per_input, per_output = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if per_input is None and per_output is None:
            return None
        return input_tokens * float(per_input or 0) + output_tokens * float(per_output or 0)
    return None
