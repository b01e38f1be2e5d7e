"""docs/env_metrics.md: its example module runs as written, and its table names every built-in module's metrics."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.env.metrics import metric_rows
from engine.env.registry import env_module_names, resolve_env_module

DOC = Path(__file__).resolve().parents[3] / "docs" / "env_metrics.md"
T0 = datetime(2026, 1, 1, 8, 0)


def _example() -> type:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 1, "the doc should have exactly one python block (the example module)"
    namespace: dict[str, Any] = {"__name__": "env_metrics_doc"}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)  # noqa: S102 - the doc's own code
    return namespace["QuietMessagingSpace"]


async def test_the_example_module_reports_its_metric_beside_messaging_ones() -> None:
    space = _example()()
    await space.init(T0)
    space.bind_agents([1, 2, 3, 4])
    await space.call_tool("send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"})
    await space.call_tool("send_message", {"agent_id": 3, "to_agent_id": 2, "content": "hello"})
    await space.step(3600, T0 + timedelta(hours=1))
    rows = {r["metric"]: r for r in metric_rows("doc", 1, T0, [space])}
    assert rows["silent_share"]["value"] == 0.5 and rows["messages_sent"]["value"] == 2.0
    assert rows["silent_share"]["module"] == "QuietMessagingSpace"
    assert rows["silent_share"]["description"] == "share of the run's agents who sent nothing in this step"


def _table() -> dict[str, set[str]]:
    section = DOC.read_text(encoding="utf-8").split("## What the built-in modules report", 1)[1]
    listed: dict[str, set[str]] = {}
    for modules, metrics in re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|$", section, flags=re.MULTILINE):
        for module in re.findall(r"`(\w+)`", modules):
            listed[module] = set(re.findall(r"`(\w+)`", metrics))  # `price_<good>` and the like are per instance
    return listed


@pytest.mark.parametrize("name", env_module_names())
def test_the_table_lists_exactly_each_built_in_modules_declared_metrics(name: str) -> None:
    cls = resolve_env_module(name)
    assert _table().get(name) == set(cls.METRICS), f"docs/env_metrics.md lists other metrics for {name}"
