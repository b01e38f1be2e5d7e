"""engine.society.tiered.telemetry: a tick's calls by tier, as token_telemetry rows."""

from __future__ import annotations

from engine.society.tiered.telemetry import CallSizes, call_tier, merge_sizes, sizes_by_tier, telemetry_rows


def call(caller: str, prompt: int, completion: int, *, chars: int = 0, prefix: int | None = None) -> dict:
    return {"caller": caller, "input_tokens": prompt, "output_tokens": completion, "prompt_chars": chars,
            "prefix_chars": prefix, "cost_usd": 0.001}


def test_callers_map_to_tiers() -> None:
    assert [call_tier(c) for c in ("agent:4", "archetype:1.2", "router", "helper")] == ["llm", "archetype", "router", "other"]


def test_rows_give_each_tier_and_the_total_their_quantiles_and_prefix_share() -> None:
    batch_one = sizes_by_tier([call("agent:1", p, 10, chars=4 * p, prefix=2 * p) for p in range(1, 101)])
    batch_two = sizes_by_tier([call("archetype:0.0", 500, 50), call("archetype:0.1", 700, 70, chars=2800, prefix=700),
                               call("router", 40, 4)])
    rows = {r["tier"]: r for r in telemetry_rows("r", 3, merge_sizes([batch_one, batch_two]),
                                                 {"llm": 100, "archetype": 2000, "rule": 50})}
    assert list(rows) == ["archetype", "llm", "router", "rule", "total"]
    llm = rows["llm"]
    assert (llm["calls"], llm["prompt_p50"], llm["prompt_p95"], llm["prompt_max"]) == (100, 50, 95, 100)
    assert llm["prefix_share"] == 0.5 and llm["calls_per_member"] == 1.0 and llm["prompt_tokens"] == 5050
    archetype = rows["archetype"]
    assert (archetype["calls"], archetype["calls_per_member"], archetype["completion_max"]) == (2, 0.001, 70)
    assert archetype["prefix_share"] == 0.25  # only the tracked call counts
    assert rows["rule"]["calls"] == 0 and rows["rule"]["prompt_p50"] is None and rows["rule"]["prefix_share"] is None
    assert rows["router"]["members"] == 0 and rows["router"]["calls_per_member"] is None
    total = rows["total"]
    assert total["calls"] == 103 and total["members"] == 2150 and total["prompt_max"] == 700
    assert abs(total["cost_usd"] - 0.103) < 1e-9


def test_merging_keeps_every_call() -> None:
    one, two = CallSizes([1, 2], [1, 1], 10, 5, 0.5), CallSizes([3], [2], 0, 0, 0.25)
    merged = merge_sizes([{"llm": one}, {"llm": two, "router": CallSizes([9], [9])}])
    assert merged["llm"].prompt == [1, 2, 3] and merged["llm"].prefix_chars == 5 and merged["llm"].cost_usd == 0.75
