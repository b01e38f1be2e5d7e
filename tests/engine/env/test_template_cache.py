"""TemplateCache: exact and similar lookups, single-flight generation, persistence, embedders."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from pathlib import Path

import pytest

from engine.env.routers.embedding import LiteLLMEmbedder, SimEmbedder, resolve_embedder, wordllama_available
from engine.env.routers.template_cache import CacheStats, TemplateCache, fill_template, normalize_template, placeholders
from engine.errors import SpecError

SEND = "send {amount} coins to agent {to}"


async def test_exact_match_ignores_whitespace_differences() -> None:
    cache = TemplateCache()
    await cache.store("rw", SEND, "code-1")
    hit = await cache.lookup("rw", "  send {amount}  coins to\nagent {to} ")
    assert hit is not None and (hit.code, hit.similarity) == ("code-1", 1.0)
    assert cache.stats.hits_exact == 1


async def test_similar_template_above_the_threshold_hits() -> None:
    cache = TemplateCache()
    await cache.store("rw", SEND, "code-1")
    hit = await cache.lookup("rw", "please send {amount} coins to agent {to}")
    assert hit is not None and hit.code == "code-1"
    assert 0.85 <= hit.similarity < 1.0
    assert (cache.stats.hits_similar, cache.stats.misses) == (1, 0)


async def test_dissimilar_template_below_the_threshold_misses() -> None:
    cache = TemplateCache()
    await cache.store("rw", "send {amount} coins to agent {to} and {note}", "code-1")
    await cache.store("rw", SEND, "code-2")
    assert await cache.lookup("rw", "read the inbox of agent {to} for {amount}") is None
    assert cache.stats.misses == 1


async def test_threshold_is_configurable() -> None:
    strict = TemplateCache(threshold=0.99)
    await strict.store("rw", SEND, "code-1")
    assert await strict.lookup("rw", "please send {amount} coins to agent {to}") is None
    with pytest.raises(ValueError, match="threshold"):
        TemplateCache(threshold=0.0)


async def test_similar_template_with_other_placeholders_never_hits() -> None:
    cache = TemplateCache(threshold=0.5)
    await cache.store("rw", SEND, "code-1")
    assert await cache.lookup("rw", "send {amount} coins to agent {recipient}") is None


async def test_modes_are_separate() -> None:
    cache = TemplateCache()
    await cache.store("ro", SEND, "code-1")
    assert await cache.lookup("rw", SEND) is None


async def test_cache_persists_and_reloads(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "abc.json"
    cache = TemplateCache(path)
    await cache.store("rw", SEND, "code-1")
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and saved["embedder"] == SimEmbedder().name
    assert [(e["mode"], e["template"], e["code"]) for e in saved["entries"]] == [("rw", SEND, "code-1")]
    assert not [p for p in path.parent.iterdir() if p.name != "abc.json"]  # no temp file left behind

    reloaded = TemplateCache(path)
    assert len(reloaded) == 1
    hit = await reloaded.lookup("rw", "please send {amount} coins to agent {to}")
    assert hit is not None and hit.code == "code-1"


async def test_vectors_of_another_embedder_are_recomputed(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    await TemplateCache(path, embedder=SimEmbedder(seed=1)).store("rw", SEND, "code-1")
    other = TemplateCache(path, embedder=SimEmbedder(seed=2))
    hit = await other.lookup("rw", "please send {amount} coins to agent {to}")
    assert hit is not None and hit.code == "code-1"


async def test_unreadable_cache_file_is_ignored_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "c.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        cache = TemplateCache(path)
    assert len(cache) == 0
    assert "ignoring unreadable CodeGen cache" in caplog.text


async def test_evict_drops_the_entry_counts_an_error_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    cache = TemplateCache(path)
    await cache.store("rw", SEND, "code-1")
    hit = await cache.lookup("rw", SEND)
    assert hit is not None
    cache.evict(hit)
    cache.evict(hit)  # already gone: not counted twice
    assert cache.stats.errors == 1
    assert json.loads(path.read_text())["entries"] == []


async def test_least_used_entries_go_first_past_max_entries() -> None:
    cache = TemplateCache(max_entries=2)
    await cache.store("rw", "a {x}", "A")
    await cache.store("rw", "b {x}", "B")
    await cache.lookup("rw", "a {x}")
    await cache.store("rw", "c {x}", "C")
    assert [await cache.lookup("rw", t) is not None for t in ("a {x}", "b {x}", "c {x}")] == [True, False, True]


async def test_fifty_concurrent_misses_make_one_generation() -> None:
    cache = TemplateCache()
    calls = 0

    async def generate() -> tuple[str | None, str]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return "code-1", "payload"

    outcomes = await asyncio.gather(*(cache.generate_once("rw", SEND, generate) for _ in range(50)))

    assert calls == 1 and cache.stats.generations == 1
    assert {(code, payload) for code, payload, _ in outcomes} == {("code-1", "payload")}
    assert sum(leader for _, _, leader in outcomes) == 1
    assert (await cache.lookup("rw", SEND)).code == "code-1"  # type: ignore[union-attr]


async def test_a_generation_without_code_is_counted_and_not_stored() -> None:
    cache = TemplateCache()

    async def generate() -> tuple[str | None, str]:
        return None, "it failed"

    assert await cache.generate_once("rw", SEND, generate) == (None, "it failed", True)
    assert cache.stats.errors == 1 and len(cache) == 0


async def test_a_cancelled_leader_does_not_cancel_the_followers() -> None:
    cache = TemplateCache()

    async def generate() -> tuple[str | None, str]:
        await asyncio.sleep(0.05)
        return "code-1", "payload"

    leader = asyncio.create_task(cache.generate_once("rw", SEND, generate))
    await asyncio.sleep(0)
    follower = asyncio.create_task(cache.generate_once("rw", SEND, generate))
    await asyncio.sleep(0)
    leader.cancel()
    assert await follower == ("code-1", "payload", False)


def test_stats_hit_rate() -> None:
    assert CacheStats().hit_rate == 0.0
    stats = CacheStats(hits_exact=2, hits_similar=1, misses=1)
    assert (stats.requests, stats.hit_rate) == (4, 0.75)
    assert stats.as_dict()["hit_rate"] == 0.75


def test_template_helpers() -> None:
    assert placeholders("send {amount} to {to} {to}") == {"amount", "to"}
    assert normalize_template(" a \n b ") == "a b"
    assert fill_template("send {amount} to {to}", {"amount": 3}) == "send 3 to {to}"
    # Only bare names: field access and format specs are left alone, never evaluated.
    assert fill_template("{x.__class__} {x!r} {x}", {"x": 1}) == "{x.__class__} {x!r} 1"


async def test_sim_embeddings_are_deterministic_unit_vectors() -> None:
    a, b = await SimEmbedder().embed([SEND, SEND])
    assert a == b and math.isclose(sum(x * x for x in a), 1.0)
    assert (await SimEmbedder(seed=3).embed([SEND]))[0] != a


def test_resolve_embedder() -> None:
    assert isinstance(resolve_embedder(None), SimEmbedder)
    assert isinstance(resolve_embedder("sim"), SimEmbedder)
    remote = resolve_embedder("openai/text-embedding-3-small")
    assert isinstance(remote, LiteLLMEmbedder) and remote.name == "litellm/openai/text-embedding-3-small"
    if not wordllama_available():
        assert isinstance(resolve_embedder("auto"), SimEmbedder)
        with pytest.raises(SpecError, match="wordllama"):
            resolve_embedder("wordllama")


async def test_wordllama_embeddings_when_installed() -> None:
    pytest.importorskip("wordllama")
    embedder = resolve_embedder("wordllama")
    a, b, c = await embedder.embed([SEND, "please send {amount} coins to agent {to}", "the weather is nice"])
    cos = lambda u, v: sum(x * y for x, y in zip(u, v, strict=True))  # noqa: E731
    assert cos(a, b) > cos(a, c)
