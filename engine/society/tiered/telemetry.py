"""Token telemetry per tick: prompt and completion tokens by tier (p50, p95, max), and the prompts' reusable prefix.

A batch sums its calls into :class:`CallSizes` per tier (``llm``: agents' own calls; ``archetype``: groups'
decisions; ``router``: the env router's calls serving agents; ``other``: anything else), the driver merges the
batches' and the router's, and :func:`telemetry_rows` makes the tick's ``token_telemetry`` rows: one per tier, and
one ``total``. The same rows go to the progress record (its ``tokens``), the ``tick`` event, and (as sums) the
experiment's span on the Dask dashboard (:func:`digest_on_span`). No I/O here but the dashboard's metric hook.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distributed.metrics import context_meter

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["TOKEN_TELEMETRY", "CallSizes", "call_tier", "digest_on_span", "merge_sizes", "sizes_by_tier", "telemetry_rows"]

_CALLERS = (("agent:", "llm"), ("archetype:", "archetype"), ("router", "router"))


def call_tier(caller: str) -> str:
    """The tier a call is counted under, from its ``caller``."""
    return next((tier for prefix, tier in _CALLERS if caller.startswith(prefix)), "other")


@dataclass
class CallSizes:
    """One tier's calls: each call's prompt and completion tokens, and the prompts' characters and reused prefix."""

    prompt: list[int] = field(default_factory=list)
    completion: list[int] = field(default_factory=list)
    tracked_chars: int = 0  #: prompt characters of the calls whose prefix is tracked
    prefix_chars: int = 0  #: of which repeat the caller's previous prompt
    cost_usd: float = 0.0

    def add(self, row: Mapping[str, Any]) -> None:
        self.prompt.append(int(row.get("input_tokens") or 0))
        self.completion.append(int(row.get("output_tokens") or 0))
        self.cost_usd += float(row.get("cost_usd") or 0.0)
        if row.get("prefix_chars") is not None:
            self.tracked_chars += int(row.get("prompt_chars") or 0)
            self.prefix_chars += int(row["prefix_chars"])

    def merge(self, other: CallSizes) -> None:
        self.prompt += other.prompt
        self.completion += other.completion
        self.tracked_chars += other.tracked_chars
        self.prefix_chars += other.prefix_chars
        self.cost_usd += other.cost_usd


def sizes_by_tier(rows: Iterable[Mapping[str, Any]]) -> dict[str, CallSizes]:
    """``llm_calls`` rows summed per tier."""
    found: dict[str, CallSizes] = {}
    for row in rows:
        found.setdefault(call_tier(str(row.get("caller") or "")), CallSizes()).add(row)
    return found


def merge_sizes(parts: Iterable[Mapping[str, CallSizes]]) -> dict[str, CallSizes]:
    merged: dict[str, CallSizes] = {}
    for part in parts:
        for tier, sizes in part.items():
            merged.setdefault(tier, CallSizes()).merge(sizes)
    return merged


def _quantile(values: list[int], q: float) -> int | None:
    """The nearest-rank ``q`` quantile (None: no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def telemetry_rows(run: str, step: int, sizes: Mapping[str, CallSizes], members: Mapping[str, int]) -> list[dict[str, Any]]:
    """The tick's ``token_telemetry`` rows: one per tier with calls or members, then ``total``."""
    total = CallSizes()
    for part in sizes.values():
        total.merge(part)
    rows = []
    for tier in [*sorted(set(sizes) | set(members)), "total"]:
        part = total if tier == "total" else sizes.get(tier, CallSizes())
        count = sum(members.values()) if tier == "total" else members.get(tier, 0)
        rows.append({
            "run": run, "step": step, "tier": tier, "members": count, "calls": len(part.prompt),
            "calls_per_member": len(part.prompt) / count if count else None,
            "prompt_tokens": sum(part.prompt), "completion_tokens": sum(part.completion), "cost_usd": part.cost_usd,
            "prompt_p50": _quantile(part.prompt, 0.5), "prompt_p95": _quantile(part.prompt, 0.95),
            "prompt_max": max(part.prompt, default=None), "completion_p50": _quantile(part.completion, 0.5),
            "completion_p95": _quantile(part.completion, 0.95), "completion_max": max(part.completion, default=None),
            "prefix_share": part.prefix_chars / part.tracked_chars if part.tracked_chars else None,
        })
    return rows


def digest_on_span(sizes: Mapping[str, CallSizes]) -> None:
    """Add a batch's token sums to the Dask dashboard's fine performance metrics of the task's span (unit
    ``tokens``: prompt and completion per tier, and the prompts' reused prefix); nothing outside a Dask task."""
    for tier, part in sizes.items():
        context_meter.digest_metric(f"{tier} prompt tokens", float(sum(part.prompt)), "tokens")
        context_meter.digest_metric(f"{tier} completion tokens", float(sum(part.completion)), "tokens")
        context_meter.digest_metric(f"{tier} calls", float(len(part.prompt)), "calls")
        if part.tracked_chars:
            context_meter.digest_metric(f"{tier} reused prefix tokens", part.prefix_chars / 4, "tokens")


TOKEN_TELEMETRY = DatasetSchema(
    name="token_telemetry",
    kind="society",
    description="one row per step per tier (llm, archetype, router, other) and one 'total': LLM calls, prompt and "
    "completion tokens (sum, p50, p95, max over the step's calls), cost, and the share of prompt characters that "
    "repeat the caller's previous prompt (what a prefix cache can reuse)",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step, 1-based"),
        Column(name="tier", type="string", description="llm | archetype | router | other | total"),
        Column(name="members", type="int64", description="agent-steps of the tier in the step (router, other: 0)"),
        Column(name="calls", type="int64", description="LLM calls, failed ones included"),
        Column(name="calls_per_member", type="float64", description="calls / members (null: no members)"),
        Column(name="prompt_tokens", type="int64", description="prompt tokens of the calls"),
        Column(name="completion_tokens", type="int64", description="completion tokens of the calls"),
        Column(name="cost_usd", type="float64", description="provider cost where the price is known"),
        Column(name="prompt_p50", type="int64", description="median prompt tokens of a call"),
        Column(name="prompt_p95", type="int64", description="95th percentile (nearest rank)"),
        Column(name="prompt_max", type="int64", description="the largest prompt"),
        Column(name="completion_p50", type="int64", description="median completion tokens"),
        Column(name="completion_p95", type="int64", description="95th percentile (nearest rank)"),
        Column(name="completion_max", type="int64", description="the largest completion"),
        Column(name="prefix_share", type="float64", description="prompt characters that repeat the caller's previous prompt "
               "of the same template, over those of the tracked calls (null: none tracked)"),
    ),
)
